"""The controllers' watch caches, kept warm on every replica: a takeover costs the Lease, not a relist.

Counterpart: client-go's shared informers, which a controller-manager starts before it runs for leadership, so a
standby's caches are already synced when it wins (Volcano's vc-controller-manager does the same). The five kinds the
Job, Queue and PodGroup controllers read (Queues, PriorityClasses, PodGroups, Pods, Volcano Jobs) are listed and
watched once, whether this replica leads or not, by reflectors the service shares with the extender's cluster state
and the admission caches (`lapilli.cluster.Shared`; Pods slimmed by `lapilli.meta.slim_pod`). A term's
`ControllerSet` attaches: it is first handed every stored object as an ADDED event (what a relist into empty caches
would have delivered; no await between that and the attaching, so nothing is missed or seen twice), then every event
as it arrives. Work queues, expectations and deletions in flight stay per term.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

from lapilli.cluster import Event, Shared
from lapilli.kube import KubeClient
from lapilli.kube.resources import PODGROUPS, PODS, PRIORITY_CLASSES, QUEUES, VC_JOBS, Resource
from lapilli.meta import slim_pod

Handler = Callable[[Event], None]
# In this order a term is handed what is stored: queues before the PodGroups in them, pods before their Jobs.
KINDS: Final[tuple[Resource, ...]] = (QUEUES, PRIORITY_CLASSES, PODGROUPS, PODS, VC_JOBS)
_NAMES: Final = {QUEUES: "ctl-queues", PRIORITY_CLASSES: "ctl-priorityclasses", PODGROUPS: "ctl-podgroups",
                 PODS: "ctl-pods", VC_JOBS: "ctl-jobs"}


class WarmCaches:
    """The shared reflectors; `attach` a term's handlers (by kind), `detach` when the term ends."""

    def __init__(self, client: KubeClient, shared: Shared | None = None) -> None:
        """`shared`: the process's reflectors, when other owners in it read the same kinds (the extender's cluster
        state, the admission caches: one list and watch of each for all)."""
        self._handlers: dict[Resource, Handler] = {}
        self.shared = shared if shared is not None else Shared(client)
        self.reflectors = [self.shared.reflector(res, self._route(res), name=_NAMES[res],
                                                 transform=slim_pod if res is PODS else None)
                           for res in KINDS]
        self._started = False

    def _route(self, res: Resource) -> Handler:
        def handle(event: Event) -> None:
            handler = self._handlers.get(res)
            if handler is not None:
                handler(event)

        return handle

    def start(self) -> None:
        if not self._started:
            self._started = True
            for reflector in self.reflectors:
                self.shared.start(reflector)

    async def stop(self) -> None:
        self._handlers.clear()
        if self._started:
            self._started = False
            for reflector in self.reflectors:
                await self.shared.stop(reflector)

    def synced(self) -> bool:
        return all(r.synced.is_set() for r in self.reflectors)

    async def wait_synced(self, timeout_s: float) -> list[str]:
        """Wait (bounded) for every first list; returns the names of those still not synced."""
        waits = [asyncio.create_task(r.synced.wait()) for r in self.reflectors]
        try:
            await asyncio.wait(waits, timeout=timeout_s)
        finally:
            for task in waits:
                task.cancel()
        return [r.name for r in self.reflectors if not r.synced.is_set()]

    def attach(self, handlers: dict[Resource, Handler]) -> None:
        """Hand `handlers` everything stored, kind by kind, then every event from now on."""
        for reflector in self.reflectors:
            handler = handlers[reflector.resource]
            for obj in list(reflector.store.values()):
                handler(Event("ADDED", obj, None, True))
            self._handlers[reflector.resource] = handler

    def detach(self) -> None:
        self._handlers.clear()
