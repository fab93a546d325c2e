"""What `lapilli job why` and `lapilli dashboard` read from the cluster with the user's own kubeconfig: the
scheduler's inputs (Nodes, Pods, PodGroups, Queues, PriorityClasses, HyperNodes — the objects the live scheduler
watches; a kind the cluster does not serve, such as HyperNodes without their CRD, reads as none; `job why` also
Namespaces, for pod affinity's namespace selectors), the scheduler conf from where the cluster's scheduler reads
it, and who closed a queue.

What the credentials may not read is recorded (`Unreadable`: the kind, where, and the API server's HTTP status), never
silently taken as empty: an answer computed without the nodes, or without other namespaces' PodGroups, is partial,
and `lapilli job why` and the dashboard say so.

The snapshot is built by the engine's own `add_object`, object by object, as the service's watch cache does: an
object its parsers refuse is left out, as the live scheduler leaves it out.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from extender.engine.conf import ConfError, SchedulerConf
from extender.engine.plugins.deviceshare import vgpu_arguments
from extender.engine.run import parse_scheduler_conf
from extender.engine.snapshot import Snapshot, add_object, idle_reclaimable_pods
from lapilli.api.constants import QUEUE_KIND
from lapilli.kube import ApiError, KubeClient, NotFound
from lapilli.kube.resources import (
    CONFIG_MAPS,
    EVENTS,
    HYPERNODES,
    NAMESPACES,
    NODES,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    VC_JOBS,
    Resource,
)
from lapilli.meta import JSON, key_of
from lapilli.tasks import gather_or_cancel

SCHEDULER_INPUTS: Final[tuple[Resource, ...]] = (NODES, PODS, PODGROUPS, QUEUES, PRIORITY_CLASSES, HYPERNODES)
# Where an installed Lapilli keeps its scheduler conf (Volcano's format), and the key inside the ConfigMap.
CONF_CONFIGMAP_NAMESPACE: Final = "lapilli-system"
CONF_CONFIGMAP_NAME: Final = "lapilli-scheduler-conf"
CONF_KEY: Final = "lapilli-scheduler.conf"
CONF_ENV: Final = "LAPILLI_SCHEDULER_CONF"
# The conf `lapilli dev up` hands to `lapilli serve --scheduler-conf` (a source checkout).
SHIPPED_CONF: Final = Path(__file__).resolve().parents[2] / "manifests" / "scheduler" / "lapilli-scheduler.conf"
UNAUTHORIZED: Final = 401  # credentials refused outright: a failure, not a gap to report
QUEUE_EVENTS_SCOPE: Final = "default (about Queues)"  # where Events about (cluster-scoped) Queues are listed


@dataclass(frozen=True, slots=True)
class Unreadable:
    """Something the user's credentials could not read, so the answer computed without it is partial."""

    kind: str  # Node, Pod, PodGroup, Queue, PriorityClass, ConfigMap, Event
    scope: str  # "all namespaces", "namespaces other than NS", or the object's `ns/name`
    status: int  # the API server's HTTP status (403: RBAC forbids it)
    reason: str  # the Status reason (Forbidden)

    def __str__(self) -> str:
        return f"{self.kind} ({self.scope}): {self.status} {self.reason}"

    def to_json(self) -> dict[str, JSON]:
        return {"kind": self.kind, "scope": self.scope, "status": self.status, "reason": self.reason}

    @classmethod
    def of(cls, kind: str, scope: str, exc: ApiError) -> Unreadable:
        return cls(kind, scope, exc.status, exc.reason)


@dataclass(slots=True)
class ClusterView:
    """The scheduler's inputs as raw objects (by kind, then `ns/name` or name) and as the engine's snapshot."""

    objects: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    snapshot: Snapshot = field(default_factory=Snapshot)
    skipped: list[str] = field(default_factory=list)  # objects the parsers refused, with why
    unreadable: list[Unreadable] = field(default_factory=list)  # what the credentials could not list


def refused(res: Resource, exc: ApiError, namespace: str | None = None) -> Unreadable:
    """The gap left when listing `res` in `namespace` (None: across namespaces, or the cluster-scoped kind) was
    refused."""
    scope = f"namespace {namespace}" if namespace else "all namespaces" if res.namespaced else "cluster"
    return Unreadable.of(res.kind, scope, exc)


