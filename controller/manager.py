"""`Controllers`: the Job, Queue, PodGroup and HyperNode controllers, Commands and TTL collection as one service
component.

Counterpart: Volcano's vc-controller-manager, leader-elected as it is: the controllers run on the replica that
holds their Lease only. Each leadership term gets a fresh `ControllerSet`. One list+watch reflector per kind
feeds its stores (`cache.Store`) and then the controllers' handlers; workers start once every store has
synced, so no Job is reconciled against a half-listed cluster. Commands are watched last, for the same
reason. At start the standing queues are ensured and objects of Jobs deleted while no controller ran are swept.

Every replica, leading or not, keeps the watch caches of the five kinds the Job, Queue and PodGroup controllers read
(`warm.py`), so a takeover costs the Lease and not a relist of every pod: a new term starts from them (it is handed
every stored object, as a relist into empty caches would). What belongs
to a term stays per term: work queues, expectations, deletions in flight, the Command, Node and HyperNode watches.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from controller.commands import CommandRouter
from controller.context import Context
from controller.events import EventRecorder
from controller.hypernodes.controller import HyperNodeController, slim_node
from controller.jobs.cleanup import Cleanup
from controller.jobs.controller import JobController
from controller.jobs.ttl import TTLCollector
from controller.metrics import ControllerMetrics
from controller.podgroups.controller import PodGroupController
from controller.queues.controller import QueueController
from controller.settings import ControllerSettings
from controller.warm import WarmCaches
from lapilli.cluster import Event, LeaseElector, Reflector, Shared
from lapilli.kube import KubeClient
from lapilli.kube.resources import (
    COMMANDS,
    CONFIG_MAPS,
    HYPERNODES,
    NODES,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    VC_JOBS,
)
from lapilli.tasks import cancel_and_wait

log = logging.getLogger(__name__)


class ControllerSet:
    """The controllers over caches of their own, for one leadership term: `start`, then `stop` once."""

    def __init__(self, client: KubeClient, settings: ControllerSettings, metrics: ControllerMetrics,
                 warm: WarmCaches) -> None:
        """`warm`: the watch caches of the five kinds the controllers read, kept across terms (`warm.py`)."""
        self.settings = settings
        self.warm = warm
        self.ctx = Context(client, settings, EventRecorder(client), metrics,
                           pod_gate=asyncio.Semaphore(settings.pod_concurrency))
        self.jobs = JobController(self.ctx, cleanup=self._cleanup_job)
        self.queues = QueueController(self.ctx)
        self.podgroups = PodGroupController(self.ctx)
        self.commands = CommandRouter(self.ctx, self.jobs, self.queues)
        self.ttl = TTLCollector(client)
        self.cleanup = Cleanup(self.ctx, self.jobs.actions.plugins)
        self.command_reflector = Reflector(client, COMMANDS, handlers=[self.commands.on_command], name="ctl-commands")
        # Topology: not waited for at start nor counted for readiness (a cluster without the HyperNode CRD keeps
        # its Job controllers); the HyperNode controller itself waits for them.
        self.topology_reflectors = [
            Reflector(client, NODES, handlers=[self._on_node], name="ctl-nodes", transform=slim_node),
            Reflector(client, HYPERNODES, handlers=[self._on_hypernode], name="ctl-hypernodes"),
        ]
        self.hypernodes = HyperNodeController(
            self.ctx, synced=lambda: all(r.synced.is_set() for r in self.topology_reflectors[:2]))
        if (where := settings.discovery_configmap()) is not None:
            self.topology_reflectors.append(Reflector(client, CONFIG_MAPS, namespace=where[0],
                                                      field_selector=f"metadata.name={where[1]}",
                                                      handlers=[self.hypernodes.on_config], name="ctl-topology-conf"))
        self._tasks: list[asyncio.Task[Any]] = []
        self._background: set[asyncio.Task[Any]] = set()
        self._running = False

    # -- routing of watch events: stores first, then the controllers -------------------------------------

    def _on_job(self, event: Event) -> None:
        self.ctx.jobs.observe(event.type, event.obj)
        self.jobs.on_job(event)
        self.ttl.observe(event.type, event.obj)

    async def _cleanup_job(self, job: Mapping[str, Any]) -> None:
        """A deleted Job's children go; a failure propagates to the Job's worker, which retries the cleanup."""
        await self.cleanup.job_deleted(job)

    def _on_pod(self, event: Event) -> None:
        self.ctx.pods.observe(event.type, event.obj)
        self.jobs.on_pod(event)
        self.podgroups.on_pod(event)

    def _on_podgroup(self, event: Event) -> None:
        ours = event.type == "DELETED" and self.ctx.podgroups.deleting(event.obj)
        self.ctx.podgroups.observe(event.type, event.obj)
        self.jobs.on_podgroup(event, deleted_by_us=ours)
        self.queues.on_podgroup(event)

    def _on_queue(self, event: Event) -> None:
        self.ctx.queues.observe(event.type, event.obj)
        self.queues.on_queue(event)

    def _on_priority_class(self, event: Event) -> None:
        self.ctx.priority_classes.observe(event.type, event.obj)

    def _on_node(self, event: Event) -> None:
        self.ctx.nodes.observe(event.type, event.obj)
        self.hypernodes.on_node(event)

    def _on_hypernode(self, event: Event) -> None:
        self.ctx.hypernodes.observe(event.type, event.obj)
        self.hypernodes.on_hypernode(event)

    def _spawn(self, coro: Any, what: str) -> None:
        task = asyncio.get_running_loop().create_task(self._guard(coro, what))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    @staticmethod
    async def _guard(coro: Any, what: str) -> None:
        try:
            await coro
        except Exception:
            log.exception("controllers: %s failed", what)

    # -- lifecycle ---------------------------------------------------------------------------------------

    async def start(self) -> None:
        for reflector in self.topology_reflectors:
            self._tasks.append(reflector.start())
        self.warm.start()  # already running on a replica that stood by: its caches are synced
        laggards = await self.warm.wait_synced(self.settings.sync_timeout_s)
        if laggards:
            log.warning("controllers: caches not synced after %.0fs (%s); starting anyway",
                        self.settings.sync_timeout_s, ", ".join(laggards))
        self.warm.attach({QUEUES: self._on_queue, PRIORITY_CLASSES: self._on_priority_class,
                          PODGROUPS: self._on_podgroup, PODS: self._on_pod, VC_JOBS: self._on_job})
        workers = [self.jobs.run_worker() for _ in range(self.settings.job_workers)]
        workers += [self.queues.run_worker() for _ in range(2)] + [self.podgroups.run_worker() for _ in range(4)]
        workers += [self.commands.run_worker() for _ in range(2)] + [self.hypernodes.run_worker() for _ in range(2)]
        self._tasks += [asyncio.create_task(w, name="controller-worker") for w in workers]
        self._tasks.append(self.command_reflector.start())
        self._spawn(self.queues.ensure_standing_queues(), "standing queues")
        self._spawn(self.cleanup.sweep(), "orphan sweep")
        self._running = True
        log.info("controllers running: %d job workers", self.settings.job_workers)

    async def stop(self) -> None:
        self._running = False
        self.ttl.stop()
        for task in [*self._tasks, *self._background]:
            task.cancel()
        for task in [*self._tasks, *self._background]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        self.warm.detach()  # the caches stay warm for the next term
        for reflector in [self.command_reflector, *self.topology_reflectors]:
            await reflector.stop()
        await self.ctx.recorder.flush()

    def ready(self) -> bool:
        return self._running and self.warm.synced() and self.command_reflector.synced.is_set()


class Controllers:
    """Service component (see `assembly.serve.component.Component`): the controllers, run by the holder of
    `elector`'s Lease only, or by this replica unconditionally when there is no elector."""

    name = "controllers"

    def __init__(
        self, client: KubeClient, settings: ControllerSettings, registry: CollectorRegistry | None = None,
        elector: LeaseElector | None = None, shared: Shared | None = None,
    ) -> None:
        """`shared`: the process's reflectors (`lapilli.cluster.Shared`), when other owners in it read what the
        controllers' warm caches do."""
        self.settings = settings
        self.elector = elector
        self.metrics = ControllerMetrics(registry)  # one set of series across terms
        # Writes are fenced by the Lease: once it is lost (renew deadline passed, or another holder seen) every
        # write fails at once, even from a task the end of the term has not cancelled yet.
        self.client = client if elector is None else elector.fence(client, "the controllers'")
        # Listed and watched on every replica, leading or not: a takeover finds them synced (`warm.py`).
        self.warm = WarmCaches(client, shared)
        self.current: ControllerSet | None = None
        self._term_started = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False

    async def start(self) -> None:
        self.warm.start()
        if self.elector is None:
            self.current = ControllerSet(self.client, self.settings, self.metrics, self.warm)
            await self.current.start()
        else:
            await self._start_elected(self.elector)
        self._started = True

    async def _start_elected(self, elector: LeaseElector) -> None:
        self._tasks.append(asyncio.create_task(elector.run_forever(), name="controllers-lease"))
        self._tasks.append(asyncio.create_task(elector.while_leading(self._term), name="controllers-leader"))
        # Return after the first try at the Lease and, if it was won, once the controllers run: a service
        # started alone on a cluster is then ready with its controllers working, as without election.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(elector.renew_deadline_s):
                await elector.attempted.wait()
        if not elector.is_leader():
            log.info("controllers: standing by until this replica holds Lease %s", elector.lease)
            return
        await elector.until_lost(self._term_started.wait())

    async def _term(self) -> None:
        """One leadership term: runs until cancelled, which `while_leading` does as soon as the Lease is lost."""
        controllers = self.current = ControllerSet(self.client, self.settings, self.metrics, self.warm)
        try:
            await controllers.start()
            self._term_started.set()
            await asyncio.Future()  # until cancelled
        finally:
            self.current = None
            await controllers.stop()

    async def stop(self) -> None:
        # The term first, while the Lease is still renewed (its last Events are written), then the Lease.
        await cancel_and_wait(*reversed(self._tasks))
        self._tasks.clear()
        if self.elector is not None:
            await self.elector.release()
        elif self.current is not None:
            await self.current.stop()
        await self.warm.stop()

    def ready(self) -> bool:
        """Elected: ready once started, leading or not. A standby replica serves the webhook, and a takeover
        must not take the new leader out of the webhook's endpoints while its caches sync."""
        if self.elector is not None:
            return self._started
        return self._started and self.current is not None and self.current.ready()
