"""priority: PriorityClass order for jobs and tasks, and priority-based victims (Volcano's `plugins/priority`)."""

from __future__ import annotations

from extender.engine.framework import Fn, KeyedOrder, register_plain_plugin
from extender.engine.model import Job, Task
from extender.engine.session import Session


class PriorityPlugin:
    name = "priority"

    def on_session_open(self, ssn: Session) -> None:
        # Higher priority first.
        ssn.add_fn(Fn.TASK_ORDER, KeyedOrder(lambda task: -task.priority))
        ssn.add_fn(Fn.JOB_ORDER, KeyedOrder(lambda job: -job.priority))

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

        ssn.add_fn(Fn.PREEMPTABLE, victims)

        def starving(job: Job) -> bool:
            return job.ready_num() + job.waiting_num() < len(job.tasks)

        ssn.add_fn(Fn.JOB_STARVING, starving)

    def on_session_close(self, ssn: Session) -> None:
        return None


register_plain_plugin("priority", PriorityPlugin)
