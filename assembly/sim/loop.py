"""The discrete-event loop: jump from event to event (job submissions and finishes), schedule, repeat.

At each event time the loop first finishes the jobs due then (freeing their pods), then submits the jobs due
(creating their pods), then runs scheduling cycles until one changes nothing, then starts the jobs whose
`minAvailable` pods are all placed. Between events nothing changes, so GPU-seconds are integrated piecewise.
The loop stops when no event is left — every job finished, or nothing can change any more (deadlock) — or at
the `until` horizon.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

from assembly.sim.state import Cluster
from assembly.sim.workload import Workload, gpus

MAX_CYCLES_PER_EVENT: Final = 50  # a guard against a scheduler that keeps undoing its own decisions
_FINISH, _SUBMIT = 0, 1  # at one instant, finishes free resources before submissions are seen

State = Literal["Completed", "Running", "Pending", "Deadlocked"]


class Scheduler(Protocol):
    """One scheduling cycle over the cluster at simulated time `now`; True when it placed or evicted a pod."""

    @property
    def name(self) -> str: ...

    def cycle(self, cluster: Cluster, now: float) -> bool: ...

    def elapse(self, cluster: Cluster, start: float, end: float) -> None:
        """Simulated time passes from `start` to `end` with the cluster as it is (what decays with time)."""


def _number(value: float | None, digits: int = 3) -> float | int | None:
    if value is None:
        return None
    rounded = round(value, digits)
    return int(rounded) if float(rounded).is_integer() else rounded


@dataclass(frozen=True, slots=True)
class JobOutcome:
    submitted: float | None
    started: float | None
    finished: float | None
    state: State
    pods: int = 0  # pods of the job
    placed: int = 0  # of them placed when the simulation stopped
    gpus_held: float = 0.0  # GPUs those placed pods hold when the simulation stopped
    span: int | None = None  # HyperNode tiers its pods spanned beyond the lowest (a workload with HyperNodes)

    def to_json(self) -> dict[str, Any]:
        return {
            "submitted": _number(self.submitted),
            "started": _number(self.started),
            "finished": _number(self.finished),
            "state": self.state,
            **({"span": self.span} if self.span is not None else {}),
        }


@dataclass(slots=True)
class SimResult:
    scheduler: str
    jobs: dict[str, JobOutcome] = field(default_factory=dict)
    makespan_s: float = 0.0
    total_gpus: float = 0.0
    gpu_used_s: float = 0.0
    gpu_idle_held_s: float = 0.0
    queue_gpu_s: dict[str, float] = field(default_factory=dict)  # GPU-seconds of started jobs, by queue
    job_queue: dict[str, str] = field(default_factory=dict)  # job key -> queue
    deadlocked: bool = False

    @property
    def unfinished(self) -> list[str]:
        return sorted(key for key, job in self.jobs.items() if job.state != "Completed")

    @property
    def job_time_s(self) -> float:
        """Total execution time: Σ (finished − started) over the jobs that completed."""
        done = [j for j in self.jobs.values() if j.finished is not None and j.started is not None]
        return sum((j.finished or 0.0) - (j.started or 0.0) for j in done)

    @property
    def gpu_utilization(self) -> float | None:
        """GPU-seconds of started jobs over total GPUs × makespan; None when either is zero."""
        if self.total_gpus <= 0 or self.makespan_s <= 0:
            return None
        return self.gpu_used_s / (self.total_gpus * self.makespan_s)

    def to_json(self) -> dict[str, Any]:
        return {
            "jobs": {key: self.jobs[key].to_json() for key in sorted(self.jobs)},
            "makespan_s": _number(self.makespan_s),
            "job_time_s": _number(self.job_time_s),
            "gpu_utilization": _number(self.gpu_utilization, 4),
            "unfinished": self.unfinished,
            "gpu_idle_held_s": _number(self.gpu_idle_held_s),
        }


def _outcomes(cluster: Cluster, stuck: bool) -> dict[str, JobOutcome]:
    out: dict[str, JobOutcome] = {}
    for key, st in cluster.jobs.items():
        state: State
        if st.finished is not None:
            state = "Completed"
        elif st.started is not None:
            state = "Running"
        elif stuck and st.submitted is not None and cluster.placed(key) > 0:
            state = "Deadlocked"  # holds resources, waits for the rest of its gang, and nothing can change
        else:
            state = "Pending"
        held = [p for p in cluster.job_pods(key) if p.node is not None]
        out[key] = JobOutcome(
            st.submitted,
            st.started,
            st.finished,
            state,
            len(st.job.pods),
            len(held),
            sum(gpus(p.request) for p in held),
            st.span,
        )
    return out


def simulate(workload: Workload, scheduler: Scheduler, until: float | None = None) -> SimResult:
    """Replay `workload` under `scheduler`; deterministic for a given workload."""
    cluster = Cluster.create(workload)
    events: list[tuple[float, int, str]] = [(j.submit_at, _SUBMIT, j.key) for j in workload.jobs]
    heapq.heapify(events)
    result = SimResult(scheduler.name, total_gpus=cluster.total_gpus)
    now = 0.0
    stuck = True
    while events:
        at = events[0][0]
        if until is not None and at > until:
            stuck = False
            _advance(cluster, result, now, until)
            scheduler.elapse(cluster, now, until)
            now = until
            break
        _advance(cluster, result, now, at)
        scheduler.elapse(cluster, now, at)
        now = at
        while events and events[0][0] == at:
            _, kind, key = heapq.heappop(events)
            if kind == _FINISH:
                cluster.finish(key, at)
            else:
                cluster.submit(key, at)
        for _ in range(MAX_CYCLES_PER_EVENT):
            changed = scheduler.cycle(cluster, now)
            for finish_at, key in cluster.update_jobs(now):
                heapq.heappush(events, (finish_at, _FINISH, key))
            if not changed:
                break
    result.jobs = _outcomes(cluster, stuck)
    result.job_queue = {key: state.job.queue for key, state in cluster.jobs.items()}
    result.makespan_s = now
    result.deadlocked = stuck and any(o.state == "Deadlocked" for o in result.jobs.values())
    return result


def _advance(cluster: Cluster, result: SimResult, start: float, end: float) -> None:
    if end <= start:
        return
    used, idle = cluster.gpu_usage()
    result.gpu_used_s += used * (end - start)
    result.gpu_idle_held_s += idle * (end - start)
    for queue, gpus_used in cluster.gpu_used_by_queue().items():
        result.queue_gpu_s[queue] = result.queue_gpu_s.get(queue, 0.0) + gpus_used * (end - start)
