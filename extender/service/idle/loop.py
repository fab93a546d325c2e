"""Idle-GPU reclaim on the leader: every `--idle-gpu-interval` read each pod's GPU utilisation from Prometheus,
let the tracker (`track.py`) keep the idle windows, write the `lapilli.io/IdleGPU` condition and Events it decides
and export the metrics; the pods it marks reclaimable (mode `on` only) are what the session loop hands the engine
as `Snapshot.idle_reclaimable`, so eviction goes through preempt and reclaim, and only for a job that waits.

Metrics: `lapilli_idle_gpu_jobs{queue,state}` (idle jobs by state: idle, Idle, Reclaimable, ReclaimableDryRun),
`lapilli_idle_gpu_idle_seconds{podgroup,queue}` (how long each idle job has been idle),
`lapilli_idle_gpu_evictions_total{queue,action}` (pods evicted while marked reclaimable) and
`lapilli_idle_gpu_reading_failures_total` (readings that failed: nothing is reclaimable until one succeeds).
A replica that stops leading clears its gauges and marks nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from extender.engine.snapshot import Snapshot
from extender.service.idle.settings import IdleGpuSettings
from extender.service.idle.track import IdleJob, IdleTracker, Pass
from extender.service.why import with_condition, write_conditions
from lapilli.idlegpu import bad_policies
from lapilli.kube import KubeClient
from lapilli.kube.events import EventRecorder
from lapilli.kube.resources import PODGROUPS
from lapilli.meta import uid_of
from lapilli.prometheus import Prometheus, PrometheusError, Sample
from lapilli.times import rfc3339

log = logging.getLogger("lapilli.extender")

EVENT_SOURCE = "lapilli-idle-gpu"
# Label pairs a reading may name its pod with: the DCGM exporter's, then its old ones (--use-old-namespace).
POD_LABELS = (("namespace", "pod"), ("pod_namespace", "pod_name"))


def usage_by_pod(samples: Iterable[Sample]) -> dict[str, float]:
    """pod key -> utilisation; a pod named twice keeps its highest reading, a sample naming no pod is left out."""
    out: dict[str, float] = {}
    for sample in samples:
        for ns_label, pod_label in POD_LABELS:
            namespace, pod = sample.labels.get(ns_label), sample.labels.get(pod_label)
            if namespace and pod:
                key = f"{namespace}/{pod}"
                out[key] = max(out.get(key, sample.value), sample.value)
                break
    return out


class IdleMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.jobs = Gauge("lapilli_idle_gpu_jobs", "Jobs whose GPUs are idle now, by queue and state (idle: inside "
                          "its window; Idle: warned; Reclaimable; ReclaimableDryRun).", ["queue", "state"],
                          registry=registry)
        self.idle_seconds = Gauge("lapilli_idle_gpu_idle_seconds", "How long each idle job's GPUs have been below "
                                  "the threshold.", ["podgroup", "queue"], registry=registry)
        self.evictions = Counter("lapilli_idle_gpu_evictions", "Pods evicted by preempt or reclaim while marked "
                                 "idle-reclaimable.", ["queue", "action"], registry=registry)
        self.failures = Counter("lapilli_idle_gpu_reading_failures", "GPU utilisation readings that failed "
                                "(Prometheus unreachable or refusing the query).", registry=registry)

    def show(self, jobs: list[IdleJob]) -> None:
        self.clear()
        counts: dict[tuple[str, str], int] = {}
        for job in jobs:
            counts[(job.queue, job.state)] = counts.get((job.queue, job.state), 0) + 1
            self.idle_seconds.labels(job.key, job.queue).set(job.idle_s)
        for (queue, state), n in counts.items():
            self.jobs.labels(queue, state).set(n)

    def clear(self) -> None:
        self.jobs.clear()
        self.idle_seconds.clear()


class IdleLoop:
    def __init__(
        self, settings: IdleGpuSettings, snapshot: Callable[[], Snapshot | None],
        stored: Callable[[], Mapping[str, Mapping[str, Any]]], client: KubeClient, registry: CollectorRegistry, *,
        prometheus: Prometheus | None = None, is_leader: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`snapshot`: the session loop's cluster copy (None while not synced); `stored`: PodGroups as last seen."""
        self.settings, self.snapshot, self.stored, self.client = settings, snapshot, stored, client
        self.prometheus = prometheus or Prometheus(settings.prometheus_url)
        self.is_leader, self.clock = is_leader, clock
        self.tracker = IdleTracker(settings)
        self.metrics = IdleMetrics(registry)
        self.recorder = EventRecorder(client, EVENT_SOURCE)
        self.reclaimable: frozenset[str] = frozenset()  # what the next sessions hand the engine
        self.jobs: list[IdleJob] = []  # idle jobs at the last reading
        self._queues: dict[str, str] = {}  # pod key -> queue, of the pods marked reclaimable
        self._error = ""  # the last reading's failure, logged once
        self._bad: dict[str, str] = {}  # queues whose policy annotation names none, logged once each

    async def run_forever(self) -> None:
        if not self.settings.active:
            await self.clear_when_leading()
            return
        leading = False
        try:
            while True:
                if self.is_leader():
                    leading = True
                    try:
                        await self.run_once()
                    except Exception:
                        log.exception("idle-GPU pass failed; retrying next interval")
                elif leading:  # a follower marks nothing and exports nothing
                    leading = False
                    self.stand_down()
                await asyncio.sleep(self.settings.interval_s)
        finally:
            await self.prometheus.close()

    async def clear_when_leading(self) -> None:
        """Mode off: once leading with a synced cache, turn any idle condition left from before False, then stop."""
        while True:
            snap = self.snapshot()
            if snap is not None and self.is_leader():
                await self._apply(self.tracker.turned_off(snap))
                return
            await asyncio.sleep(1.0)  # as soon as the cache is synced: right at the start of the first term

    def stand_down(self) -> None:
        self.reclaimable, self.jobs, self._queues = frozenset(), [], {}
        self.tracker.windows.clear()
        self.metrics.clear()

    async def read(self) -> dict[str, float] | None:
        """Each pod's utilisation, or None when the reading failed (logged once per distinct failure)."""
        try:
            samples = await self.prometheus.query(self.settings.query)
        except PrometheusError as exc:
            self.metrics.failures.inc()
            if str(exc) != self._error:
                self._error = str(exc)
                log.warning("idle-GPU reading failed (%s): nothing is reclaimable until one succeeds", exc)
            return None
        if self._error:
            log.info("idle-GPU readings succeed again")
            self._error = ""
        return usage_by_pod(samples)

    async def run_once(self) -> Pass:
        snap = self.snapshot()
        if snap is None:
            return Pass(failed=True)
        self._report_bad_policies(snap)
        outcome = self.tracker.update(snap, await self.read(), self.clock())
        if outcome.failed:
            self.reclaimable, self._queues = frozenset(), {}
            return outcome
        self.reclaimable = outcome.reclaimable
        self._queues = {pod: job.queue for job in outcome.jobs for pod in job.pods if pod in outcome.reclaimable}
        self.jobs = outcome.jobs
        self.metrics.show(outcome.jobs)
        await self._apply(outcome)
        return outcome

    async def _apply(self, outcome: Pass) -> None:
        """Write the conditions a pass decided and record its Events."""
        stamp = rfc3339(self.clock())
        await asyncio.gather(*(self._write(key, condition, stamp) for key, condition in outcome.conditions.items()))
        for key, type_, reason, message in outcome.events:
            self.recorder.record(self._ref(key), type_, reason, message)

    def evicted(self, pod: str, action: str) -> None:
        """The session loop evicted `pod`: count it (and tell its PodGroup) if it was marked reclaimable."""
        queue = self._queues.get(pod)
        if queue is None:
            return
        self.metrics.evictions.labels(queue, action or "unknown").inc()
        job = next((j for j in self.jobs if pod in j.pods), None)
        if job is not None:
            message = f"evicted pod {pod} by {action or 'an eviction'}: its GPUs were idle and a job waited for them"
            self.recorder.record(self._ref(job.key), "Warning", "IdleGPUReclaimed", message)

    def _report_bad_policies(self, snap: Snapshot) -> None:
        bad = bad_policies(snap.queues)
        for queue, value in bad.items():
            if self._bad.get(queue) != value:
                log.warning("queue %s: annotation lapilli.io/idle-gpu-policy %r is none of reclaim, warn, off; "
                            "its parent's policy (or the default) applies", queue, value)
        self._bad = bad

    def _ref(self, key: str) -> Mapping[str, Any]:
        namespace, _, name = key.partition("/")
        return {"apiVersion": PODGROUPS.api_version, "kind": PODGROUPS.kind,
                "metadata": {"name": name, "namespace": namespace, "uid": uid_of(self.stored().get(key) or {})}}

    async def _write(self, key: str, condition: dict[str, str], stamp: str) -> None:
        current = ((self.stored().get(key) or {}).get("status") or {}).get("conditions") or []
        conditions = with_condition(current, condition, stamp)
        if conditions is not None:
            await write_conditions(self.client, key, conditions, "idle-GPU condition")
