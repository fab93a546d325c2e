"""The PodGroup controller for plain pods: create the pod's PodGroup, then point the pod at it.

Mirrors `pkg/controllers/podgroup` (reference §3.8); what the PodGroup looks like is `plain.py`. The owner's
annotations are read from the API server (a ReplicaSet, StatefulSet, batch Job…); if it cannot be read the
defaults apply. A bare pod's PodGroup is owned by the pod; without a garbage collector nothing would delete it,
so it is deleted here when the pod goes.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from controller.context import Context
from controller.podgroups.plain import (
    build_podgroup,
    controller_owner,
    network_topology,
    owner_plural,
    wants_podgroup,
)
from lapilli.api.constants import GROUP_NAME_ANNOTATION
from lapilli.cluster import Event as WatchEvent
from lapilli.cluster import RateLimiter, WorkQueue, run_worker
from lapilli.kube import AlreadyExists, ApiError, Conflict, NotFound
from lapilli.kube.resources import PODGROUPS, PODS, Resource
from lapilli.meta import annotations_of, key_of, name_of, namespace_of, owner_references, uid_of

log = logging.getLogger(__name__)



class PodGroupController:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        # ("pod", key) or ("gone", "<ns>/<pod uid>"); a failed one is retried after 0.2 s doubling to 30 s
        self.queue: WorkQueue[tuple[str, str]] = WorkQueue(RateLimiter(0.2, 30.0))
        self.created = 0

    def on_pod(self, event: WatchEvent) -> None:
        pod = event.obj
        if event.type == "DELETED":
            if annotations_of(pod).get(GROUP_NAME_ANNOTATION) == f"podgroup-{uid_of(pod)}":
                self.queue.add(("gone", f"{namespace_of(pod)}/{uid_of(pod)}"))
            return
        if wants_podgroup(pod, self.ctx.settings.scheduler_names):
            self.queue.add(("pod", key_of(pod)))

    async def run_worker(self) -> None:
        await run_worker(self.queue, self._process, name="podgroup for", retried=self.ctx.metrics.retried("podgroups"))

    async def _process(self, item: tuple[str, str]) -> None:
        if item[0] == "pod":
            await self._sync(item[1])
        else:
            await self._collect(item[1])

    async def _sync(self, key: str) -> None:
        pod = self.ctx.pods.get(key)
        if pod is None or not wants_podgroup(pod, self.ctx.settings.scheduler_names):
            return
        namespace = namespace_of(pod)
        desired = build_podgroup(pod, await self._owner_annotations(pod),
                                 inherit=self.ctx.settings.inherit_owner_annotations)
        name = name_of(desired)
        if f"{namespace}/{name}" not in self.ctx.podgroups:
            for problem in network_topology(pod)[1]:
                log.warning("pod %s/%s: %s", namespace, name_of(pod), problem)
                self.ctx.recorder.record(pod, "Warning", "InvalidNetworkTopology", problem)
            try:
                self.ctx.podgroups.wrote(await self.ctx.client.create(PODGROUPS, desired))
                self.ctx.metrics.podgroups_created.labels("pod").inc()
                self.created += 1
            except AlreadyExists:
                pass
        patch = {"metadata": {"annotations": {GROUP_NAME_ANNOTATION: name}}}
        try:
            self.ctx.pods.wrote(await self.ctx.client.patch(PODS, name_of(pod), patch, namespace))
        except NotFound:
            return

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
