"""priority: PriorityClass order for jobs and tasks, and priority-based victims (Volcano's `plugins/priority`)."""

from __future__ import annotations

from extender.engine.interface import EvictionContext, EvictionKind, KeyedOrder, SessionView
from extender.engine.model import Job, Task
from extender.engine.registry import register_plain_plugin


class PriorityPlugin:
    name = "priority"

    def on_session_open(self, ssn: SessionView) -> None:
        # Higher priority first.
        ssn.add_task_order(KeyedOrder(lambda task: -task.priority))
        ssn.add_job_order(KeyedOrder(lambda job: -job.priority))

        def victims(preemptor: Task, candidates: list[Task]) -> list[Task]:
            preemptor_job = ssn.jobs[preemptor.job]
            chosen = []
            for task in candidates:
                if task.job != preemptor.job:
                    if ssn.jobs[task.job].priority < preemptor_job.priority:
                        chosen.append(task)
                elif task.priority < preemptor.priority:
                    chosen.append(task)
            return chosen

        ssn.add_preemptable(victims)

        def evictable(ctx: EvictionContext, candidates: list[Task]) -> list[Task]:
            # Reclaim is about queues' shares: priority lets it take any gang, as it has no Reclaimable vote.
            if ctx.kind is EvictionKind.GANG_RECLAIM:
                return candidates
            return [t for t in candidates if ssn.jobs[t.job].priority < ctx.job.priority]

        ssn.add_evictable(evictable)

        def starving(job: Job) -> bool:
            return job.ready_num() + job.waiting_num() < len(job.tasks)

        ssn.add_job_starving(starving)

    def on_session_close(self, ssn: SessionView) -> None:
        return None


register_plain_plugin("priority", PriorityPlugin)
