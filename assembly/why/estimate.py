"""When will a waiting job start? The scheduler's own engine replayed forward from the cluster as it is
(`assembly.sim.forward`), with each job's end estimated from what the cluster says about it — never a made-up number.

A job's run time, first that applies:
1. its annotation `volcano.sh/expected-duration` (seconds or a Go duration: `5400`, `1h30m`), as its submitter wrote;
2. `activeDeadlineSeconds` of its pod templates (the longest): the kubelet ends its pods by then, an upper bound;
3. the median run time of at least three finished Jobs of the same queue (of the same namespace — the same user on a
   lab platform — when it has three, else of the whole queue), read from the finished Volcano Jobs still in the
   cluster: a Job's status conditions keep when it became Running and when it became Completed.
Nothing else: a job none of these covers has an unknown end, and a job that waits for its room is "unknown" too. A
running job's end is its start (its Running condition, else its pods' start) plus that run time; one that has run
longer than its expected duration has an unknown end unless its deadline still lies ahead.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from assembly.sim.forward import LiveJob, forward
from extender.engine.conf import SchedulerConf
from lapilli.meta import JSON, Obj, key_of, namespace_of, owner_references, uid_of
from lapilli.times import parse_rfc3339, parse_seconds

EXPECTED_DURATION: Final = "volcano.sh/expected-duration"
MIN_HISTORY: Final = 3
ACTIVE_PHASES: Final = frozenset({"", "Pending", "Running", "Restarting"})


@dataclass(frozen=True, slots=True)
class RunTime:
    seconds: float | None
    basis: str  # how it was estimated ("" when unknown)


@dataclass(slots=True)
class Estimate:
    """A waiting job's expected start, in seconds from now, with the job whose end makes its room."""

    seconds: float | None
    after: str = ""  # ns/name of the job whose end lets it start
    basis: str = ""  # how that job's end was estimated
    unknown: list[str] = field(default_factory=list)  # jobs whose end is unknown (when seconds is None)
    unreadable: str = ""  # why the replay could not take the job itself (when seconds is None)

    def text(self) -> str:
        if self.unreadable:
            return f"expected start: unknown (the scheduler's replay cannot read this Job: {self.unreadable})"
        if self.seconds is None and self.unknown:
            more = f" and {len(self.unknown) - 3} more" if len(self.unknown) > 3 else ""
            return (f"expected start: unknown (when {', '.join(self.unknown[:3])}{more} will end is not known: no "
                    f"{EXPECTED_DURATION}, activeDeadlineSeconds or {MIN_HISTORY} finished jobs of its queue)")
        if self.seconds is None:
            return "expected start: unknown (it does not start within 30 days in the scheduler's replay)"
        if self.seconds <= 0:
            return "expected to start now"
        after = f" (when {self.after} ends, {self.basis})" if self.after else ""
        return f"expected to start in {about(self.seconds)}{after}"

    def to_json(self) -> dict[str, JSON]:
        return {"seconds": None if self.seconds is None else round(self.seconds), "after": self.after or None,
                "basis": self.basis or None, "unknownEnds": list(self.unknown), "unreadable": self.unreadable or None,
                "text": self.text()}


def about(seconds: float) -> str:
    """`about 40 min`, `about 2.5 h`, `about 3 days`."""
    minutes = seconds / 60
    if minutes < 1.5:
        return "about a minute"
    if minutes < 90:
        return f"about {round(minutes / 5) * 5 if minutes >= 10 else round(minutes)} min"
    hours = minutes / 60
    if hours < 36:
        return f"about {hours:.1f} h" if hours < 10 else f"about {round(hours)} h"
    return f"about {hours / 24:.1f} days"


def _condition_time(job: Obj, phase: str) -> float | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("status") == phase and cond.get("lastTransitionTime"):
            try:
                return parse_rfc3339(str(cond["lastTransitionTime"]))
            except ValueError:
                return None
    return None


def _phase(job: Obj) -> str:
    return str(((job.get("status") or {}).get("state") or {}).get("phase") or "")


def _queue(job: Obj) -> str:
    return str((job.get("spec") or {}).get("queue") or "default")


def finished_run_time(job: Obj) -> float | None:
    """How long a Completed Job ran: from its Running condition to its Completed one."""
    if _phase(job) != "Completed":
        return None
    start, end = _condition_time(job, "Running"), _condition_time(job, "Completed")
    return end - start if start is not None and end is not None and end >= start else None


def history(jobs: Sequence[Obj]) -> dict[tuple[str, str], list[float]]:
    """Finished run times by (queue, namespace) and by (queue, "")."""
    out: dict[tuple[str, str], list[float]] = {}
    for job in jobs:
        seconds = finished_run_time(job)
        if seconds is not None:
            out.setdefault((_queue(job), namespace_of(job)), []).append(seconds)
            out.setdefault((_queue(job), ""), []).append(seconds)
    return out


