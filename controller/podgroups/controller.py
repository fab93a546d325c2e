"""The PodGroup controller for plain pods: create the pod's PodGroup, then point the pod at it.

Mirrors `pkg/controllers/podgroup` (reference §3.8); what the PodGroup looks like is `plain.py`. The owner's
annotations are read from the API server (a ReplicaSet, StatefulSet, batch Job…); if it cannot be read the
defaults apply. A bare pod's PodGroup is owned by the pod; without a garbage collector nothing would delete it,
so it is deleted here when the pod goes.

Volcano patches the pod's `scheduling.k8s.io/group-name` as soon as the PodGroup exists. A pod that kube-scheduler
is still placing gets it from its Binding instead (the extender's bind writes it with the node, `lapilli.plainpods`),
so that patch would be a second write of what the Binding writes anyway; a pod whose Binding named its PodGroup
before this controller made it gets the PodGroup all the same. It goes out at once for a pod bound
without it, for a member of a PodGroup of more than one pod (the extender holds a gang by its annotation), for a
pod kube-scheduler set aside (condition PodScheduled False), and for any pod still without it ANNOTATE_AFTER_S after
its creation.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Any, Final

from controller.context import Context
from controller.podgroups.plain import build_podgroup, network_topology, owner_plural
from lapilli.api.constants import GROUP_NAME_ANNOTATION
from lapilli.cluster import Event as WatchEvent
from lapilli.cluster import RateLimiter, WorkQueue, run_worker
from lapilli.kube import AlreadyExists, ApiError, Conflict, NotFound
from lapilli.kube.resources import PODGROUPS, PODS, Resource
from lapilli.meta import annotations_of, key_of, name_of, namespace_of, owner_references, uid_of
from lapilli.plainpods import controller_owner, group_of, names_its_own, podgroup_name_for, wants_podgroup
from lapilli.times import parse_rfc3339

log = logging.getLogger(__name__)

# How long a pod that kube-scheduler has not set aside may wait for its Binding to annotate it.
ANNOTATE_AFTER_S: Final = 30.0


class PodGroupController:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        # ("pod", key) or ("gone", "<ns>/<pod uid>"); a failed one is retried after 0.2 s doubling to 30 s
        self.queue: WorkQueue[tuple[str, str]] = WorkQueue(RateLimiter(0.2, 30.0))
        self.created = 0

    def on_pod(self, event: WatchEvent) -> None:
        pod = event.obj
        if event.type == "DELETED":
            if group_of(pod, self._names) == f"podgroup-{uid_of(pod)}":
                self.queue.add(("gone", f"{namespace_of(pod)}/{uid_of(pod)}"))
            return
        if wants_podgroup(pod, self._names) or self._made_yet(pod) is False:
            self.queue.add(("pod", key_of(pod)))

    def _made_yet(self, pod: Mapping[str, Any]) -> bool | None:
        """For a pod that names the PodGroup this controller gives it (its Binding may name it first): whether that
        exists; None for any other pod."""
        if not names_its_own(pod, self._names):
            return None
        return f"{namespace_of(pod)}/{podgroup_name_for(pod)}" in self.ctx.podgroups

    @property
    def _names(self) -> tuple[str, ...]:
        return self.ctx.settings.scheduler_names

    async def run_worker(self) -> None:
        await run_worker(self.queue, self._process, name="podgroup for", retried=self.ctx.metrics.retried("podgroups"))

    async def _process(self, item: tuple[str, str]) -> None:
        if item[0] == "pod":
            await self._sync(item[1])
        else:
            await self._collect(item[1])

    async def _sync(self, key: str) -> None:
        pod = self.ctx.pods.get(key)
        if pod is None:
            return
        if self._made_yet(pod) is False:
            await self._create(pod)
        if not wants_podgroup(pod, self._names):
            return
        namespace, name = namespace_of(pod), podgroup_name_for(pod)
        podgroup = self.ctx.podgroups.get(f"{namespace}/{name}") or await self._create(pod)
        wait = _annotation_wait(pod, podgroup, time.time())
        if wait > 0:
            self.queue.add_after(("pod", key), wait)
            return
        patch = {"metadata": {"annotations": {GROUP_NAME_ANNOTATION: name}}}
        try:
            self.ctx.pods.wrote(await self.ctx.client.patch(PODS, name_of(pod), patch, namespace))
        except NotFound:
            return

    async def _create(self, pod: Mapping[str, Any]) -> Mapping[str, Any]:
        """Create the pod's PodGroup; returns it (as asked for, when it turned out to exist already)."""
        desired = build_podgroup(pod, await self._owner_annotations(pod),
                                 inherit=self.ctx.settings.inherit_owner_annotations)
        for problem in network_topology(pod)[1]:
            log.warning("pod %s/%s: %s", namespace_of(pod), name_of(desired), problem)
            self.ctx.recorder.record(pod, "Warning", "InvalidNetworkTopology", problem)
        try:
            created = await self.ctx.client.create(PODGROUPS, desired)
        except AlreadyExists:
            return desired
        self.ctx.podgroups.wrote(created)
        self.ctx.metrics.podgroups_created.labels("pod").inc()
        self.created += 1
        return created

    async def _owner_annotations(self, pod: Mapping[str, Any]) -> dict[str, str]:
        owner = controller_owner(pod)
        if owner is None:
            return {}
        api_version, kind = str(owner.get("apiVersion") or ""), str(owner.get("kind") or "")
        res = Resource(api_version, owner_plural(kind), kind)
        try:
            found = await self.ctx.client.get(res, str(owner.get("name")), namespace_of(pod))
        except ApiError as exc:  # gone, or not ours to read: the defaults apply, as when it has no annotation
            log.debug("owner %s %s of pod %s unreadable: %s", kind, owner.get("name"), name_of(pod), exc)
            return {}
        return dict(annotations_of(found))

    async def _collect(self, ident: str) -> None:
        namespace, uid = ident.split("/", 1)
        name = f"podgroup-{uid}"
        current = self.ctx.podgroups.get(f"{namespace}/{name}")
        if current is None:
            return
        if not any(o.get("kind") == "Pod" and o.get("uid") == uid for o in owner_references(current)):
            return
        with contextlib.suppress(NotFound, Conflict):
            await self.ctx.client.delete(PODGROUPS, name, namespace, uid=uid_of(current) or None)
        self.ctx.podgroups.deleted(current, linger=False)


def _annotation_wait(pod: Mapping[str, Any], podgroup: Mapping[str, Any], now: float) -> float:
    """Seconds the pod's annotation may still be left to its Binding (0: patch it now)."""
    if (pod.get("spec") or {}).get("nodeName"):
        return 0.0
    members = (podgroup.get("spec") or {}).get("minMember")
    if not isinstance(members, int) or members > 1:
        return 0.0
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return 0.0
    try:
        created = parse_rfc3339(str((pod.get("metadata") or {}).get("creationTimestamp")))
    except ValueError:
        return 0.0
    wait = created + ANNOTATE_AFTER_S - now
    return wait if wait > 0.05 else 0.0
