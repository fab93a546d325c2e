"""The session loop: every period and on change, run the configured actions over a fresh snapshot (with the plan
overlaid) in a worker thread, then turn the outcome into new gang plans, evictions, status writes and PodGroup
events.

The verbs never wait for a session: they read `latest` (swapped whole) and the plan.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from extender.engine.conf import ConfError, SchedulerConf
from extender.engine.run import parse_scheduler_conf
from extender.service.metrics import ExtenderMetrics
from extender.service.plan import Plan
from extender.service.runner import SessionRunner, ThreadRunner
from extender.service.session import Outcome
from extender.service.state import ClusterState
from lapilli.kube import KubeClient
from lapilli.kube.errors import ApiError, NotFound
from lapilli.kube.events import EventRecorder
from lapilli.kube.resources import PODGROUPS, PODS, QUEUES

log = logging.getLogger("lapilli.extender")

PLANNED_ANNOTATION = "lapilli.io/planned"
WRITE_CONCURRENCY = 16
# The session runs in a worker thread; a short GIL switch interval lets the event loop answer a verb within
# about this long while a session computes (CPython's default is 5 ms).
SWITCH_INTERVAL_S = 0.0002
MIN_SESSION_GAP_S = 0.2
# Volcano's scheduler records its events as its scheduler name (`--scheduler-name`, default `volcano`), which is
# what `kubectl describe podgroup` users of Volcano look for under From.
EVENT_SOURCE = "volcano"
# Each PodGroup's last Unschedulable and Scheduled events, so a paced repeat bumps its Event in place; past this
# many a repeat creates a new Event (and old ones pile up until the API server's event TTL).
REMEMBERED_EVENTS = 65_536


class ConfSource:
    """The scheduler configuration file, re-read when its modification time changes."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._mtime: float | None = None
        self.conf: SchedulerConf = parse_scheduler_conf(path.read_text() if path else None)
        self._warn(self.conf)
        if path is not None:
            self._mtime = path.stat().st_mtime

    def _warn(self, conf: SchedulerConf) -> None:
        """Each load reports what it left out once (unknown action or plugin names), as Volcano logs them."""
        for warning in conf.warnings:
            log.warning("scheduler configuration %s: %s", self.path or "(default)", warning)

    def refresh(self) -> SchedulerConf:
        if self.path is None:
            return self.conf
        with contextlib.suppress(OSError):
            mtime = self.path.stat().st_mtime
            if mtime != self._mtime:
                self._mtime = mtime
                try:
                    self.conf = parse_scheduler_conf(self.path.read_text())
                    log.info("scheduler configuration %s reloaded", self.path)
                    self._warn(self.conf)
                except ConfError as exc:
                    log.error("keeping the previous scheduler configuration: %s: %s", self.path, exc)
        return self.conf


