"""The idle windows: from each reading of GPU utilisation, which jobs are idle, for how long, which are warned and
which are reclaimable; the condition each should carry and the Events due. Pure (the clock comes in), so the rules
are tested without a server; `loop.py` reads Prometheus and writes what this decides.

A job counts only while it holds GPUs: its Running pods on a node that ask for `nvidia.com/gpu`. It is idle at a
reading when every such pod has a utilisation below the threshold; a pod with no reading at all (exporter down, a
node without the exporter) makes the job not idle: nothing is reclaimed on missing evidence. Idle for the window, it
is warned (condition `lapilli.io/IdleGPU` True, reason Idle, Event IdleGPU); still idle a grace period after the
warning, and in a queue whose policy is `reclaim`, its GPU pods become reclaimable (reason Reclaimable, or
ReclaimableDryRun in dry-run mode, when nothing is evicted). Any reading that finds it busy (or without readings)
ends the window; a warned job then gets status False, reason Active. A reading that fails as a whole (Prometheus
down) changes nothing and marks nothing reclaimable until one succeeds.

A new leader has no windows in memory: a job whose condition says it was warned keeps its warning time (the
condition's lastTransitionTime, kept while it stays True) and counts as idle since a window before it; others start
their window at the leader's first reading.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from extender.engine.model import Condition
from extender.engine.snapshot import PodGroupRecord, PodRecord, Snapshot
from extender.service.idle.settings import IdleGpuSettings, Mode
from lapilli.idlegpu import IDLE_CONDITION, IdleReason, Policy, opted_out, queue_policy
from lapilli.kube.events import EventType
from lapilli.resources.units import GPU
from lapilli.times import go_duration, parse_rfc3339, rfc3339

EVENT_REASONS: Final[dict[IdleReason, tuple[EventType, str]]] = {
    IdleReason.IDLE: ("Warning", "IdleGPU"),
    IdleReason.RECLAIMABLE: ("Warning", "IdleGPUReclaimable"),
    IdleReason.DRY_RUN: ("Normal", "IdleGPUReclaimableDryRun"),
    IdleReason.ACTIVE: ("Normal", "IdleGPUActive"),
}


@dataclass(slots=True)
class _Window:
    idle_since: float
    warned_at: float | None = None


@dataclass(frozen=True, slots=True)
class IdleJob:
    """A job that is idle now (warned or not yet), as the metrics and the dashboard show it."""

    key: str
    queue: str
    state: str  # "idle" (inside its window), or the condition's reason
    idle_s: float
    peak: float  # the busiest of its GPU pods, percent
    pods: tuple[str, ...]


@dataclass(slots=True)
class Pass:
    """What one reading decided."""

    conditions: dict[str, dict[str, str]] = field(default_factory=dict)  # PodGroup -> its new IdleGPU condition
    events: list[tuple[str, EventType, str, str]] = field(default_factory=list)  # (PodGroup, type, reason, message)
    reclaimable: frozenset[str] = frozenset()  # pod keys the engine may evict (mode on only)
    jobs: list[IdleJob] = field(default_factory=list)
    failed: bool = False  # the reading itself failed: nothing was decided


def gpu_pods(snap: Snapshot) -> dict[str, list[PodRecord]]:
    """PodGroup -> its Running pods on a node that hold GPUs."""
    out: dict[str, list[PodRecord]] = {}
    for _key, pod in sorted(snap.pods.items()):
        if pod.group and pod.phase == "Running" and pod.node_name and pod.request.get(GPU, 0.0) > 0:
            out.setdefault(f"{pod.namespace}/{pod.group}", []).append(pod)
    return out


def stored_condition(pg: PodGroupRecord) -> Condition | None:
    return next((c for c in pg.conditions if c.type == IDLE_CONDITION), None)


def _since(condition: Condition) -> float | None:
    """When a True condition turned True (its lastTransitionTime), if it says."""
    stamp = dict(condition.extra).get("lastTransitionTime")
    try:
        return parse_rfc3339(str(stamp)) if stamp else None
    except ValueError:
        return None


class IdleTracker:
    def __init__(self, settings: IdleGpuSettings) -> None:
        self.settings = settings
        self.windows: dict[str, _Window] = {}

    def update(self, snap: Snapshot, usage: Mapping[str, float] | None, now: float) -> Pass:
        """One reading: `usage` is pod key -> utilisation percent, None when the reading failed."""
        if usage is None:
            return Pass(failed=True)
        out = Pass()
        holding = gpu_pods(snap)
        reclaimable: set[str] = set()
        for key, pg in sorted(snap.podgroups.items()):
            pods = holding.get(key, [])
            stored = stored_condition(pg)
            quiet = self._quiet(snap, pg, pods, usage)
            if quiet is not None:
                self.windows.pop(key, None)
                if stored is not None and stored.status == "True":
                    self._decide(out, key, stored, IdleReason.ACTIVE, quiet)
                continue
            peak = max(usage[f"{p.namespace}/{p.name}"] for p in pods)
            reason, message, idle_s = self._idle(key, pg, stored, snap, peak, now)
            out.jobs.append(IdleJob(key, pg.queue, str(reason) if reason else "idle", idle_s, peak,
                                    tuple(f"{p.namespace}/{p.name}" for p in pods)))
            if reason is None:
                continue
            self._decide(out, key, stored, reason, message)
            if reason is IdleReason.RECLAIMABLE:
                reclaimable.update(f"{p.namespace}/{p.name}" for p in pods)
        self.windows = {k: w for k, w in self.windows.items() if k in snap.podgroups}
        out.reclaimable = frozenset(reclaimable)
        return out

    def turned_off(self, snap: Snapshot) -> Pass:
        """With `--idle-gpu-mode off`: every condition still saying idle turns False, so nothing read from the
        PodGroups (`lapilli job why`, the dashboard) counts a job as reclaimable any more."""
        out = Pass()
        for key, pg in sorted(snap.podgroups.items()):
            stored = stored_condition(pg)
            if stored is not None and stored.status == "True":
                self._decide(out, key, stored, IdleReason.ACTIVE, "idle-GPU reclaim is off (--idle-gpu-mode off)")
        return out

    def _quiet(self, snap: Snapshot, pg: PodGroupRecord, pods: list[PodRecord],
               usage: Mapping[str, float]) -> str | None:
        """Why the job is not idle now (the Active message), or None when it is."""
        if not pods:
            return "holds no GPUs"
        if opted_out(pg.annotations):
            return "opted out (annotation lapilli.io/idle-gpu-reclaim: false)"
        policy, where = queue_policy(snap.queues, pg.queue, self.settings.policy)
        if policy is Policy.OFF:
            return f"queue {pg.queue}'s idle-GPU policy is off{_set_on(where, pg.queue)}"
        missing = [p.name for p in pods if f"{p.namespace}/{p.name}" not in usage]
        if missing:
            return f"no GPU utilisation reading for pod {missing[0]}: not judged idle"
        peak = max(usage[f"{p.namespace}/{p.name}"] for p in pods)
        if peak >= self.settings.threshold_percent:
            return f"GPUs in use again ({peak:.0f}% at the busiest pod)"
        return None

    def _idle(self, key: str, pg: PodGroupRecord, stored: Condition | None, snap: Snapshot, peak: float,
              now: float) -> tuple[IdleReason | None, str, float]:
        """The reason an idle job's condition should carry (None while inside its window), its message, and how long
        it has been idle."""
        s = self.settings
        window = self.windows.get(key)
        if window is None:
            warned = _since(stored) if stored is not None and stored.status == "True" else None
            window = _Window(now if warned is None else warned - s.window_s, warned)
            self.windows[key] = window
        idle_s = now - window.idle_since
        below = f"GPUs below {s.threshold_percent:g}% for {go_duration(idle_s)} (busiest {peak:.0f}%)"
        if idle_s < s.window_s:
            return None, "", idle_s
        if window.warned_at is None:
            window.warned_at = now
        policy, where = queue_policy(snap.queues, pg.queue, s.policy)
        queue = f"queue {pg.queue}: policy {policy}{_set_on(where, pg.queue)}"
        reclaim_at = window.warned_at + s.grace_s
        if policy is not Policy.RECLAIM:
            return IdleReason.IDLE, f"{below}; warned, never reclaimed ({queue})", idle_s
        if now < reclaim_at:
            return (IdleReason.IDLE, f"{below}; reclaimable from {rfc3339(reclaim_at)} if still idle and a job waits "
                    f"for the room ({queue})", idle_s)
        if s.mode == Mode.ON:
            return (IdleReason.RECLAIMABLE, f"{below}; reclaimable: preempt and reclaim may evict its pods for a job "
                    f"that waits for the room ({queue})", idle_s)
        return IdleReason.DRY_RUN, f"{below}; would be reclaimable now (dry run: nothing is evicted; {queue})", idle_s

    @staticmethod
    def _decide(out: Pass, key: str, stored: Condition | None, reason: IdleReason, message: str) -> None:
        """Write the condition (and its Event) when its status or reason changes; a message whose numbers moved
        is not rewritten."""
        status = "False" if reason is IdleReason.ACTIVE else "True"
        if stored is not None and (stored.status, stored.reason) == (status, str(reason)):
            return
        out.conditions[key] = {"type": IDLE_CONDITION, "status": status, "reason": str(reason), "message": message}
        type_, event = EVENT_REASONS[reason]
        out.events.append((key, type_, event, message))


def _set_on(where: str, queue: str) -> str:
    if not where:
        return " (the service's default)"
    return "" if where == queue else f" (set on {where})"


__all__ = ["EVENT_REASONS", "IdleJob", "IdleTracker", "Pass", "gpu_pods", "stored_condition"]
