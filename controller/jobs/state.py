"""The Volcano Job state machine as data: which step an action takes in each phase, and the phase it leads to.

Mirrors `pkg/controllers/job/state/*.go` (reference §3.5). A `Step` says what to do with the pods — sync them,
kill the whole Job (keeping pods in `retain` phases), or kill one target (task, pod or partition) — and which
`Rule` then picks the new phase from the fresh pod counts. `next_phase` is that rule; both are pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from lapilli.api import Action, Job, JobPhase

SOFT: Final = frozenset({"Succeeded", "Failed"})
"""`PodRetainPhaseSoft`: finished pods are kept (their logs and exit codes stay readable)."""
NONE: Final = frozenset[str]()
"""`PodRetainPhaseNone`: every pod goes."""

KILL_TARGET_ACTIONS: Final = frozenset({Action.RESTART_TASK, Action.RESTART_POD, Action.RESTART_PARTITION})
ACTIVE: Final = frozenset({JobPhase.PENDING, JobPhase.RUNNING})
FINISHED: Final = frozenset({JobPhase.COMPLETED, JobPhase.TERMINATED, JobPhase.FAILED})
"""Phases the TTL collector deletes from (Aborted is deliberately not among them)."""


class Op(StrEnum):
    SYNC = "sync"
    KILL_JOB = "kill-job"
    KILL_TARGET = "kill-target"


class Rule(StrEnum):
    """How the new phase is chosen once the pods are counted."""

    PENDING = "pending"  # Running once enough pods run or ran
    RUNNING = "running"  # Completed / Failed / back to Pending
    RESTARTING = "restarting"  # Failed past maxRetry, else Pending once enough pods are gone
    SET = "set"  # always `target`
    DRAIN = "drain"  # `target` once nothing is pending, running or terminating
    KEEP = "keep"


@dataclass(frozen=True, slots=True)
class Step:
    op: Op
    rule: Rule
    target: JobPhase | None = None
    retain: frozenset[str] = SOFT
    retry: bool = False  # retryCount++


@dataclass(frozen=True, slots=True)
class Counts:
    """Pod counts of one Job as `syncJob`/`killJob` collect them."""

    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    terminating: int = 0
    unknown: int = 0
    tasks: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # task -> pod phase -> count


_KILLS: Final = {
    Action.RESTART_JOB: Step(Op.KILL_JOB, Rule.SET, JobPhase.RESTARTING, NONE, retry=True),
    Action.ABORT_JOB: Step(Op.KILL_JOB, Rule.SET, JobPhase.ABORTING),
    Action.COMPLETE_JOB: Step(Op.KILL_JOB, Rule.SET, JobPhase.COMPLETING),
    Action.TERMINATE_JOB: Step(Op.KILL_JOB, Rule.SET, JobPhase.TERMINATING),
}
_DRAINS: Final = {
    JobPhase.ABORTING: JobPhase.ABORTED,
    JobPhase.COMPLETING: JobPhase.COMPLETED,
    JobPhase.TERMINATING: JobPhase.TERMINATED,
}
_RESUME: Final = Step(Op.KILL_JOB, Rule.SET, JobPhase.RESTARTING, SOFT, retry=True)


def step_for(phase: JobPhase | None, action: Action) -> Step:
    """What `action` does to a Job in `phase` (an unset phase behaves as Pending)."""
    phase = phase or JobPhase.PENDING
    if phase in ACTIVE:
        if action in _KILLS:
            return _KILLS[action]
        if action in KILL_TARGET_ACTIONS:
            return Step(Op.KILL_TARGET, Rule.SET, JobPhase.RESTARTING, retry=True)
        return Step(Op.SYNC, Rule.PENDING if phase == JobPhase.PENDING else Rule.RUNNING)
    if phase == JobPhase.RESTARTING:
        if action == Action.SYNC_JOB:
            return Step(Op.SYNC, Rule.RESTARTING)
        if action in KILL_TARGET_ACTIONS:
            return Step(Op.KILL_TARGET, Rule.RESTARTING)
        return Step(Op.KILL_JOB, Rule.RESTARTING, retain=NONE)
    if phase in (JobPhase.ABORTING, JobPhase.ABORTED) and action == Action.RESUME_JOB:
        return _RESUME
    if phase in _DRAINS:
        return Step(Op.KILL_JOB, Rule.DRAIN, _DRAINS[phase])
    return Step(Op.KILL_JOB, Rule.KEEP)  # Aborted, Completed, Terminated, Failed


def total_replicas(job: Job) -> int:
    return sum(t.replicas for t in job.spec.tasks)


def total_task_min_available(job: Job) -> int:
    return sum(t.min_available if t.min_available is not None else t.replicas for t in job.spec.tasks)


def next_phase(step: Step, job: Job, counts: Counts, retry_count: int, status_min_available: int) -> JobPhase | None:
    """The phase `step` moves the Job to, given the pods as just counted; None keeps the current phase.

    `retry_count` is the value after this step's increment.
    """
    if step.rule == Rule.SET:
        return step.target
    if step.rule == Rule.DRAIN:
        idle = counts.terminating == counts.pending == counts.running == 0
        return step.target if idle else None
    if step.rule == Rule.PENDING:
        done = counts.running + counts.succeeded + counts.failed
        return JobPhase.RUNNING if job.spec.min_available <= done else None
    if step.rule == Rule.RESTARTING:
        if retry_count >= job.spec.max_retry:
            return JobPhase.FAILED
        return JobPhase.PENDING if total_replicas(job) - counts.terminating >= status_min_available else None
    if step.rule == Rule.RUNNING:
        return _running(job, counts)
    return None


def _running(job: Job, counts: Counts) -> JobPhase | None:
    replicas = total_replicas(job)
    if replicas == 0:
        return None  # scaled down to nothing: keep the phase
    min_success = job.spec.min_success
    if min_success is not None and counts.succeeded >= min_success:
        return JobPhase.COMPLETED
    if counts.succeeded + counts.failed == replicas:
        if job.spec.min_available >= total_task_min_available(job):
            for task in job.spec.tasks:
                phases = counts.tasks.get(task.name)
                succeeded = (phases or {}).get("Succeeded", 0)
                if task.min_available is not None and phases is not None and succeeded < task.min_available:
                    return JobPhase.FAILED
        if min_success is not None and counts.succeeded < min_success:
            return JobPhase.FAILED
        return JobPhase.COMPLETED if counts.succeeded >= job.spec.min_available else JobPhase.FAILED
    if counts.pending > replicas - job.spec.min_available:
        return JobPhase.PENDING
    return None
