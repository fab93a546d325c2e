"""The explanation on the PodGroup itself, where `kubectl describe pg` shows it, and per-queue job metrics.

Every `interval_s` (`--why-interval`, 30 s) the leader explains the PodGroups that wait
(`extender.engine.explain` over the session loop's own snapshot and conf) and writes one condition of Lapilli's own
type, `lapilli.io/Why`: status True while the gang waits, False once it runs; reason = the first reason's kind;
message = the reasons, most important first.
Volcano's `Unschedulable` / `Scheduled` conditions and events are left as the session writes them. A condition is
written only when its text changed, and no more often than the session's events (`pacing.Pacer`'s bucket per
PodGroup), so numbers that move every second settle at one write per 30 s.

The explanation runs in a worker thread of the verbs' process, once per interval and for at most `limit`
PodGroups. It costs about one scheduling session of CPU (it runs the session's actions once more, recording), taken
in short GIL slices (the loop's switch interval is 0.2 ms): hence the long default interval. Running it in the
session process instead is the next step for large clusters.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from prometheus_client import CollectorRegistry, Gauge

from extender.engine.conf import SchedulerConf
from extender.engine.explain import Explanation, Kind, explain
from extender.engine.snapshot import Snapshot
from extender.service.pacing import Pacer
from lapilli.kube import KubeClient
from lapilli.kube.errors import ApiError, NotFound
from lapilli.kube.resources import PODGROUPS

log = logging.getLogger("lapilli.extender")

CONDITION: Final = "lapilli.io/Why"
WAITING_PHASES: Final = frozenset({"", "Pending", "Inqueue", "Unknown"})
MESSAGE_REASONS: Final = 4  # reasons in the condition's message (the rest: `lapilli job why`)


def condition(explanation: Explanation) -> dict[str, str]:
    waiting = explanation.kind not in (Kind.RUNNING, Kind.STARTING)
    message = "; ".join(f"{i}. {r.message}" for i, r in enumerate(explanation.reasons[:MESSAGE_REASONS], 1))
    return {"type": CONDITION, "status": "True" if waiting else "False", "reason": str(explanation.kind),
            "message": message or explanation.phase}


def with_condition(current: list[Mapping[str, Any]], new: dict[str, str], stamp: str) -> list[dict[str, Any]] | None:
    """The conditions list with `new` first (where the session's writer keeps it), or None if unchanged."""
    old = next((c for c in current if c.get("type") == CONDITION), None)
    if old is not None and all(old.get(k) == v for k, v in new.items()):
        return None
    kept = old.get("lastTransitionTime") if old is not None and old.get("status") == new["status"] else None
    return [{**new, "lastTransitionTime": kept or stamp}, *(dict(c) for c in current if c.get("type") != CONDITION)]


class QueueJobMetrics:
    """Per queue: PodGroups by phase, sampled on the why pass. (The time to Running is observed where the session
    writes the phase: `metrics.TimeToRunning`.)"""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.jobs = Gauge("lapilli_queue_jobs", "PodGroups per queue and phase (pending = not admitted, inqueue = "
                          "admitted and waiting, running).", ["queue", "phase"], registry=registry)
        self._labels: set[tuple[str, str]] = set()

    def observe(self, snap: Snapshot) -> None:
        counts: dict[tuple[str, str], int] = {}
        for pg in snap.podgroups.values():
            phase = (pg.phase or "Pending").lower()
            if phase in ("pending", "inqueue", "running"):
                counts[(pg.queue, phase)] = counts.get((pg.queue, phase), 0) + 1
        for labels in self._labels - set(counts):
            self.jobs.labels(*labels).set(0)
        for labels, count in counts.items():
            self.jobs.labels(*labels).set(count)
        self._labels |= set(counts)


class WhyLoop:
    def __init__(
        self, snapshot: Callable[[], Snapshot | None], conf: Callable[[], SchedulerConf],
        stored: Callable[[], Mapping[str, Mapping[str, Any]]], client: KubeClient, registry: CollectorRegistry,
        *, interval_s: float = 30.0, limit: int = 200, is_leader: Callable[[], bool] = lambda: True,
    ) -> None:
        """`snapshot`: the session loop's cluster copy (None while not synced); `stored`: PodGroups as last seen."""
        self.snapshot, self.conf, self.stored, self.client = snapshot, conf, stored, client
        self.interval_s, self.limit, self.is_leader = interval_s, limit, is_leader
        self.pacer = Pacer()
        self.metrics = QueueJobMetrics(registry)

    async def run_forever(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            if not self.is_leader():
                continue
            try:
                await self.run_once()
            except Exception:
                log.exception("explaining waiting PodGroups failed; retrying next interval")

    def candidates(self, snap: Snapshot) -> list[str]:
        """Waiting PodGroups, and running ones whose condition still says they wait (to flip it)."""
        stored = self.stored()
        out = []
        for key, pg in sorted(snap.podgroups.items()):
            if pg.phase in WAITING_PHASES:
                out.append(key)
                continue
            conditions = ((stored.get(key) or {}).get("status") or {}).get("conditions") or []
            if any(c.get("type") == CONDITION and c.get("status") == "True" for c in conditions):
                out.append(key)
        return out[: self.limit]

    async def run_once(self) -> int:
        """Explain, then write the conditions that changed and are due; returns how many were written."""
        snap = self.snapshot()
        if snap is None:
            return 0
        self.metrics.observe(snap)
        keys = self.candidates(snap)
        if not keys:
            return 0
        explanations = await asyncio.to_thread(explain, snap, self.conf(), keys)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        now = time.monotonic()
        stored = self.stored()
        writes = []
        for key, answer in explanations.items():
            current = ((stored.get(key) or {}).get("status") or {}).get("conditions") or []
            new = condition(answer)
            conditions = with_condition(current, new, stamp)
            if conditions is None:
                continue
            if self.pacer.event_due(key, CONDITION, now, lambda n=new: n["message"]) is None:  # type: ignore[misc]
                continue
            writes.append(self._write(key, conditions))
        self.pacer.retain(snap.podgroups, ())
        await asyncio.gather(*writes)
        return len(writes)

    async def _write(self, key: str, conditions: list[dict[str, Any]]) -> None:
        namespace, _, name = key.partition("/")
        with contextlib.suppress(NotFound):
            try:
                await self.client.patch_status(PODGROUPS, name, {"status": {"conditions": conditions}}, namespace)
            except ApiError as exc:
                log.warning("why-condition of PodGroup %s not written: %s", key, exc)