class SessionLoop:
    def __init__(
        self,
        state: ClusterState,
        plan: Plan,
        client: KubeClient,
        conf: ConfSource,
        metrics: ExtenderMetrics,
        period_s: float = 1.0,
        is_leader: Callable[[], bool] = lambda: True,
        runner: SessionRunner | None = None,
    ) -> None:
        self.state, self.plan, self.client, self.conf, self.metrics = state, plan, client, conf, metrics
        self.runner: SessionRunner = runner or ThreadRunner(state)
        self.period_s = period_s
        self.is_leader = is_leader
        self.latest: Outcome | None = None
        self.waiting: set[str] = set()  # pods filter turned away for want of a plan
        self._wake = asyncio.Event()
        self._recent_evictions: dict[str, float] = {}
        self._write = asyncio.Semaphore(WRITE_CONCURRENCY)
        self.recorder = EventRecorder(client, EVENT_SOURCE, remembered=REMEMBERED_EVENTS)

    def poke(self) -> None:
        """Ask for a session soon (a change was seen, or a verb needs a plan)."""
        self._wake.set()

    async def run_forever(self) -> None:
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        while True:
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancel that lands as the wait ends,
            # and this loop would then never stop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.period_s):
                    await self._wake.wait()
            self._wake.clear()
            if not (self.state.synced and self.is_leader()):
                continue
            try:
                await self.run_once()
            except Exception:
                log.exception("scheduling session failed; retrying next period")
            # Coalesce bursts of watch events: at most five sessions a second, each over the whole cluster.
            await asyncio.sleep(MIN_SESSION_GAP_S)

    async def run_once(self) -> Outcome | None:
        now = time.monotonic()
        for gang in self.plan.expire(now):
            log.info("gang %s: plan expired before it bound; re-planning", gang)
        outcome = await self.runner(self.plan.placements(), self.conf.refresh())
        if outcome is None:
            return None  # the session's own view of the cluster is not synced yet
        self.metrics.session_seconds.observe(outcome.seconds)
        self._adopt(outcome, now)
        self.latest = outcome
        await asyncio.gather(self._evict(outcome), self._write_status(outcome), self._requeue())
        # After the statuses, as Volcano's UpdateJobStatus does: whoever reads an event finds the condition it
        # reports already stored.
        self._record_events(outcome)
        return outcome

    def _adopt(self, outcome: Outcome, now: float) -> None:
        for gang, (min_member, nodes) in outcome.new_plans.items():
            if gang in self.plan.gangs:
                self.plan.gangs[gang].nodes.update(nodes)
                self.plan.gangs[gang].min_member = min_member
                for pod in nodes:
                    self.plan.gang_of_pod[pod] = gang
                self.plan.version += 1
            else:
                self.plan.add(gang, min_member, nodes, now)

    async def _evict(self, outcome: Outcome) -> None:
        now = time.monotonic()
        self._recent_evictions = {k: t for k, t in self._recent_evictions.items() if now - t < 30}
        todo = [k for k in outcome.evictions if k not in self._recent_evictions]
        for key in todo:
            self._recent_evictions[key] = now
        await asyncio.gather(*(self._evict_one(key, *outcome.evicted_by.get(key, ("", ""))) for key in todo))

    async def _evict_one(self, key: str, action: str = "", queue: str = "") -> None:
        namespace, name = key.split("/", 1)
        async with self._write:
            try:
                await self.client.evict(namespace, name)
                self.metrics.evictions.inc()
                self.metrics.evictions_by.labels(action or "unknown", queue).inc()
                log.info("evicted %s", key)
            except NotFound:
                pass
            except ApiError as exc:
                log.warning("eviction of %s failed: %s", key, exc)

    async def _write_status(self, outcome: Outcome) -> None:
        kinds = {"PodGroup": PODGROUPS, "Queue": QUEUES}
        writes = []
        for kind, key, status in outcome.status_writes:
            namespace, _, name = key.rpartition("/")
            writes.append(self._patch_status(kinds[kind], name, namespace or None, status))
        for name, computed in outcome.queues.items():
            self.metrics.observe_queue(name, outcome.dims, computed)
        await asyncio.gather(*writes)

    def _record_events(self, outcome: Outcome) -> None:
        """The session already chose and paced these; the recorder writes them in the background."""
        for key, uid, type_, reason, message in outcome.events:
            namespace, _, name = key.partition("/")
            ref = {
                "apiVersion": PODGROUPS.api_version, "kind": PODGROUPS.kind,
                "metadata": {"name": name, "namespace": namespace, "uid": uid},
            }
            self.recorder.record(ref, type_, reason, message)

    async def _patch_status(self, res: Any, name: str, namespace: str | None, status: dict[str, Any]) -> None:
        async with self._write:
            try:
                await self.client.patch_status(res, name, {"status": status}, namespace)
            except NotFound:
                pass
            except ApiError as exc:
                log.warning("status of %s %s/%s not written: %s", res.kind, namespace or "", name, exc)

    async def _requeue(self) -> None:
        """kube-scheduler keeps a pod it found unschedulable aside until the pod changes; once its gang has a
        plan, touch the pod so it comes back at once instead of after the unschedulable-queue flush."""
        ready = [key for key in self.waiting if self.plan.node_for(key) is not None]
        for key in ready:
            self.waiting.discard(key)
        await asyncio.gather(*(self._touch(key) for key in ready))

    async def _touch(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        patch = {"metadata": {"annotations": {PLANNED_ANNOTATION: str(self.plan.version)}}}
        async with self._write:
            try:
                await self.client.patch(PODS, name, patch, namespace)
            except ApiError as exc:
                log.debug("could not requeue %s: %s", key, exc)
