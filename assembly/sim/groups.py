"""Per-group figures of a simulation: for each queue group (a lab: a top-level queue and the user queues under it),
its jobs, how long they waited to start, and its share of the cluster's GPU time.

A job's wait is start − submit (for jobs that started; a job that never started counts as waiting until the end
of the simulation). Utilization is the group's GPU-seconds over total GPUs × makespan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from assembly.sim.loop import SimResult
from lapilli.meta import name_of


@dataclass(frozen=True, slots=True)
class GroupStats:
    group: str
    jobs: int
    finished: int
    mean_wait_s: float
    max_wait_s: float
    gpu_utilization: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "jobs": self.jobs,
            "finished": self.finished,
            "mean_wait_s": round(self.mean_wait_s, 1),
            "max_wait_s": round(self.max_wait_s, 1),
            "gpu_utilization": None if self.gpu_utilization is None else round(self.gpu_utilization, 4),
        }


def top_level(queues: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Queue name -> its top-level ancestor below `root` (itself for a top-level queue)."""
    parent = {name_of(q): str((q.get("spec") or {}).get("parent") or "root") for q in queues}

    def top(name: str) -> str:
        seen: set[str] = set()
        while parent.get(name, "root") != "root" and name not in seen:
            seen.add(name)
            name = parent[name]
        return name

    return {name: top(name) for name in parent}


def group_stats(result: SimResult, queues: Sequence[Mapping[str, Any]]) -> list[GroupStats]:
    group_of = top_level(queues)
    waits: dict[str, list[float]] = {}
    finished: dict[str, int] = {}
    gpu_s: dict[str, float] = {}
    for key, job in result.jobs.items():
        group = group_of.get(result.job_queue.get(key, ""), result.job_queue.get(key, ""))
        submitted = job.submitted or 0.0
        started = job.started if job.started is not None else result.makespan_s
        waits.setdefault(group, []).append(max(started - submitted, 0.0))
        finished[group] = finished.get(group, 0) + (job.state == "Completed")
    for queue, seconds in result.queue_gpu_s.items():
        group = group_of.get(queue, queue)
        gpu_s[group] = gpu_s.get(group, 0.0) + seconds
    capacity = result.total_gpus * result.makespan_s
    return [
        GroupStats(
            group=group,
            jobs=len(values),
            finished=finished.get(group, 0),
            mean_wait_s=sum(values) / len(values),
            max_wait_s=max(values),
            gpu_utilization=gpu_s.get(group, 0.0) / capacity if capacity > 0 else None,
        )
        for group, values in sorted(waits.items())
    ]


def render_groups(result: SimResult, queues: Sequence[Mapping[str, Any]]) -> str:
    rows = [("GROUP", "JOBS", "FINISHED", "MEAN_WAIT_S", "MAX_WAIT_S", "GPU_UTIL")]
    for stats in group_stats(result, queues):
        util = "-" if stats.gpu_utilization is None else f"{stats.gpu_utilization * 100:.1f}%"
        rows.append((stats.group, str(stats.jobs), str(stats.finished), f"{stats.mean_wait_s:.0f}",
                     f"{stats.max_wait_s:.0f}", util))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    title = f"{result.scheduler}: by queue group"
    return "\n".join([title, *("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)])
