"""allocate: place whole gangs (Volcano's `actions/allocate/allocate.go`).

Queues take turns by QueueOrder (an overused queue drops out), each turn pops the queue's best job and places its
pending tasks in TaskOrder on the best feasible node — nodes with idle room first, then nodes whose room is still
being released (the task is *pipelined* there). A ready job is committed (its tasks bind); a job that is only
pipelined keeps its places for this session without binding; anything else is discarded, so a gang never binds
in part. A committed job with tasks left goes back into its queue for another turn.

A job with a hard network topology or sub-gang policies is placed by `hyperallocate.HyperAllocator` (each gang
inside one HyperNode); while the HyperNode tree is not ready (a cycle, a HyperNode with two parents) a job with a
network topology waits, as in Volcano. A job's sub-gang nominated by gang eviction goes first to the nodes
nominated for it (`allocate_from_nomination`).
"""

from __future__ import annotations

from extender.engine.actions.hyperallocate import (
    HyperAllocator,
    SubSheet,
    allocate_from_nomination,
    has_topology,
    needs_hypernodes,
)
from extender.engine.actions.ordering import PriorityQueue, best_last, pop_best
from extender.engine.actions.registry import register_action
from extender.engine.model import ALLOCATED_STATUS, Job, Queue, Task, TaskStatus
from extender.engine.session import Session
from extender.engine.statement import Statement


def need_continue(job: Job) -> bool:
    """Volcano's `NeedContinueAllocating`: may allocation go on after a task found no node?"""
    if job.min_member == len(job.tasks):
        return False
    failed_roles = {job.tasks[uid].role for uid in job.fit_errors if uid in job.tasks}
    pending_by_role: dict[str, int] = {}
    for task in job.pending_tasks():
        pending_by_role[task.role] = pending_by_role.get(task.role, 0) + 1
    if job.min_member < job.task_min_sum():
        left = sum(n for role, n in pending_by_role.items() if role not in failed_roles)
        return job.ready_num() + left >= job.min_member
    for role in failed_roles:
        need = job.min_task_member.get(role, 0)
        if need and job.role_count(role, ALLOCATED_STATUS) < need:
            return False
    return True


def candidate_jobs(ssn: Session) -> list[Job]:
    enqueue_configured = "enqueue" in ssn.conf.actions
    jobs = []
    for job in sorted(ssn.jobs.values(), key=lambda j: j.uid):
        if job.uid in ssn.parked:
            continue
        if job.is_pending():
            if enqueue_configured:
                continue
            job.phase = "Inqueue"
        if ssn.job_valid(job) is not None:
            continue
        if not ssn.topology.ready and has_topology(job):
            continue  # HyperNodesReadyToSchedule: the tree has a cycle or a HyperNode with two parents
        jobs.append(job)
    return jobs


class Allocate:
    name = "allocate"

    def execute(self, ssn: Session) -> None:
        # Sort keys stand in for the comparators: a queued job does not change while other jobs are placed.
        job_key, queue_key = ssn.job_key(), ssn.queue_key()
        waiting: dict[str, list[Job]] = {}
        for job in candidate_jobs(ssn):
            waiting.setdefault(job.queue, []).append(job)
        queues: list[Queue] = [ssn.queues[name] for name in waiting]
        # One heapify per queue: keys are unique, so the pops are the same as after pushing one by one.
        jobs = {name: PriorityQueue(ssn.job_order, queued, job_key) for name, queued in waiting.items()}
        pending: dict[str, list[Task]] = {}  # per job: its pending tasks, the next one to place last
        pending_status = TaskStatus.PENDING  # read for every task of every job: a local, not an enum attribute
        hyper = HyperAllocator(ssn)
        while queues:
            queue = pop_best(queues, ssn.queue_order, queue_key)
            if ssn.overused(queue):
                continue
            queue_jobs = jobs[queue.name]
            if queue_jobs.empty():
                continue
            job = queue_jobs.pop()
            ssn.tried.add(job.uid)
            queues.append(queue)
            if needs_hypernodes(job):
                placed = hyper.allocate_job(job)
                if placed is not None and ssn.job_ready(job):  # a pipelined job keeps its places uncommitted
                    placed.commit()
                    if not hyper.sheet(job).empty():
                        queue_jobs.push(job)
                continue
            tasks = pending.get(job.uid)
            if tasks is None:
                todo = [t for t in job.tasks.values() if t.status is pending_status and not t.best_effort]
                tasks = pending[job.uid] = best_last(todo, ssn.task_order, ssn.task_key(todo))
            stmt = self._from_nomination(ssn, job, tasks) or Statement(ssn)
            self._allocate_tasks(ssn, stmt, job, queue, tasks, queue_jobs)
            if ssn.job_ready(job):
                stmt.commit()
                if job.subjobs is not None and job.subjobs[job.uid].nominated_hypernode:
                    ssn.nominate(job, job.uid, "")  # redeemed
            elif not ssn.job_pipelined(job):
                stmt.discard()

    @staticmethod
    def _from_nomination(ssn: Session, job: Job, tasks: list[Task]) -> Statement | None:
        """Volcano's flat path honouring a nomination: every pending task onto its nominated node, else nothing
        (and `tasks` as it was)."""
        sub = job.subjobs.get(job.uid) if job.subjobs is not None else None
        if sub is None or not sub.nominated_hypernode or not tasks:
            return None
        waiting = list(tasks)
        tasks.clear()
        placed = allocate_from_nomination(ssn, job, sub, SubSheet(waiting[::-1]))
        if placed is None:
            tasks.extend(waiting)
        return placed

    @staticmethod
    def _allocate_tasks(
        ssn: Session, stmt: Statement, job: Job, queue: Queue, tasks: list[Task], jobs: PriorityQueue[Job]
    ) -> None:
        failed_roles = {job.tasks[uid].role for uid in job.fit_errors if uid in job.tasks}
        allocatable, choose, job_ready = ssn.allocatable_vote(), ssn.placement.choose, ssn.ready_vote()  # per task
        while tasks:
            task = tasks.pop()
            if not allocatable(queue, task):
                continue
            if task.role and task.role in failed_roles:
                continue  # a sibling of the same role already found no node
            choice = choose(task)
            if choice is None:
                job.fit_errors[task.uid] = ssn.fit_error(task)
                failed_roles.add(task.role)
                if need_continue(job):
                    continue
                break
            node, idle = choice
            if idle:
                stmt.allocate(task, node)
            else:
                stmt.pipeline(task, node)
            if job_ready(job) and tasks:
                jobs.push(job)
                break


register_action("allocate")(Allocate)