def fallback(res: Resource, exc: ApiError, namespace: str | None) -> tuple[str | None, Unreadable]:
    """Listing `res` across namespaces was refused (`exc`): where to read it instead — `namespace`, the user's own,
    for a namespaced kind; None: nowhere — and the gap that leaves. `lapilli job why` and the dashboard both
    narrow this way."""
    if res.namespaced and namespace:
        return namespace, Unreadable.of(res.kind, f"namespaces other than {namespace}", exc)
    return None, refused(res, exc)


def build_view(objects: Mapping[str, Iterable[dict[str, Any]]]) -> ClusterView:
    view = ClusterView()
    for kind, items in objects.items():
        add_objects(view, kind, items)
    # What the leader's idle-GPU monitor marked reclaimable, as the PodGroups' conditions say.
    view.snapshot.idle_reclaimable = idle_reclaimable_pods(view.snapshot)
    return view


async def read_cluster(client: KubeClient, namespace: str | None = None) -> ClusterView:
    """List the scheduler's inputs cluster-wide. A namespaced kind the user may not list across namespaces is listed
    in `namespace` (their own) instead; whatever stays out is recorded in `unreadable`, with the server's status."""
    unreadable: list[Unreadable] = []

    async def one(res: Resource) -> tuple[str, list[dict[str, Any]]]:
        try:
            return res.kind, (await client.list(res)).items
        except NotFound:
            return res.kind, []  # not served (a CRD not installed): none exists, nothing is hidden
        except ApiError as exc:
            if exc.status == UNAUTHORIZED:
                raise  # the credentials themselves are refused: nothing will be readable
            where, gap = fallback(res, exc, namespace)
            unreadable.append(gap)
        if where is None:
            return res.kind, []
        try:
            return res.kind, (await client.list(res, where)).items
        except ApiError as exc:
            unreadable.append(refused(res, exc, where))
            return res.kind, []

    view = build_view(dict(await gather_or_cancel(*(one(res) for res in SCHEDULER_INPUTS))))
    await _read_namespaces(client, view, unreadable)
    view.unreadable = sorted(unreadable, key=lambda u: (u.kind, u.scope))
    return view


async def _read_namespaces(client: KubeClient, view: ClusterView, unreadable: list[Unreadable]) -> None:
    """Namespaces' labels, which the namespace selectors of pod affinity terms match. Many users may not list
    namespaces; that leaves a gap worth reporting only when some pod's terms select namespaces by label."""
    try:
        items = (await client.list(NAMESPACES)).items
    except ApiError as exc:
        if exc.status == UNAUTHORIZED:
            raise
        if any(t.namespace_selector.selector is not None for pod in view.snapshot.pods.values() if pod.terms
               for t in (*pod.terms.affinity, *pod.terms.anti_affinity,
                         *(w.term for w in (*pod.terms.preferred_affinity, *pod.terms.preferred_anti_affinity)))):
            unreadable.append(refused(NAMESPACES, exc))
        return
    merged = build_view({NAMESPACES.kind: items})
    view.objects[NAMESPACES.kind] = merged.objects[NAMESPACES.kind]
    view.snapshot.namespaces.update(merged.snapshot.namespaces)


@dataclass(frozen=True, slots=True)
class ClusterConf:
    """The scheduler conf an explanation uses, where it came from, and the cluster's ConfigMap if the credentials
    could not read it (the conf is then a fallback and may not be the one the scheduler runs)."""

    conf: SchedulerConf
    where: str
    unreadable: Unreadable | None = None


