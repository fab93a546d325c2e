"""Statement: the only way session state changes, with an inverse for every step (Volcano's `framework/statement.go`).

`allocate` and `pipeline` put a pending task on a node; `evict` starts releasing a running task; `unpipeline` takes a
pipelined task back to pending. `commit` makes the steps decisions (allocated tasks become Binding and are reported
as binds, evictions are reported); `discard` undoes them in reverse, which is what makes a gang all-or-nothing.
`dispatch` is Volcano's `Session.Allocate` tail for backfill: once a job is ready, every Allocated task of it binds.
The session's own moves (`Session._place`, `_unplace`, `_release`, `_unrelease`, `_set_status`) are for this
module only. Explain's trial placements (`Session.trial`) are a Statement seen as `interface.Trial`: allocate and
pipeline, then always discarded.
"""

from __future__ import annotations

from enum import Enum

from extender.engine.model import Job, Node, Task, TaskStatus
from extender.engine.session import EvictionNote, Session


class StepKind(Enum):
    ALLOCATE = "allocate"
    PIPELINE = "pipeline"
    EVICT = "evict"
    UNPIPELINE = "unpipeline"


# (kind, task, previous status, node, note): `node` is where an unpipelined task was, to put it back on discard;
# `note` why an evicted task goes (its Event and its PodGroup's condition). A plain tuple: one is made per placement,
# and a tuple costs a fifth of a dataclass instance to build.
_Step = tuple[StepKind, Task, TaskStatus, Node | None, EvictionNote | None]


class Statement:
    __slots__ = ("_ssn", "_steps")

    def __init__(self, ssn: Session) -> None:
        self._ssn = ssn
        self._steps: list[_Step] = []

    def allocate(self, task: Task, node: Node) -> None:
        self._ssn._place(task, node, TaskStatus.ALLOCATED)
        self._steps.append((StepKind.ALLOCATE, task, TaskStatus.PENDING, None, None))

    def pipeline(self, task: Task, node: Node) -> None:
        self._ssn._place(task, node, TaskStatus.PIPELINED)
        self._steps.append((StepKind.PIPELINE, task, TaskStatus.PENDING, None, None))

    def unpipeline(self, task: Task) -> None:
        """A pipelined task back to Pending (Volcano's `UnPipeline`)."""
        node = self._ssn.node_by_name[task.node or ""]
        self._ssn._unplace(task)
        self._steps.append((StepKind.UNPIPELINE, task, TaskStatus.PIPELINED, node, None))

    def evict(self, task: Task, note: EvictionNote | None = None) -> None:
        previous = self._ssn._release(task)
        self._steps.append((StepKind.EVICT, task, previous, None, note))

    def merge(self, other: Statement) -> None:
        """Take over `other`'s steps, which then commit or discard with this statement (Volcano's `Merge`):
        preempt and reclaim try each node in a statement of its own and keep only the one that worked."""
        self._steps.extend(other._steps)
        other._steps.clear()

    def empty(self) -> bool:
        return not self._steps

    def placements(self) -> list[tuple[Task, Node, bool]]:
        """(task, node, allocated rather than pipelined) of the steps that placed a pending task, in order: what
        `replay` repeats after the statement was discarded (Volcano's `SaveOperations` / `RecoverOperations`)."""
        out = []
        for kind, task, _, _, _ in self._steps:
            if kind in (StepKind.ALLOCATE, StepKind.PIPELINE):
                node = self._ssn.node_by_name[task.node or ""]
                out.append((task, node, kind is StepKind.ALLOCATE))
        return out

    def replay(self, placements: list[tuple[Task, Node, bool]]) -> None:
        for task, node, allocated in placements:
            if allocated:
                self.allocate(task, node)
            else:
                self.pipeline(task, node)

    def discard(self) -> None:
        for kind, task, previous, node, _ in reversed(self._steps):
            if kind is StepKind.EVICT:
                self._ssn._unrelease(task, previous)
            elif kind is StepKind.UNPIPELINE:
                assert node is not None
                self._ssn._place(task, node, TaskStatus.PIPELINED)
            else:
                self._ssn._unplace(task)
        self._steps.clear()

    def commit(self) -> None:
        records = self._ssn.records
        binds = records.binds
        placed: dict[str, list[Task]] = {}  # by job: each job's tasks bind together (`Job.bind_all`)
        for kind, task, _, _, note in self._steps:
            if kind is StepKind.ALLOCATE:
                binds[task.key] = task.node or ""
                tasks = placed.get(task.job)
                if tasks is None:
                    tasks = placed[task.job] = []
                tasks.append(task)
            elif kind is StepKind.EVICT:
                records.evictions.append(task.key)
                if note is not None:
                    records.eviction_notes[task.key] = note
        jobs = self._ssn.jobs
        for job, tasks in placed.items():
            jobs[job].bind_all(tasks)
        self._steps.clear()

    def dispatch(self, job: Job) -> None:
        """Commit, binding every Allocated task of the ready `job` in the job's task order: the ones this statement
        placed and the ones an earlier statement left allocated without committing (a pipelined gang), as
        Volcano's `Session.Allocate` dispatches the whole job once it is ready."""
        for task in job.tasks.values():
            if task.status is TaskStatus.ALLOCATED:
                self._bind(task)
        self._steps = [s for s in self._steps if s[0] is not StepKind.ALLOCATE]
        self.commit()

    def _bind(self, task: Task) -> None:
        ssn = self._ssn
        ssn.jobs[task.job].bind(task)  # `Session._set_status(task, BINDING)`, once per bind
        ssn.records.binds[task.key] = task.node or ""
