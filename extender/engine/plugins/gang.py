"""gang: all-or-nothing by PodGroup `minMember` / `minTaskMember` (Volcano's `plugins/gang/gang.go`).

JobValid needs enough valid tasks (overall and per role) and enough sub-gangs of each subGroupPolicy;
JobReady/JobPipelined/JobStarving follow the job's counters (and each policy's `minSubGroups` ready or pipelined
sub-gangs); a sub-gang is ready or pipelined at its own size, and not-ready sub-gangs go first, as not-ready jobs
do, a gang regaining lost members first of all (Lapilli); a victim may be taken from a job only while it stays
above `minMember` (gangpreempt/gangreclaim: any, they keep minMember by bundles). At session close every job gets
an `Unschedulable` or `Scheduled` condition.
"""

from __future__ import annotations

from collections.abc import Callable

from extender.engine.interface import PERMIT, REJECT, KeyedOrder, SessionView, ValidateResult, VictimsFn
from extender.engine.model import READY_STATUS, SCHEDULED_STATUS, VALID_STATUS, Job, SubJob, Task, TaskStatus
from extender.engine.registry import register_plain_plugin

NOT_ENOUGH_TASKS = "NotEnoughTasks"
NOT_ENOUGH_PODS_OF_TASK = "NotEnoughPodsOfTask"
NOT_ENOUGH_RESOURCES = "NotEnoughResources"
PIPELINED_STATUS = frozenset({TaskStatus.PIPELINED})


def _per_role_ok(job: Job, statuses: frozenset[TaskStatus], best_effort_pending: bool = False) -> bool:
    if not job.min_task_member:
        return True  # no role has a minimum (most PodGroups): the check below is `all` of nothing
    # Volcano skips the per-role check when minMember is below the sum of role minima.
    if job.min_member < job.task_min_sum():
        return True
    extra: dict[str, int] = {}
    if best_effort_pending and job.pending_best_effort_count:
        for task in job.pending_tasks():
            if task.best_effort:
                extra[task.role] = extra.get(task.role, 0) + 1
    return all(
        job.role_count(role, statuses) + extra.get(role, 0) >= need for role, need in job.min_task_member.items()
    )


def task_ready(job: Job) -> bool:
    # Volcano's CheckTaskReady (getJobAllocatedRoles) counts a role's pending BestEffort tasks as occupied, as
    # IsReady does for the whole job: backfill places them, so a role of BestEffort pods (an MPI master that
    # requests nothing) does not hold back a gang whose other roles request resources.
    return _per_role_ok(job, READY_STATUS, best_effort_pending=True)


def job_ready(job: Job) -> bool:
    """JobReady: the gang, each role's minimum and each sub-gang policy's minimum. Allocate asks after every
    placement, so a job without role minima or sub-gang policies (most) skips their calls here."""
    return job.is_ready() and (not job.min_task_member or task_ready(job)) and (
        not job.min_subjobs or _subjobs_meet(job, SubJob.is_ready))


def task_pipelined(job: Job) -> bool:
    return _per_role_ok(job, READY_STATUS | PIPELINED_STATUS, best_effort_pending=True)


def _subjobs_meet(job: Job, condition: Callable[[SubJob], bool]) -> bool:
    """`checkSubJobCondition`: every policy with a `minSubGroups` has that many sub-gangs meeting `condition`."""
    if not job.min_subjobs or job.subjobs is None:
        return True
    met: dict[str, int] = {}
    for sub in job.subjobs.values():
        if condition(sub):
            met[sub.gid] = met.get(sub.gid, 0) + 1
    return all(met.get(gid, 0) >= need for gid, need in job.min_subjobs.items() if need)


def subjobs_valid(job: Job) -> bool:
    """`CheckSubJobValid`: each policy has at least `minSubGroups` sub-gangs at all."""
    return _subjobs_meet(job, lambda _sub: True)


def releasing_only(job: Job) -> bool:
    """Volcano's `shouldSkipUnschedulableForReleasing`: the gang is short only because placed members are being
    deleted (counting them it has its minimum) and no member waits to be placed."""
    releasing = sum(1 for t in job.tasks.values() if t.status is TaskStatus.RELEASING and t.node)
    if not releasing or job.counts[TaskStatus.PENDING] or job.counts[TaskStatus.PIPELINED]:
        return False
    return job.count(SCHEDULED_STATUS) + releasing >= job.min_member


class GangPlugin:
    name = "gang"

    def on_session_open(self, ssn: SessionView) -> None:
        ssn.add_job_valid(self._valid)
        ssn.add_job_ready(job_ready)
        ssn.add_job_pipelined(lambda job: PERMIT if task_pipelined(job) and _subjobs_meet(job, SubJob.is_pipelined)
                              and job.is_pipelined() else REJECT)
        ssn.add_subjob_ready(SubJob.is_ready)
        ssn.add_subjob_pipelined(lambda sub: PERMIT if sub.is_pipelined() else REJECT)
        ssn.add_subjob_order(KeyedOrder(lambda sub: sub.is_ready()))
        ssn.add_job_starving(lambda job: job.is_starving())
        # Jobs not ready yet go first; among them a gang regaining lost members (model.Job.degraded) before new
        # work, so the room its member held goes back to it (Volcano #5805).
        ssn.add_job_order(KeyedOrder(lambda job: (job.is_ready(), not job.degraded())))
        victims = self._victims_fn(ssn)
        ssn.add_preemptable(victims)
        ssn.add_reclaimable(victims)
        # Gang-aware eviction keeps minMember itself (surplus members or whole gangs), so gang permits them all.
        ssn.add_evictable(lambda _ctx, candidates: candidates)

    @staticmethod
    def _valid(job: Job) -> ValidateResult | None:
        if not _per_role_ok(job, VALID_STATUS):
            message = "Not enough valid pods of each task for gang-scheduling"
            return ValidateResult(False, NOT_ENOUGH_PODS_OF_TASK, message)
        if not subjobs_valid(job):
            message = "Not enough valid subGroups of each task for gang-scheduling"
            return ValidateResult(False, NOT_ENOUGH_PODS_OF_TASK, message)
        valid = job.count(VALID_STATUS)
        if valid < job.min_member:
            return ValidateResult(
                False,
                NOT_ENOUGH_TASKS,
                f"Not enough valid tasks for gang-scheduling, valid: {valid}, min: {job.min_member}",
            )
        return None

    @staticmethod
    def _victims_fn(ssn: SessionView) -> VictimsFn:
        def victims(_actor: Task, candidates: list[Task]) -> list[Task]:
            occupied: dict[str, int] = {}
            chosen: list[Task] = []
            for task in candidates:
                job = ssn.jobs[task.job]
                left = occupied.get(job.uid, job.ready_num())
                # A job can lose a task only while it keeps at least its gang minimum afterwards.
                if left > job.min_member:
                    occupied[job.uid] = left - 1
                    chosen.append(task)
            return chosen

        return victims

    def on_session_close(self, ssn: SessionView) -> None:
        for job in ssn.jobs.values():
            if not job.tasks or job.uid in ssn.parked:
                continue
            if job.is_ready():
                ssn.set_condition(job, "Scheduled", "tasks in gang are ready to be scheduled", "")
                continue
            if releasing_only(job):
                continue  # members on their way out, none waiting: no Unschedulable condition (Volcano)
            unready = job.min_member - job.ready_num()
            message = f"{unready}/{len(job.tasks)} tasks in gang unschedulable: {ssn.job_fit_error(job)}"
            ssn.set_condition(job, "Unschedulable", NOT_ENOUGH_RESOURCES, message)


register_plain_plugin("gang", GangPlugin)
