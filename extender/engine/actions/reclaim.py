"""reclaim: a queue below its share takes room back from other queues (Volcano's `actions/reclaim/reclaim.go`).

Queues holding at least one valid, admitted job go in QueueOrder; an overused queue is skipped. Each starving job
of the queue (JobOrder) gets one statement; while it starves, its next pending task (TaskOrder) — unless it has
`preemptionPolicy: Never` or its queue may not reclaim for it (Preemptive) — looks at the nodes the static
predicates accept, in name order. On a node the reclaimees are Running, preemptable tasks of *other*, reclaimable
queues; the plugins' Reclaimable vote picks victims; a node where evicting them all would still not make room is
skipped. Victims are evicted in victim order only while the task does not yet fit what the node will have free, and
the task is pipelined on the first node where it fits; a node that never gets there has its evictions undone. After
the job: commit if it is pipelined, else discard.
"""

from __future__ import annotations

from extender.engine.actions.ordering import PriorityQueue, each_starving
from extender.engine.actions.registry import register_action
from extender.engine.model import Job, Node, Queue, Task, TaskStatus
from extender.engine.session import EvictionNote, Session
from extender.engine.statement import Statement
from extender.engine.victims import candidate_nodes, idle_first, validate_victims, victim_order, with_idle
from lapilli.resources.vector import less_equal


def _reclaimees(ssn: Session, node: Node, job: Job) -> list[Task]:
    out = []
    for task in node.tasks.values():
        if task.status is not TaskStatus.RUNNING or not task.preemptable or task.job not in ssn.jobs:
            continue
        queue = ssn.jobs[task.job].queue
        # An idle-reclaimable task's queue gave its room up by its idle-GPU policy, reclaimable or not.
        if queue != job.queue and (ssn.queues[queue].reclaimable or task.idle):
            out.append(task)
    return out


def _try_node(ssn: Session, stmt: Statement, task: Task, job: Job, node: Node) -> bool:
    reclaimees = _reclaimees(ssn, node, job)
    if not reclaimees:
        return False
    # Offered least important first (idle ones before all), so plugins that ration victims (gang's minMember,
    # proportion's share) spare the most important.
    offered = idle_first(victim_order(ssn, reclaimees, task))
    victims = with_idle(ssn.reclaimable(task, offered), offered)
    if not validate_victims(ssn, task, node, victims):
        return False
    node_stmt = Statement(ssn)
    available = ssn.arrays.future_idle_row(node.idx)
    for victim in idle_first(victim_order(ssn, victims or [], task)):
        # Evict only while the task still does not fit: no victim beyond what is needed.
        if less_equal(task.resreq, available):
            break
        node_stmt.evict(victim, EvictionNote(
            "reclaim", job.uid, f"reclaim: pod {victim.key} of queue {ssn.jobs[victim.job].queue} evicted on "
            f"{victim.node} for pod {task.key} of gang {job.uid} of queue {job.queue}"))
        available = available + victim.resreq
    if not less_equal(task.resreq, available):
        node_stmt.discard()
        return False
    node_stmt.pipeline(task, node)
    stmt.merge(node_stmt)
    return True


def reclaim_for_task(ssn: Session, stmt: Statement, task: Task, job: Job) -> bool:
    """Pipeline `task` on the first node (name order) where evicting other queues' victims makes room."""
    return any(_try_node(ssn, stmt, task, job, node) for node in candidate_nodes(ssn, task))


class Reclaim:
    name = "reclaim"

    def execute(self, ssn: Session) -> None:
        for queue, job in each_starving(ssn, skip_overused=True):
            self._reclaim_for_job(ssn, queue, job)

    @staticmethod
    def _reclaim_for_job(ssn: Session, queue: Queue, job: Job) -> None:
        # A job's pending tasks change only through its own statement: taking them now is taking them at the start.
        tasks = PriorityQueue(ssn.task_order, job.pending_tasks())
        stmt = Statement(ssn)
        while ssn.job_starving(job) and not tasks.empty():
            task = tasks.pop()
            if task.preemption_never or not ssn.preemptive(queue, task):
                continue
            reclaim_for_task(ssn, stmt, task, job)
        if ssn.job_pipelined(job):
            stmt.commit()
        else:
            stmt.discard()


register_action("reclaim")(Reclaim)
