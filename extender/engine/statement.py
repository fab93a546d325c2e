"""Statement: the only way session state changes, with an inverse for every step (Volcano's `framework/statement.go`).

`allocate` and `pipeline` put a pending task on a node; `evict` starts releasing a running task. `commit` makes the
steps decisions (allocated tasks become Binding and are reported as binds, evictions are reported); `discard`
undoes them in reverse, which is what makes a gang all-or-nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from extender.engine.model import Node, Task, TaskStatus
from extender.engine.session import Session


@dataclass(slots=True)
class _Step:
    kind: str  # "allocate" | "pipeline" | "evict"
    task: Task
    previous: TaskStatus


class Statement:
    __slots__ = ("_ssn", "_steps")

    def __init__(self, ssn: Session) -> None:
        self._ssn = ssn
        self._steps: list[_Step] = []

    def allocate(self, task: Task, node: Node) -> None:
        self._ssn.place(task, node, TaskStatus.ALLOCATED)
        self._steps.append(_Step("allocate", task, TaskStatus.PENDING))

    def pipeline(self, task: Task, node: Node) -> None:
        self._ssn.place(task, node, TaskStatus.PIPELINED)
        self._steps.append(_Step("pipeline", task, TaskStatus.PENDING))

    def evict(self, task: Task) -> None:
        previous = self._ssn.release(task)
        self._steps.append(_Step("evict", task, previous))

    def merge(self, other: Statement) -> None:
        """Take over `other`'s steps, which then commit or discard with this statement (Volcano's `Merge`):
        preempt and reclaim try each node in a statement of its own and keep only the one that worked."""
        self._steps.extend(other._steps)
        other._steps.clear()

    def empty(self) -> bool:
        return not self._steps

    def discard(self) -> None:
        for step in reversed(self._steps):
            if step.kind == "evict":
                self._ssn.unrelease(step.task, step.previous)
            else:
                self._ssn.unplace(step.task)
        self._steps.clear()

    def commit(self) -> None:
        records = self._ssn.records
        for step in self._steps:
            if step.kind == "allocate":
                self._ssn.set_status(step.task, TaskStatus.BINDING)
                records.binds[step.task.key] = step.task.node or ""
            elif step.kind == "evict":
                records.evictions.append(step.task.key)
        self._steps.clear()