async def read_conf(client: KubeClient, path: Path | None) -> ClusterConf:
    """The conf the cluster's scheduler runs: `--conf FILE`, else $LAPILLI_SCHEDULER_CONF, else the ConfigMap an
    installed Lapilli mounts, else the conf `lapilli dev up` passes (a source checkout), else Volcano's default."""
    if path is None and os.environ.get(CONF_ENV):
        path = Path(os.environ[CONF_ENV])
    if path is not None:
        return ClusterConf(parse_scheduler_conf(path.read_text()), str(path))
    gap: Unreadable | None = None  # the ConfigMap, if the credentials may not read it
    try:
        cm = await client.get(CONFIG_MAPS, CONF_CONFIGMAP_NAME, CONF_CONFIGMAP_NAMESPACE)
        data = cm.get("data") or {}
        text = data.get(CONF_KEY) or next((v for k, v in sorted(data.items()) if k.endswith(".conf")), None)
        if text:
            return ClusterConf(parse_scheduler_conf(text),
                               f"ConfigMap {CONF_CONFIGMAP_NAMESPACE}/{CONF_CONFIGMAP_NAME}")
    except NotFound:
        pass  # not an installed Lapilli (a dev cluster): the fallbacks below are what it runs
    except ApiError as exc:
        if exc.status == UNAUTHORIZED:
            raise
        gap = Unreadable.of("ConfigMap", f"{CONF_CONFIGMAP_NAMESPACE}/{CONF_CONFIGMAP_NAME}", exc)
    if SHIPPED_CONF.is_file():
        return ClusterConf(parse_scheduler_conf(SHIPPED_CONF.read_text()), _display(SHIPPED_CONF), gap)
    return ClusterConf(parse_scheduler_conf(None), "Volcano's default conf", gap)


async def read_device_config(client: KubeClient, conf: SchedulerConf) -> list[dict[str, Any]]:
    """The vGPU device config ConfigMap the conf's deviceshare names (renamed resources, MIG geometries), as a
    one-item list for `build_view`; none when the conf shares no GPUs, or the ConfigMap does not exist or may not be
    read (the defaults then stand, as in the scheduler when it is missing)."""
    args = vgpu_arguments(conf)
    if args is None:
        return []
    try:
        found = await client.get(CONFIG_MAPS, args.config_name, args.config_namespace)
    except NotFound:
        return []
    except ApiError as exc:
        if exc.status == UNAUTHORIZED:
            raise
        return []
    return [{**found, "apiVersion": "v1", "kind": "ConfigMap"}]


def add_objects(view: ClusterView, kind: str, items: Iterable[dict[str, Any]]) -> None:
    """More of the scheduler's inputs (the device config, read once the conf is known) into `view`."""
    per = view.objects.setdefault(kind, {})
    for obj in items:
        per[key_of(obj)] = obj
        try:
            add_object(view.snapshot, obj)
        except (ValueError, KeyError, TypeError) as exc:
            view.skipped.append(f"{kind} {key_of(obj)}: {exc}")


def _display(path: Path) -> str:
    """The shipped conf as a path relative to the source checkout (`manifests/scheduler/...`), not this machine's."""
    return str(path.relative_to(SHIPPED_CONF.parents[2]))


async def read_jobs(client: KubeClient, view: ClusterView, namespace: str | None = None) -> list[dict[str, Any]]:
    """Volcano Jobs (finished ones too: the start-time estimate's history) across namespaces, else in `namespace`;
    what stays unread is recorded in `view.unreadable`."""
    try:
        return (await client.list(VC_JOBS)).items
    except ApiError as exc:
        where, gap = fallback(VC_JOBS, exc, namespace)
        view.unreadable.append(gap)
    if where is None:
        return []
    try:
        return (await client.list(VC_JOBS, where)).items
    except ApiError as exc:
        view.unreadable.append(refused(VC_JOBS, exc, where))
        return []


async def read_queue_events(client: KubeClient, view: ClusterView | None = None) -> list[dict[str, Any]]:
    """Events about Queues (cluster-scoped objects have theirs in `default`); none if the user may not list them
    (then recorded in `view.unreadable`: who closed a queue is unknown)."""
    try:
        return (await client.list(EVENTS, "default", field_selector=f"involvedObject.kind={QUEUE_KIND}")).items
    except ApiError as exc:
        if view is not None:
            view.unreadable.append(Unreadable.of("Event", QUEUE_EVENTS_SCOPE, exc))
        return []


__all__ = ["ClusterConf", "ClusterView", "ConfError", "Unreadable", "build_view", "fallback", "read_cluster",
           "read_conf", "read_jobs", "refused"]
