"""The leader persists each queue's decayed usage in the cluster (Kueue's usage sampling loop; Volcano has none).

Every `samplingInterval` of the conf's `fairshare` entry (nothing runs without one), the extender's leader advances
each queue's record (`lapilli.usage`) from its last sample to now with what the queue holds now, and writes it back
as the Queue's annotation `lapilli.io/decayed-usage` (a merge patch of that one key). The record is read back through
the watch like every other Queue field, so a restarted or newly elected leader continues from the persisted value;
nothing of it lives only in memory.

Writes are throttled: at most one per queue per interval, and only for queues that hold something now (each level
of a tree: its descendants' pods). A queue that holds nothing is left alone, since its stored record already
describes the curve until it holds something again (decay alone, computed by whoever reads it); one that never held
anything gets no annotation at all. A record that cannot be read is reported (log line, `lapilli_fairshare_usage_
unreadable_total`) and replaced by a fresh one at the next sample.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge

from extender.engine.conf import SchedulerConf
from extender.engine.snapshot import Snapshot
from extender.engine.usage import FairShareArgs, allocations, conf_args
from lapilli.kube import REQUEST_ERRORS, KubeClient
from lapilli.kube.errors import NotFound
from lapilli.kube.resources import QUEUES
from lapilli.usage import USAGE_ANNOTATION, UsageRecord, hours

log = logging.getLogger("lapilli.extender")

IDLE_CHECK_S: Final = 10.0  # without a fairshare entry: how often to look whether the conf gained one


class UsageMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.writes = Counter("lapilli_fairshare_usage_writes_total", "Decayed-usage records the leader wrote.",
                              registry=registry)
        self.unreadable = Counter("lapilli_fairshare_usage_unreadable_total",
                                  "Queue usage records found unreadable (replaced at the next sample).",
                                  ["queue"], registry=registry)
        self.hours = Gauge("lapilli_queue_decayed_usage_hours",
                           "A queue's decayed usage at the last sample, in resource-hours (GPU·h, CPU·h, GiB·h).",
                           ["queue", "resource"], registry=registry)


class UsageLoop:
    def __init__(
        self, snapshot: Callable[[], Snapshot | None], conf: Callable[[], SchedulerConf], client: KubeClient,
        metrics: UsageMetrics, *, is_leader: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`snapshot`: the session loop's cluster copy (None while not synced); `clock`: wall-clock seconds."""
        self.snapshot, self.conf, self.client, self.metrics = snapshot, conf, client, metrics
        self.is_leader, self.clock = is_leader, clock
        self._reported: dict[str, str] = {}  # queue -> the unreadable record's error, reported once

    def args(self) -> FairShareArgs | None:
        conf = self.conf()
        return conf_args((p.name, p.arguments) for t in conf.tiers for p in t.plugins)

    async def run_forever(self) -> None:
        while True:
            args = self.args()
            await asyncio.sleep(args.sampling_interval if args is not None else IDLE_CHECK_S)
            if not self.is_leader():
                continue
            try:
                await self.run_once()
            except Exception:
                log.exception("sampling the queues' decayed usage failed; retrying next interval")

    def records(self, snap: Snapshot, args: FairShareArgs, now: float) -> dict[str, UsageRecord]:
        """The records due now: every queue that holds something, advanced from its last sample."""
        held = allocations(snap)
        due: dict[str, UsageRecord] = {}
        for name, queue in sorted(snap.queues.items()):
            if queue.usage_error and self._reported.get(name) != queue.usage_error:
                self._reported[name] = queue.usage_error
                self.metrics.unreadable.labels(name).inc()
                log.warning("queue %s: %s; its usage starts again from this sample", name, queue.usage_error)
            now_held = {k: v for k, v in held.get(name, {}).items() if v > 0}
            if not now_held:
                continue
            record = queue.usage
            if record is None:  # when it began to hold this is unknown: counted from now on
                due[name] = UsageRecord(now, args.half_life, {})
            else:
                due[name] = UsageRecord(now, args.half_life,
                                        record.next_sample(now, args.half_life, now_held, args.sampling_interval))
        return due

    async def run_once(self) -> int:
        """One sample: write the records that are due; returns how many were written."""
        args = self.args()
        snap = self.snapshot()
        if args is None or snap is None:
            return 0
        due = self.records(snap, args, self.clock())
        written = await asyncio.gather(*(self._write(name, record) for name, record in due.items()))
        for name, record in due.items():
            for resource, value in record.usage.items():
                self.metrics.hours.labels(name, resource).set(hours(resource, value))
        return sum(written)

    async def _write(self, name: str, record: UsageRecord) -> bool:
        patch = {"metadata": {"annotations": {USAGE_ANNOTATION: record.to_annotation()}}}
        try:
            await self.client.patch(QUEUES, name, patch)
        except NotFound:
            return False
        except REQUEST_ERRORS as exc:
            log.warning("decayed usage of queue %s not written: %s", name, exc)
            return False
        self.metrics.writes.inc()
        return True
