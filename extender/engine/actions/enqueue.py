"""enqueue: admit Pending PodGroups to Inqueue when their queue and the cluster can hold `minResources`
(Volcano's `actions/enqueue/enqueue.go`). Queues take turns by QueueOrder; within a queue jobs go by JobOrder."""

from __future__ import annotations

from extender.engine.actions.ordering import PriorityQueue, pop_best
from extender.engine.actions.registry import register_action
from extender.engine.model import Job, Queue
from extender.engine.session import Session


class Enqueue:
    name = "enqueue"

    def execute(self, ssn: Session) -> None:
        # Admitting a job changes no job's order, so sort keys can stand in for the comparators.
        job_key, queue_key = ssn.job_key(), ssn.queue_key()
        queues: list[Queue] = []
        jobs: dict[str, PriorityQueue[Job]] = {}
        for job in sorted(ssn.jobs.values(), key=lambda j: j.uid):
            queue = ssn.queues[job.queue]
            if queue.name not in jobs:
                jobs[queue.name] = PriorityQueue(ssn.job_order, key=job_key)
                queues.append(queue)
            if job.is_pending():
                jobs[queue.name].push(job)
        while queues:
            queue = pop_best(queues, ssn.queue_order, queue_key)
            pending = jobs[queue.name]
            if pending.empty():
                continue
            job = pending.pop()
            if job.min_resources is None or ssn.job_enqueueable(job):
                ssn.job_enqueued(job)
                job.phase = "Inqueue"
            queues.append(queue)


register_action("enqueue")(Enqueue)
