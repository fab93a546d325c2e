"""The cluster views admission reads — Queues, Volcano Jobs, Namespaces, HyperNodes — kept by list+watch
reflectors and exposed through the webhook's lister `Protocol`s (`webhook.listers`).

The HyperNode view is neither waited for at start nor part of readiness: a cluster still on CRDs without
HyperNode must keep admitting Jobs. Until it has listed, HyperNode writes are refused with a retry hint
(`webhook.hypernodes`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from lapilli.cluster import Reflector, Shared
from lapilli.kube import KubeClient
from lapilli.kube.resources import HYPERNODES, NAMESPACES, QUEUES, VC_JOBS
from lapilli.meta import Obj

log = logging.getLogger("lapilli.serve")



class ReflectorQueues:
    """`QueueLister` over a Queue reflector (the store is read at call time: a re-list replaces it)."""

    def __init__(self, reflector: Reflector) -> None:
        self._reflector = reflector

    def get(self, name: str) -> Obj | None:
        return self._reflector.store.get(name)

    def list(self) -> Iterable[Obj]:
        return list(self._reflector.store.values())


class ReflectorJobs:
    """`JobLister` over a Volcano Job reflector."""

    def __init__(self, reflector: Reflector) -> None:
        self._reflector = reflector

    def get(self, namespace: str, name: str) -> Obj | None:
        return self._reflector.store.get(f"{namespace}/{name}")


class ReflectorNamespaces:
    """`NamespaceLister` over a Namespace reflector."""

    def __init__(self, reflector: Reflector) -> None:
        self._reflector = reflector

    def get(self, name: str) -> Obj | None:
        return self._reflector.store.get(name)


class ReflectorHyperNodes:
    """`HyperNodeLister` over a HyperNode reflector."""

    def __init__(self, reflector: Reflector) -> None:
        self._reflector = reflector

    def list(self) -> Iterable[Obj]:
        return list(self._reflector.store.values())

    def synced(self) -> bool:
        return self._reflector.synced.is_set()


class AdmissionCaches:
    """Component: the reflectors. `start` waits (bounded) for the first list of the three admission needs."""

    name = "caches"

    def __init__(self, client: KubeClient, sync_timeout_s: float = 60.0, shared: Shared | None = None) -> None:
        """`shared`: the process's reflectors, when other owners in it read Queues, Jobs or Namespaces too."""
        self.shared = shared if shared is not None else Shared(client)
        self.queue_reflector = self.shared.reflector(QUEUES, None, name="queues")
        self.job_reflector = self.shared.reflector(VC_JOBS, None, name="vcjobs")
        self.namespace_reflector = self.shared.reflector(NAMESPACES, None, name="namespaces")
        self.hypernode_reflector = Reflector(client, HYPERNODES, name="hypernodes")
        self.queues = ReflectorQueues(self.queue_reflector)
        self.jobs = ReflectorJobs(self.job_reflector)
        self.namespaces = ReflectorNamespaces(self.namespace_reflector)
        self.hypernodes = ReflectorHyperNodes(self.hypernode_reflector)
        self._sync_timeout_s = sync_timeout_s

    def _reflectors(self) -> tuple[Reflector, ...]:
        return (self.queue_reflector, self.job_reflector, self.namespace_reflector)

    async def start(self) -> None:
        self.hypernode_reflector.start()
        for reflector in self._reflectors():
            self.shared.start(reflector)
        waits = [asyncio.create_task(r.synced.wait()) for r in self._reflectors()]
        _done, pending = await asyncio.wait(waits, timeout=self._sync_timeout_s)
        for task in pending:
            task.cancel()
        if not self.ready():
            laggards = ", ".join(r.name for r in self._reflectors() if not r.synced.is_set())
            log.warning("caches not synced after %.0fs (%s); serving, not ready", self._sync_timeout_s, laggards)

    async def stop(self) -> None:
        for reflector in self._reflectors():
            await self.shared.stop(reflector)
        await self.hypernode_reflector.stop()

    def ready(self) -> bool:
        return all(r.synced.is_set() for r in self._reflectors())
