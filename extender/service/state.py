"""The cluster as the scheduler sees it: seven list+watch reflectors feeding one engine `Snapshot`, kept up to date
event by event (never rebuilt per request). Namespaces are watched for their labels, which pod affinity terms'
namespace selectors match. HyperNodes are optional: a cluster without their CRD (or without the RBAC rule to read
them) is scheduled as flat, and the reflector keeps checking for them (`Reflector(optional=True)`).

Watch objects arrive without `kind`; each reflector's handler stamps it before handing the object to the
snapshot's parsers. A pod of one of `scheduler_names` that names no PodGroup yet is stamped with the one the
PodGroup controller gives it (`lapilli.plainpods`): its annotation comes with its Binding or a later patch, and
until then sessions and verbs count it in that PodGroup once it exists, as they will once the annotation lands.

An object the parsers reject (a malformed quantity, say) is left out and kept in `ignored` with the reason until it
parses again or goes away: the leader's session loop reports each one (a Warning Event on the object,
`lapilli_extender_ignored_objects{kind}`); it never stops the stream.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, NamedTuple, Protocol

from extender.engine.snapshot import PodGroupRecord, Snapshot, add_object, copy_snapshot, remove_object
from lapilli.api.constants import GROUP_NAME_ANNOTATION
from lapilli.cluster import Reflector, Shared
from lapilli.cluster.reflector import Event
from lapilli.kube import KubeClient
from lapilli.kube.resources import (
    CONFIG_MAPS,
    HYPERNODES,
    NAMESPACES,
    NODES,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    Resource,
)
from lapilli.meta import (
    annotations_of,
    is_deleting,
    meta,
    name_of,
    namespace_of,
    only_metadata,
    slim_pod,
    uid_of,
    without_managed_fields,
)
from lapilli.plainpods import group_of

log = logging.getLogger("lapilli.extender")

WATCHED: tuple[Resource, ...] = (NODES, PODS, PODGROUPS, QUEUES, PRIORITY_CLASSES, HYPERNODES, NAMESPACES)
OPTIONAL: frozenset[Resource] = frozenset({HYPERNODES})
# Each object is stored and handed out without what nothing here reads (the controllers share the Pod reflector).
_TRANSFORMS: dict[Resource, Callable[[dict[str, Any]], dict[str, Any]]] = {
    PODS: slim_pod, NODES: without_managed_fields}


# Where the snapshot keeps each kind's record, and whether its key is namespaced. A kind missing here (a
# PriorityClass, whose globalDefault the record does not hold; one a later snapshot adds) reads as changed by
# every event.
_RECORDS: dict[str, tuple[str, bool]] = {
    "Node": ("nodes", False), "Pod": ("pods", True), "PodGroup": ("podgroups", True), "Queue": ("queues", False),
    "ConfigMap": ("device_configs", True),
}


def record_of(snap: Snapshot, obj: Mapping[str, Any]) -> object | None:
    """What `snap` holds for `obj` (None when nothing; a fresh object for a kind it keeps no record of)."""
    where = _RECORDS.get(str(obj.get("kind")))
    if where is None:
        return object()
    table, namespaced = where
    key = f"{namespace_of(obj) or 'default'}/{name_of(obj)}" if namespaced else name_of(obj)
    found: object | None = getattr(snap, table).get(key)
    return found


class RecordListener(Protocol):
    """Told each change a watch event made to the snapshot: the object's kind, its record before and after (None
    when absent) and the snapshot."""

    def __call__(self, kind: str, old: object | None, new: object | None, snap: Snapshot, /) -> None: ...


class Ignored(NamedTuple):
    """An object the scheduler leaves out because it cannot be read: a reference to it (for an Event) and why."""

    kind: str
    ref: dict[str, Any]
    error: str


def _reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata") or {}
    kept = {k: metadata[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in metadata}
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": kept}


def _pod_matters(event_type: str, pod: Mapping[str, Any], podgroups: Mapping[str, PodGroupRecord]) -> bool:
    """Whether a pod event can change what a session would plan: a gang member waiting for a node, or room
    coming free (a pod deleted, finishing or terminating). Bound pods changing status do not, nor does a pod whose
    PodGroup asks for one pod (or does not exist yet): filter passes it without a plan, and its PodGroup's status
    can wait for the next session of the period."""
    if event_type == "DELETED" or is_deleting(pod):
        return True
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return True
    group = annotations_of(pod).get(GROUP_NAME_ANNOTATION)
    if (pod.get("spec") or {}).get("nodeName") or not group:
        return False
    podgroup = podgroups.get(f"{namespace_of(pod) or 'default'}/{group}")
    return podgroup is not None and podgroup.min_member > 1


def _podgroup_matters(before: object | None, after: object | None, members: Collection[str]) -> bool:
    """Whether a PodGroup event can change what a session would plan: not when only its status changed (the
    session's own write coming back, mostly), nor when a PodGroup of one pod appears after its pod (a plain pod's:
    filter passes that pod without a plan)."""
    if not isinstance(after, PodGroupRecord):
        return True  # gone (room), or not readable
    if isinstance(before, PodGroupRecord):
        return dataclasses.replace(after, phase=before.phase, conditions=before.conditions) != before
    return not (after.min_member <= 1 and members)


def _settled(event_type: str, pod: Mapping[str, Any]) -> bool:
    """The API server now decides where this pod is: it has a node, it ended, or it is gone."""
    if event_type == "DELETED" or (pod.get("spec") or {}).get("nodeName"):
        return True
    return (pod.get("status") or {}).get("phase") not in ("Pending", "", None)


def _card_problem(obj: Mapping[str, Any], snap: Snapshot) -> str:
    """What the scheduler cannot read of a node's vGPU cards or a pod's card assignment ("" when nothing)."""
    kind = obj.get("kind")
    if kind == "Node":
        node = snap.nodes.get(name_of(obj))
        return node.cards.problem if node is not None else ""
    if kind == "Pod":
        pod = snap.pods.get(f"{namespace_of(obj) or 'default'}/{name_of(obj)}")
        return pod.devices.problem if pod is not None and pod.devices is not None else ""
    return ""


class ClusterState:
    def __init__(
        self,
        client: KubeClient,
        on_change: Callable[[], None] | None = None,
        on_pod_settled: Callable[[str], None] | None = None,
        device_configs: Iterable[str] = (),
        on_node: Callable[[str], None] | None = None,
        whole_pods: bool = True,
        shared: Shared | None = None,
        scheduler_names: Iterable[str] = (),
    ) -> None:
        """`device_configs`: "namespace/name" of vGPU device-config ConfigMaps to follow; `on_node`: told each
        node whose pods or own object changed; `whole_pods` False: the Pod store keeps only each pod's metadata (an
        owner that reads pods through the snapshot alone, as the session process). Pods are stored slimmed
        (`lapilli.meta.slim_pod`: 50,000 running pods cost ~0.5 GB whole, ~0.3 GB so) and Nodes without their
        managedFields either way. `shared`: the process's reflectors, when other owners in it read the same kinds
        (the service's controllers and admission caches); `scheduler_names`: whose pods get a PodGroup without
        naming one."""
        self.snapshot = Snapshot()
        self.scheduler_names = frozenset(scheduler_names)
        self.ignored: dict[str, Ignored] = {}  # "Kind ns/name" -> an object left out, until it parses or goes
        # "Kind ns/name" -> a node whose vGPU cards, or a pod whose card assignment, cannot be read (in part)
        self.card_problems: dict[str, Ignored] = {}
        self.pod_keys_by_uid: dict[str, str] = {}
        self.gang_members: dict[str, set[str]] = {}  # "ns/pg" -> pod keys naming it
        self._node_of: dict[str, str] = {}  # pod key -> spec.nodeName, for bound pods
        self._pods_by_node: dict[str, set[str]] = {}  # node -> keys of the pods bound to it (bind checks its room)
        self._on_change = on_change
        # Told each pod key that got a node, finished or went away.
        self.settled_listeners: list[Callable[[str], None]] = [on_pod_settled] if on_pod_settled is not None else []
        self.node_listeners: list[Callable[[str], None]] = [on_node] if on_node is not None else []
        self.listeners: list[RecordListener] = []  # what each event changed in the snapshot (parked gangs)
        self.shared = shared if shared is not None else Shared(client)
        self.reflectors = [
            self.shared.reflector(res, self._handler(res), name=res.plural, optional=res in OPTIONAL,
                                  transform=_TRANSFORMS.get(res),
                                  stored=only_metadata if res is PODS and not whole_pods else None)
            for res in WATCHED
        ]
        for key in sorted(set(device_configs)):
            namespace, _, name = key.partition("/")
            self.reflectors.append(Reflector(client, CONFIG_MAPS, namespace=namespace,
                                             field_selector=f"metadata.name={name}", name=f"configmap {key}",
                                             handlers=[self._handler(CONFIG_MAPS)]))

    def _handler(self, res: Resource) -> Callable[[Event], None]:
        def handle(event: Event) -> None:
            obj = dict(event.obj)
            obj.setdefault("apiVersion", res.api_version)
            obj.setdefault("kind", res.kind)
            self.apply(event.type, obj)

        return handle

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        """Fold one watch event into the snapshot."""
        if obj.get("kind") == "Pod" and self.scheduler_names and not annotations_of(obj).get(GROUP_NAME_ANNOTATION):
            group = group_of(obj, self.scheduler_names)
            if group:
                named = {**annotations_of(obj), GROUP_NAME_ANNOTATION: group}
                obj = {**obj, "metadata": {**meta(obj), "annotations": named}}
        ident = f"{obj.get('kind')} {namespace_of(obj)}/{name_of(obj)}"
        kind = obj.get("kind")
        before = record_of(self.snapshot, obj) if self.listeners or kind == "PodGroup" else None
        try:
            if event_type == "DELETED":
                remove_object(self.snapshot, obj)
            else:
                add_object(self.snapshot, obj)
            self.ignored.pop(ident, None)
        except (ValueError, KeyError, TypeError) as exc:
            error = " ".join(str(exc).split())[:500] or type(exc).__name__
            if self.ignored.get(ident, Ignored("", {}, "")).error != error:
                log.warning("ignoring %s: %s", ident, error)
            self.ignored[ident] = Ignored(str(obj.get("kind")), _reference(obj), error)
            remove_object(self.snapshot, obj)
        after = record_of(self.snapshot, obj) if self.listeners or kind == "PodGroup" else None
        if self.listeners:
            for told in self.listeners:
                told(str(obj.get("kind")), before, after, self.snapshot)
        problem = "" if event_type == "DELETED" else _card_problem(obj, self.snapshot)
        if not problem:
            self.card_problems.pop(ident, None)
        elif self.card_problems.get(ident, Ignored("", {}, "")).error != problem:
            log.warning("%s: %s; the scheduler counts what it can read of it", ident, problem)
            self.card_problems[ident] = Ignored(str(obj.get("kind")), _reference(obj), problem)
        relevant = True
        if kind == "PodGroup":
            key = f"{namespace_of(obj) or 'default'}/{name_of(obj)}"
            relevant = _podgroup_matters(before, after, self.gang_members.get(key, ()))
        if kind == "Pod":
            touched = self._index_pod(event_type, obj)
            relevant = _pod_matters(event_type, obj, self.snapshot.podgroups)
            if self.settled_listeners and _settled(event_type, obj):
                for settled in self.settled_listeners:
                    settled(f"{namespace_of(obj) or 'default'}/{name_of(obj)}")
        else:
            touched = {name_of(obj)} if obj.get("kind") == "Node" else set()
        for listener in self.node_listeners:
            for node in touched:
                listener(node)
        if relevant and self._on_change is not None:
            self._on_change()

    def _index_pod(self, event_type: str, obj: Mapping[str, Any]) -> set[str]:
        """Index the pod; returns the nodes it was or is bound to."""
        namespace = namespace_of(obj) or "default"
        key = f"{namespace}/{name_of(obj)}"
        uid = uid_of(obj)
        group = annotations_of(obj).get(GROUP_NAME_ANNOTATION)
        node = None if event_type == "DELETED" else (obj.get("spec") or {}).get("nodeName")
        touched = {n for n in (self._node_of.get(key), node) if n}
        if self._node_of.get(key) != node:
            old = self._node_of.pop(key, None)
            if old is not None:
                self._pods_by_node[old].discard(key)
            if node:
                self._node_of[key] = node
                self._pods_by_node.setdefault(node, set()).add(key)
        if event_type == "DELETED":
            self.pod_keys_by_uid.pop(uid, None)
            if group:
                self.gang_members.get(f"{namespace}/{group}", set()).discard(key)
            return touched
        if uid:
            self.pod_keys_by_uid[uid] = key
        if group:
            self.gang_members.setdefault(f"{namespace}/{group}", set()).add(key)
        return touched

    def bound_members(self, gang: str) -> int:
        """Members of a PodGroup the API server has already placed on a node (and that are not finished)."""
        pods = self.snapshot.pods
        count = 0
        for key in self.gang_members.get(gang, ()):
            pod = pods.get(key)
            if pod is not None and pod.node_name and pod.phase in ("Pending", "Running", "Succeeded"):
                count += 1
        return count

    def pods_on(self, node: str) -> set[str]:
        """Keys of the pods the cache shows bound to `node` (finished ones included: the caller decides)."""
        return self._pods_by_node.get(node, set())

    def store(self, kind: str) -> dict[str, dict[str, Any]]:
        """The raw objects of one kind as last seen (the reflector's store)."""
        return next(r.store for r in self.reflectors if r.resource.kind == kind)

    def pod(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.store("Pod").get(f"{namespace}/{name}")

    def awaits_node(self, pod_key: str) -> bool:
        """Whether the pod ("namespace/name") still waits for a node as this process last heard: not bound, ended,
        being deleted or gone."""
        pod = self.store("Pod").get(pod_key)
        return pod is not None and not is_deleting(pod) and not _settled("MODIFIED", pod)

    def copy(self) -> Snapshot:
        return copy_snapshot(self.snapshot)

    @property
    def synced(self) -> bool:
        return all(r.synced.is_set() for r in self.reflectors)

    async def start(self) -> None:
        for reflector in self.reflectors[:len(WATCHED)]:
            self.shared.start(reflector)
        for reflector in self.reflectors[len(WATCHED):]:
            reflector.start()

    async def wait_synced(self, timeout_s: float) -> bool:
        waits = [asyncio.create_task(r.synced.wait()) for r in self.reflectors]
        _done, pending = await asyncio.wait(waits, timeout=timeout_s)
        for task in pending:
            task.cancel()
        return self.synced

    async def stop(self) -> None:
        for reflector in self.reflectors[:len(WATCHED)]:
            await self.shared.stop(reflector)
        for reflector in self.reflectors[len(WATCHED):]:
            await reflector.stop()

    def restarts(self) -> dict[str, int]:
        return {r.name: r.restarts for r in self.reflectors}