def run_time(job: Obj, past: Mapping[tuple[str, str], list[float]]) -> RunTime:
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    if EXPECTED_DURATION in annotations:
        try:
            return RunTime(parse_seconds(annotations[EXPECTED_DURATION]), f"by its {EXPECTED_DURATION}")
        except ValueError:
            pass  # a malformed annotation counts as none
    deadlines = [((t.get("template") or {}).get("spec") or {}).get("activeDeadlineSeconds")
                 for t in (job.get("spec") or {}).get("tasks") or []]
    limits = [float(d) for d in deadlines if isinstance(d, int | float) and not isinstance(d, bool) and d > 0]
    if limits:
        return RunTime(max(limits), "by its activeDeadlineSeconds")
    for scope in ((_queue(job), namespace_of(job)), (_queue(job), "")):
        done = past.get(scope, [])
        if len(done) >= MIN_HISTORY:
            where = f"namespace {scope[1]} in queue {scope[0]}" if scope[1] else f"queue {scope[0]}"
            return RunTime(statistics.median(done), f"the median of {len(done)} finished jobs of {where}")
    return RunTime(None, "")


def _started(job: Obj, pods: Sequence[Obj]) -> float | None:
    """When a running job started: its Running condition, else its running pods' latest start."""
    when = _condition_time(job, "Running")
    if when is not None:
        return when
    starts = []
    for pod in pods:
        text = (pod.get("status") or {}).get("startTime")
        if text:
            try:
                starts.append(parse_rfc3339(str(text)))
            except ValueError:
                continue
    return max(starts) if starts else None


def _pods_of(pods: Sequence[Obj]) -> dict[str, list[Obj]]:
    by_job: dict[str, list[Obj]] = {}
    for pod in pods:
        for ref in owner_references(pod):
            if ref.get("kind") == "Job" and ref.get("uid"):
                by_job.setdefault(str(ref["uid"]), []).append(pod)
    return by_job


def live_jobs(jobs: Sequence[Obj], pods: Sequence[Obj], now: float) -> tuple[list[LiveJob], dict[str, RunTime]]:
    """The unfinished Volcano Jobs as the replay takes them, and each one's run-time estimate."""
    past = history(jobs)
    by_job = _pods_of(pods)
    live, times = [], {}
    for job in jobs:
        if _phase(job) not in ACTIVE_PHASES:
            continue
        estimate = times[key_of(job)] = run_time(job, past)
        created = parse_rfc3339(str((job.get("metadata") or {}).get("creationTimestamp") or "")) if (
            job.get("metadata") or {}).get("creationTimestamp") else now
        run_s = estimate.seconds
        if _phase(job) == "Running" and run_s is not None:
            started = _started(job, by_job.get(uid_of(job), []))
            run_s = None if started is None else run_s - (now - started)
            if run_s is not None and run_s < 0:
                run_s = None  # it has run longer than expected: when it ends is not known
        live.append(LiveJob(job, run_s, created))
    return live, times


def estimates(objects: Mapping[str, Mapping[str, Obj]], jobs: Sequence[Obj], conf: SchedulerConf, now: float,
              ) -> dict[str, Estimate]:
    """Every unfinished Volcano Job's expected start (`ns/name`), from one replay over the why view's `objects`
    (kind -> key -> object) and the cluster's Volcano `jobs` (finished ones included: they are the history)."""
    pods = list(objects.get("Pod", {}).values())
    live, times = live_jobs(jobs, pods, now)
    forecast = forward(list(objects.get("Node", {}).values()), list(objects.get("Queue", {}).values()),
                       list(objects.get("PriorityClass", {}).values()), live, pods, conf, now)
    # What holds room for good in the replay: jobs that start (or run now) and whose end is not known.
    unknown_ends = sorted(key_of(j.doc) for j in live if j.run_s is None and forecast.started.get(key_of(j.doc))
                          is not None)
    out: dict[str, Estimate] = {}
    for job in live:
        key = key_of(job.doc)
        start = forecast.started.get(key)
        if key in forecast.skipped:
            out[key] = Estimate(None, unreadable=forecast.skipped[key])
            continue
        if start is None:
            out[key] = Estimate(None, unknown=[k for k in unknown_ends if k != key])
            continue
        ended = [(end, k) for k, end in forecast.finished.items() if end is not None and end <= start and k != key]
        after = max(ended)[1] if ended and start > 0 else ""
        out[key] = Estimate(start, after, times[after].basis if after in times else "")
    return out


def jobs_by_podgroup(jobs: Sequence[Obj], podgroups: Mapping[str, Obj]) -> dict[str, str]:
    """PodGroup `ns/name` -> the Volcano Job `ns/name` that owns it."""
    by_uid = {uid_of(j): key_of(j) for j in jobs if uid_of(j)}
    out = {}
    for key, pg in podgroups.items():
        for ref in owner_references(pg):
            owner = by_uid.get(str(ref.get("uid") or ""))
            if ref.get("kind") == "Job" and owner:
                out[key] = owner
    return out
