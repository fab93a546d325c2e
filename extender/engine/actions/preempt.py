"""preempt: starving jobs take room from lower-priority work of their own queue (Volcano's
`actions/preempt/preempt.go`, normal, non-topology-aware preemption).

Preemptors are the valid, non-Pending jobs that are starving. Queues go in QueueOrder. Phase A, between jobs of a
queue: each preemptor job (JobOrder) gets one statement; while it starves, its next pending task (TaskOrder) tries
to preempt running/bound, preemptable tasks of *other* jobs of the same queue. The statement commits if the job is
then pipelined, else it is discarded. Phase B, inside a job: each pending task of a starving job may preempt tasks of
its own job, one statement per task, stopping at the first task that gets nowhere.

For one preemptor, nodes the static predicates accept are tried best score first (ties: lowest name). On each, the
plugins' Preemptable vote picks the victims; a node where evicting every victim would still not make room is
skipped. Victims go in victim order, and before each eviction the preemptor is checked: once the queue may take it
(Allocatable), it fits the node's future idle and the predicates pass, no more victims are evicted and the
preemptor is pipelined there. A node that never gets there has its evictions undone.

Action arguments (`enableTopologyAwarePreemption`, candidate-node limits, predicate error cache) are accepted and
ignored: every candidate node is tried, in order.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from extender.engine.actions.ordering import PriorityQueue, pop_best
from extender.engine.actions.registry import register_action
from extender.engine.model import PREEMPTABLE_STATUS, Job, Node, Queue, Task, TaskStatus
from extender.engine.session import EvictionNote, Session
from extender.engine.statement import Statement
from extender.engine.victims import candidate_nodes, idle_first, validate_victims, victim_order, with_idle
from lapilli.resources.vector import less_equal

Filter = Callable[[Task], bool]


def preemptor_jobs(ssn: Session) -> dict[str, list[Job]]:
    """Starving, valid, admitted jobs by queue name (Volcano's preemptorsMap / underRequest)."""
    by_queue: dict[str, list[Job]] = {}
    for job in sorted(ssn.jobs.values(), key=lambda j: j.uid):
        if job.is_pending() or job.uid in ssn.parked or ssn.job_valid(job) is not None or job.queue not in ssn.queues:
            continue
        if ssn.job_starving(job):
            by_queue.setdefault(job.queue, []).append(job)
    return by_queue


def _candidate_filter(ssn: Session, preemptor: Task, same_job: bool) -> Filter:
    preemptor_queue = ssn.jobs[preemptor.job].queue

    def allowed(task: Task) -> bool:
        if task.status not in PREEMPTABLE_STATUS or not task.preemptable or not task.job:
            return False
        # A BestEffort pod may only push out other BestEffort pods.
        if preemptor.best_effort and not task.best_effort:
            return False
        if same_job:
            return task.job == preemptor.job
        return task.job != preemptor.job and ssn.jobs[task.job].queue == preemptor_queue

    return allowed


def _fits(ssn: Session, queue: Queue, preemptor: Task, node: Node) -> bool:
    """Volcano's `preemptorFitsOnNode`: the queue may take it, it fits future idle, and the predicates pass."""
    return (
        ssn.allocatable(queue, preemptor)
        and less_equal(preemptor.resreq, ssn.arrays.future_idle_row(node.idx))
        and ssn.predicate_node(preemptor, node)
    )


def _eligible(ssn: Session, preemptor: Task) -> bool:
    """Volcano's `taskEligibleToPreempt`: not `preemptionPolicy: Never`; a pod nominated to a node that still
    passes its predicates, or where a lower-priority pod is already going away, waits instead of preempting."""
    if preemptor.preemption_never:
        return False
    if not preemptor.nominated_node:
        return True
    node = ssn.node_by_name.get(preemptor.nominated_node)
    if node is None:
        return False
    if ssn.predicate_node(preemptor, node):
        return False
    if not ssn.preempt_mask(preemptor)[node.idx]:
        return True  # unresolvable there: look elsewhere
    return not any(t.status is TaskStatus.RELEASING and t.priority < preemptor.priority for t in node.tasks.values())


def _ordered_nodes(ssn: Session, preemptor: Task) -> list[Node]:
    nodes = candidate_nodes(ssn, preemptor)
    if len(nodes) < 2:
        return nodes
    scores = ssn.scores(preemptor, np.array([n.idx for n in nodes]))
    # Best score first; nodes arrive in name order and the sort is stable, so ties go to the lowest name.
    order = sorted(range(len(nodes)), key=lambda i: -scores[i])
    return [nodes[i] for i in order]


def _note(ssn: Session, victim: Task, preemptor: Task) -> EvictionNote:
    job = ssn.jobs[preemptor.job]
    return EvictionNote("preempt", job.uid, f"preempt: pod {victim.key} of {victim.job} (priority {victim.priority}) "
                        f"evicted on {victim.node} for pod {preemptor.key} of gang {job.uid} (priority "
                        f"{preemptor.priority})")


def _try_node(ssn: Session, stmt: Statement, preemptor: Task, queue: Queue, node: Node, allowed: Filter) -> bool:
    # Plugins that ration victims (gang's minMember, drf's share) keep the first ones they see: offer the least
    # important first, so what they spare is what matters most (upstream's map order leaves it to chance).
    # Idle-reclaimable tasks of other jobs go first and are victims whatever the votes (`victims.with_idle`).
    candidates = idle_first(victim_order(ssn, (t for t in node.tasks.values() if allowed(t)), preemptor))
    victims = ssn.preemptable(preemptor, candidates)
    if all(t.job != preemptor.job for t in candidates):  # a job never takes its own idle pods' room
        victims = with_idle(victims, candidates)
    if not validate_victims(ssn, preemptor, node, victims):
        return False
    node_stmt = Statement(ssn)
    fits = _fits(ssn, queue, preemptor, node)
    for victim in idle_first(victim_order(ssn, victims or [], preemptor)):
        if fits:
            break
        node_stmt.evict(victim, _note(ssn, victim, preemptor))
        fits = _fits(ssn, queue, preemptor, node)
    if not fits:
        node_stmt.discard()
        return False
    node_stmt.pipeline(preemptor, node)
    stmt.merge(node_stmt)
    return True


def preempt(ssn: Session, stmt: Statement, preemptor: Task, allowed: Filter) -> bool:
    """Make room for `preemptor` on one node by evicting allowed victims; True once it is pipelined there."""
    if not _eligible(ssn, preemptor):
        return False
    queue = ssn.queues[ssn.jobs[preemptor.job].queue]
    return any(_try_node(ssn, stmt, preemptor, queue, node, allowed) for node in _ordered_nodes(ssn, preemptor))


class Preempt:
    name = "preempt"

    def execute(self, ssn: Session) -> None:
        by_queue = preemptor_jobs(ssn)
        pending = {
            job.uid: PriorityQueue(ssn.task_order, job.pending_tasks()) for jobs in by_queue.values() for job in jobs
        }
        queues = [ssn.queues[name] for name in sorted(by_queue)]
        while queues:
            queue = pop_best(queues, ssn.queue_order)
            self._between_jobs(ssn, by_queue[queue.name], pending)
            for job in by_queue[queue.name]:
                self._within_job(ssn, job)

    @staticmethod
    def _between_jobs(ssn: Session, jobs: list[Job], pending: dict[str, PriorityQueue[Task]]) -> None:
        preemptors = PriorityQueue(ssn.job_order, jobs)
        while not preemptors.empty():
            job = preemptors.pop()
            tasks = pending[job.uid]
            stmt = Statement(ssn)
            while ssn.job_starving(job) and not tasks.empty():
                preemptor = tasks.pop()
                preempt(ssn, stmt, preemptor, _candidate_filter(ssn, preemptor, same_job=False))
            if ssn.job_pipelined(job):
                stmt.commit()
            else:
                stmt.discard()

    @staticmethod
    def _within_job(ssn: Session, job: Job) -> None:
        tasks = PriorityQueue(ssn.task_order, job.pending_tasks())
        while not tasks.empty():
            preemptor = tasks.pop()
            stmt = Statement(ssn)
            if not preempt(ssn, stmt, preemptor, _candidate_filter(ssn, preemptor, same_job=True)):
                stmt.discard()
                return
            stmt.commit()


register_action("preempt")(Preempt)
