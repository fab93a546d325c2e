"""`Controllers`: the Job, Queue and PodGroup controllers, Commands and TTL collection as one service component.

Counterpart: Volcano's vc-controller-manager. One list+watch reflector per kind feeds the shared stores
(`cache.Store`) and then the controllers' handlers; workers start once every store has synced, so no Job is
reconciled against a half-listed cluster. Commands are watched last, for the same reason. At start the
standing queues are ensured and objects of Jobs deleted while no controller ran are swept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from prometheus_client import CollectorRegistry

from controller.commands import CommandRouter
from controller.context import Context
from controller.events import EventRecorder
from controller.jobs.cleanup import Cleanup
from controller.jobs.controller import JobController
from controller.jobs.ttl import TTLCollector
from controller.metrics import ControllerMetrics
from controller.podgroups.controller import PodGroupController
from controller.queues.controller import QueueController
from controller.settings import ControllerSettings
from lapilli.cluster import Event, Reflector
from lapilli.kube import KubeClient
from lapilli.kube.resources import COMMANDS, PODGROUPS, PODS, PRIORITY_CLASSES, QUEUES, VC_JOBS

log = logging.getLogger(__name__)


class Controllers:
    """Service component (see `lapilli.serve.component.Component`)."""

    name = "controllers"

    def __init__(
        self, client: KubeClient, settings: ControllerSettings, registry: CollectorRegistry | None = None,
    ) -> None:
        self.settings = settings
        self.ctx = Context(client, settings, EventRecorder(client), ControllerMetrics(registry),
                           pod_gate=asyncio.Semaphore(settings.pod_concurrency))
        self.jobs = JobController(self.ctx, cleanup=self._cleanup_job)
        self.queues = QueueController(self.ctx)
        self.podgroups = PodGroupController(self.ctx)
        self.commands = CommandRouter(self.ctx, self.jobs, self.queues)
        self.ttl = TTLCollector(client)
        self.cleanup = Cleanup(self.ctx, self.jobs.actions.plugins)
        self.reflectors = [
            Reflector(client, QUEUES, handlers=[self._on_queue], name="ctl-queues"),
            Reflector(client, PRIORITY_CLASSES, handlers=[self._on_priority_class], name="ctl-priorityclasses"),
            Reflector(client, PODGROUPS, handlers=[self._on_podgroup], name="ctl-podgroups"),
            Reflector(client, PODS, handlers=[self._on_pod], name="ctl-pods"),
            Reflector(client, VC_JOBS, handlers=[self._on_job], name="ctl-jobs"),
        ]
        self.command_reflector = Reflector(client, COMMANDS, handlers=[self.commands.on_command], name="ctl-commands")
        self._tasks: list[asyncio.Task[Any]] = []
        self._background: set[asyncio.Task[Any]] = set()
        self._running = False

    # -- routing of watch events: stores first, then the controllers -------------------------------------

    def _on_job(self, event: Event) -> None:
        self.ctx.jobs.observe(event.type, event.obj)
        self.jobs.on_job(event)
        self.ttl.observe(event.type, event.obj)

    async def _cleanup_job(self, job: dict[str, Any]) -> None:
        await self._guard(self.cleanup.job_deleted(job), "cleanup")

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

    # -- Component ---------------------------------------------------------------------------------------

    async def start(self) -> None:
        for reflector in self.reflectors:
            self._tasks.append(reflector.start())
        waits = [asyncio.create_task(r.synced.wait()) for r in self.reflectors]
        _done, pending = await asyncio.wait(waits, timeout=self.settings.sync_timeout_s)
        for task in pending:
            task.cancel()
        if pending:
            laggards = ", ".join(r.name for r in self.reflectors if not r.synced.is_set())
            log.warning("controllers: caches not synced after %.0fs (%s); starting anyway",
                        self.settings.sync_timeout_s, laggards)
        workers = [self.jobs.run_worker() for _ in range(self.settings.job_workers)]
        workers += [self.queues.run_worker() for _ in range(2)] + [self.podgroups.run_worker() for _ in range(4)]
        self._tasks += [asyncio.create_task(w, name="controller-worker") for w in workers]
        self._tasks.append(self.command_reflector.start())
        self._spawn(self.queues.ensure_standing_queues(), "standing queues")
        self._spawn(self.cleanup.sweep(), "orphan sweep")
        self._running = True
        log.info("controllers running: %d job workers", self.settings.job_workers)

    async def stop(self) -> None:
        self._running = False
        self.ttl.stop()
        self.commands.stop()
        for task in [*self._tasks, *self._background]:
            task.cancel()
        for task in [*self._tasks, *self._background]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        for reflector in [*self.reflectors, self.command_reflector]:
            await reflector.stop()
        await self.ctx.recorder.flush()

    def ready(self) -> bool:
        return self._running and all(r.synced.is_set() for r in [*self.reflectors, self.command_reflector])
