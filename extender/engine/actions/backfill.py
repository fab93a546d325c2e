"""backfill: place BestEffort tasks (no requests but `pods`) wherever they fit (Volcano's `actions/backfill`).

A BestEffort task that preempt or reclaim pipelined (it fits without evicting anything, so it "waits" on a node
that already has room) is taken back to Pending and placed here like the others, as Volcano's `UnPipeline` does:
otherwise a BestEffort gang stays pipelined, never binds, and every session pipelines it again.
"""

from __future__ import annotations

from extender.engine.actions.ordering import PriorityQueue, pop_best
from extender.engine.actions.registry import register_action
from extender.engine.model import Job, Queue, Task, TaskStatus
from extender.engine.session import Session
from extender.engine.statement import Statement


class Backfill:
    name = "backfill"

    def execute(self, ssn: Session) -> None:
        for task in self._pending(ssn):
            job = ssn.jobs[task.job]
            feasible, _ = ssn.feasible(task)
            if not feasible.any():
                job.fit_errors[task.uid] = ssn.fit_error(task)
                continue
            stmt = Statement(ssn)
            stmt.allocate(task, ssn.best_node(task, feasible))
            # Volcano's `Session.Allocate`: a job becomes ready → all its Allocated tasks bind; until then the task
            # stays Allocated (neither bound nor undone), as there.
            if ssn.job_ready(job):
                stmt.dispatch(job)

    @staticmethod
    def _pending(ssn: Session) -> list[Task]:
        # The order is fixed before anything is placed, so sort keys can stand in for the comparators.
        job_key, queue_key = ssn.job_key(), ssn.queue_key()
        queues: list[Queue] = []
        jobs: dict[str, PriorityQueue[Job]] = {}
        tasks: dict[str, PriorityQueue[Task]] = {}
        for job in sorted(ssn.jobs.values(), key=lambda j: j.uid):
            if job.is_pending() or job.uid in ssn.parked or ssn.job_valid(job) is not None:
                continue
            unpipeline = Statement(ssn)
            for task in [t for t in job.tasks.values() if t.best_effort and t.status is TaskStatus.PIPELINED]:
                unpipeline.unpipeline(task)
            unpipeline.commit()
            best_effort = [t for t in job.pending_tasks() if t.best_effort]
            if not best_effort:
                continue
            tasks[job.uid] = PriorityQueue(ssn.task_order, best_effort, ssn.task_key(best_effort))
            if job.queue not in jobs:
                jobs[job.queue] = PriorityQueue(ssn.job_order, key=job_key)
                queues.append(ssn.queues[job.queue])
            jobs[job.queue].push(job)
        ordered: list[Task] = []
        while queues:
            queue = pop_best(queues, ssn.queue_order, queue_key)
            while not jobs[queue.name].empty():
                job_tasks = tasks[jobs[queue.name].pop().uid]
                while not job_tasks.empty():
                    ordered.append(job_tasks.pop())
        return ordered


register_action("backfill")(Backfill)
