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
        waiting: dict[str, list[Job]] = {}
        for job in sorted(ssn.jobs.values(), key=lambda j: j.uid):
            held = waiting.get(job.queue)
            if held is None:
                held = waiting[job.queue] = []
                queues.append(ssn.queues[job.queue])
            if job.is_pending():
                held.append(job)
        # One heapify per queue: keys are unique, so the pops are the same as after pushing one by one.
        jobs = {name: PriorityQueue(ssn.job_order, queued, job_key) for name, queued in waiting.items()}
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
