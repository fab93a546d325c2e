"""The engine's plain records: tasks (pods), jobs (PodGroups), queues and nodes.

Mirrors Volcano's `pkg/scheduler/api` (TaskInfo, JobInfo, QueueInfo, NodeInfo) with the data kept slim: requests
are vectors over the session's `Dims`, node resources live in the session's arrays (`NodeArrays`) indexed by
`Node.idx`, and a job keeps per-status counters so the gang predicates are O(1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from types import MappingProxyType
from typing import Final

import numpy as np
import numpy.typing as npt

from extender.engine.status import Status
from lapilli.devices.asks import DeviceAsk
from lapilli.devices.facts import PodDeviceFacts
from lapilli.devices.register import Card
from lapilli.meta import JSON, as_json
from lapilli.nodematch import PodPlacement, Taint
from lapilli.podterms import PodTerms
from lapilli.resources.vector import Vec


class TaskStatus(IntEnum):
    PENDING = 1
    ALLOCATED = 2
    PIPELINED = 3
    BINDING = 4
    BOUND = 5
    RUNNING = 6
    RELEASING = 7
    SUCCEEDED = 8
    FAILED = 9
    UNKNOWN = 10

    # Enum hashes a member by its name in Python code; statuses are looked up in sets on every placement, and an
    # IntEnum equals its int anyway, so hash it as that int (in C).
    __hash__ = int.__hash__

    def label(self) -> str:
        return self.name.capitalize()


ALLOCATED_STATUS = frozenset({TaskStatus.BOUND, TaskStatus.BINDING, TaskStatus.RUNNING, TaskStatus.ALLOCATED})
SCHEDULED_STATUS = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.FAILED, TaskStatus.SUCCEEDED})
PREEMPTABLE_STATUS = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})
# Tasks whose resources count as used on their node.
ON_NODE_STATUS = frozenset(
    {TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.RELEASING}
)
READY_STATUS = ALLOCATED_STATUS | {TaskStatus.SUCCEEDED}
VALID_STATUS = ALLOCATED_STATUS | {TaskStatus.SUCCEEDED, TaskStatus.PIPELINED, TaskStatus.PENDING}


def replica_index(name: str) -> int | None:
    """The replica index Volcano reads from `<job>-<task>-<i>` pod names."""
    parts = name.split("-")
    if len(parts) >= 3 and parts[-1].isdigit():
        return int(parts[-1])
    return None


CONDITION_FIELDS: Final = ("type", "status", "reason", "message")
NO_LABELS: Final[Mapping[str, str]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Condition:
    """A PodGroup condition: the four fields the scheduler sets (None where a carried-over condition lacks one)
    and any others it was read with (lastTransitionTime, transitionID), kept as they were."""

    type: str
    status: str | None = "True"
    reason: str | None = ""
    message: str | None = ""
    extra: tuple[tuple[str, JSON], ...] = ()

    @classmethod
    def read(cls, raw: object) -> Condition:
        fields = raw if isinstance(raw, Mapping) else {}
        extra = tuple((str(k), as_json(v)) for k, v in fields.items() if k not in CONDITION_FIELDS)
        return cls(str(fields.get("type")), _text(fields.get("status")), _text(fields.get("reason")),
                   _text(fields.get("message")), extra)

    def to_json(self) -> dict[str, JSON]:
        fields = {"type": self.type, "status": self.status, "reason": self.reason, "message": self.message}
        return {**{k: v for k, v in fields.items() if v is not None}, **dict(self.extra)}


def _text(value: object) -> str | None:
    return None if value is None else str(value)


@dataclass(slots=True, eq=False)
class Task:
    """One pod."""

    uid: str
    namespace: str
    name: str
    job: str  # "" for pods that belong to no PodGroup (they only occupy their node)
    role: str
    resreq: Vec
    priority: int
    status: TaskStatus
    node: str | None
    creation: float
    best_effort: bool
    preemptable: bool
    placement: PodPlacement
    priority_class: str = ""
    nominated_node: str | None = None
    preemption_never: bool = False
    host_ports: tuple[tuple[str, str, int], ...] = ()
    # The static predicates (selector, affinity, tolerations) depend only on this key.
    predicate_key: str = ""
    devices: PodDeviceFacts | None = None  # extended-resource asks, device annotations and card assignment
    index: int | None = None  # `replica_index` of the name (a session passes its snapshot's `PodRecord.index`)
    # The pod's card asks, read by the deviceshare plugin at session open (None: it asks for no card, or vGPU is off).
    # Tasks with equal asks share one object; placement keeps a class per ask.
    device_ask: DeviceAsk | None = None
    # For inter-pod (anti-)affinity and topology spread: the pod's labels, its namespace's labels (what namespace
    # selectors match) and its own terms (None for most pods).
    labels: Mapping[str, str] = field(default_factory=lambda: NO_LABELS)
    namespace_labels: Mapping[str, str] = field(default_factory=lambda: NO_LABELS)
    terms: PodTerms | None = None
    # Where it may go (`dynamic`) or how nodes score for it (`rescored`) depends on where other pods are (host ports,
    # pod (anti-)affinity, spread), beyond what its class's cached arrays hold. The session sets `dynamic` for a pod
    # with host ports; the plugins that evaluate pod terms set both while it opens, for the tasks those terms concern.
    dynamic: bool = False
    rescored: bool = False
    # Its GPUs sat idle past the grace period under a queue policy that reclaims them (`Snapshot.idle_reclaimable`):
    # preempt and reclaim may take it as a victim whatever the plugins' votes say, before any other.
    idle: bool = False
    # Volcano's `TaskInfo.JobAllocatedHyperNode`: the HyperNode its sub-gang holds so far, set by allocate
    # before the task is scored (the network-topology-aware node score reads it), cleared when it is unplaced.
    job_hypernode: str = ""
    # "<namespace>/<name>", the pod's key in binds and results (a session passes its snapshot's `PodRecord.key`).
    key: str = ""


# Every status, in definition order: iterating the enum itself runs Python code for each member.
TASK_STATUSES: Final = tuple(TaskStatus)
# One counter slot per status value (TaskStatus starts at 1), so a job's counters are a plain list.
STATUS_SLOTS: Final = max(TaskStatus) + 1


def status_flags(statuses: frozenset[TaskStatus]) -> tuple[bool, ...]:
    """Membership by status value: hashing an enum member runs Python code, indexing a tuple does not."""
    flags = [False] * STATUS_SLOTS
    for status in statuses:
        flags[status] = True
    return tuple(flags)


IS_READY: Final = status_flags(READY_STATUS)
IS_ALLOCATED: Final = status_flags(ALLOCATED_STATUS)


def _zero_counts() -> list[int]:
    return [0] * STATUS_SLOTS


HARD: Final = "hard"
SOFT: Final = "soft"


@dataclass(frozen=True, slots=True)
class TopologySpec:
    """Volcano's `NetworkTopologySpec` as a session uses it: `mode` hard|soft, `tier` (`highestTierAllowed`) and
    `tier_name` (`highestTierName`); the session turns a name into a tier and soft into hard (`topology.prepare`)."""

    mode: str = HARD
    tier: int | None = None
    tier_name: str = ""

    def hard_tier(self) -> int | None:
        """`IsHardTopologyMode`: the tier limit when the mode is hard and a tier is known, else None."""
        return self.tier if self.mode == HARD and self.tier is not None else None


@dataclass(slots=True, eq=False)
class SubJob:
    """A sub-gang of a job (Volcano's `SubJobInfo`): the pods one `subGroupPolicy` entry and one set of match-label
    values select, or the job's default sub-gang holding the rest. Its counters follow its tasks' statuses, as the
    job's do."""

    uid: str
    gid: str  # "<job>/<policy>"; the default sub-gang's is the job's uid
    job: str
    min_available: int
    match_index: int
    topology: TopologySpec | None
    tasks: dict[str, Task] = field(default_factory=dict)
    counts: list[int] = field(default_factory=lambda: [0] * STATUS_SLOTS)
    pending_best_effort: int = 0
    allocated_hypernode: str = ""  # the HyperNode its placed tasks are under (LCA), recovered each session
    nominated_hypernode: str = ""  # where gang preemption or reclaim made room for it (allocate honours it)

    def count(self, status: TaskStatus, delta: int, best_effort: bool) -> None:
        self.counts[status] += delta
        if best_effort and status is TaskStatus.PENDING:
            self.pending_best_effort += delta

    def ready_num(self) -> int:
        counts = self.counts
        return sum([counts[s] for s in READY_STATUS])

    def allocated_num(self) -> int:
        counts = self.counts
        return sum([counts[s] for s in ALLOCATED_STATUS])

    def is_ready(self) -> bool:
        return self.ready_num() + self.pending_best_effort >= self.min_available

    def is_pipelined(self) -> bool:
        return self.counts[TaskStatus.PIPELINED] + self.ready_num() + self.pending_best_effort >= self.min_available

    def hard_tier(self) -> int | None:
        return None if self.topology is None else self.topology.hard_tier()

    def pending_tasks(self) -> list[Task]:
        return [t for t in self.tasks.values() if t.status is TaskStatus.PENDING]


@dataclass(slots=True, eq=False)
class Job:
    """A PodGroup and its pods."""

    uid: str  # "<ns>/<pg name>", as Volcano's JobID
    namespace: str
    name: str
    queue: str
    min_member: int
    min_task_member: Mapping[str, int]  # the snapshot record's own (read-only, so shared rather than copied)
    min_resources: Vec | None
    priority: int
    creation: float
    phase: str
    preemptable: bool
    allocated: Vec
    tasks: dict[str, Task] = field(default_factory=dict)
    # Tasks per status (indexed by TaskStatus) and per (role, status): the gang votes read these on every
    # placement, so they are kept up to date instead of counted.
    counts: list[int] = field(default_factory=_zero_counts)
    role_counts: dict[str, list[int]] = field(default_factory=dict)
    ready: int = 0  # tasks in READY_STATUS
    pending_best_effort_count: int = 0
    annotations: Mapping[str, str] = field(default_factory=dict)  # as min_task_member
    conditions: tuple[Condition, ...] = ()
    # fit errors per task uid, recorded by allocate for the PodGroup condition
    fit_errors: dict[str, Status] = field(default_factory=dict)
    job_fit_error: str = ""
    # Network topology and sub-gangs (Volcano's `NetworkTopology`, `SubJobs`, `MinSubJobs`): None for a job with
    # neither, which pays nothing for them; see `topology.py`.
    topology: TopologySpec | None = None
    subjobs: dict[str, SubJob] | None = None
    subjob_of: dict[str, SubJob] = field(default_factory=dict)  # task uid -> its sub-gang
    min_subjobs: dict[str, int] = field(default_factory=dict)  # sub-gang group (policy) -> minSubGroups
    has_policy: bool = False  # the PodGroup has a subGroupPolicy (Volcano's `ContainsSubJobPolicy`)
    allocated_hypernode: str = ""
    gang_evictable: bool = True  # may lose pods to gangpreempt/gangreclaim (see PodGroupRecord.gang_evictable)

    def add_task(self, task: Task) -> None:
        """A task joins the job, counted in its status (once per pod as a session opens)."""
        self.tasks[task.uid] = task
        status = task.status
        self.counts[status] += 1
        role = self.role_counts.get(task.role)
        if role is None:
            role = self.role_counts[task.role] = _zero_counts()
        role[status] += 1
        if IS_READY[status]:
            self.ready += 1
        if IS_ALLOCATED[status]:
            self.allocated += task.resreq
        elif status is TaskStatus.PENDING and task.best_effort:
            self.pending_best_effort_count += 1

    def add_to_subjob(self, task: Task, subjob: SubJob) -> None:
        subjob.tasks[task.uid] = task
        subjob.count(task.status, 1, task.best_effort)
        self.subjob_of[task.uid] = subjob

    def add_all_to_subjob(self, tasks: Iterable[Task], subjob: SubJob) -> None:
        """`add_to_subjob` for each of `tasks` in turn (a session opening puts thousands in their sub-gangs)."""
        counts, members, owner = subjob.counts, subjob.tasks, self.subjob_of
        for task in tasks:
            members[task.uid] = task
            counts[task.status] += 1
            if task.best_effort and task.status is TaskStatus.PENDING:
                subjob.pending_best_effort += 1
            owner[task.uid] = subjob

    def set_status(self, task: Task, status: TaskStatus) -> None:
        # The counts of `add_task` moved from the old status to the new, unrolled: this runs several times per
        # placement.
        old = task.status
        task.status = status
        self.counts[old] -= 1
        self.counts[status] += 1
        role = self.role_counts[task.role]  # add_task created it
        role[old] -= 1
        role[status] += 1
        self.ready += IS_READY[status] - IS_READY[old]
        was, now = IS_ALLOCATED[old], IS_ALLOCATED[status]
        if was != now:
            if now:
                self.allocated += task.resreq
            else:
                self.allocated -= task.resreq
        if task.best_effort:
            self.pending_best_effort_count += (status is TaskStatus.PENDING) - (old is TaskStatus.PENDING)
        if self.subjobs is not None:  # `SubJob.count` twice, unrolled
            sub = self.subjob_of[task.uid]
            sub.counts[old] -= 1
            sub.counts[status] += 1
            if task.best_effort:
                sub.pending_best_effort += (status is TaskStatus.PENDING) - (old is TaskStatus.PENDING)

    def bind(self, task: Task) -> None:
        """`set_status(task, BINDING)`. From Allocated only the counters move: both statuses are ready and allocated,
        neither pending, so `ready`, `allocated` and the best-effort count stay as they are."""
        self.bind_all([task])

    def bind_all(self, tasks: list[Task]) -> None:
        """`bind` each of `tasks` (this job's). Allocate's commit binds whole gangs of Allocated tasks, for which
        only the counters move: they move once per role here instead of once per task (the same integer sums)."""
        moved: dict[str, int] = {}
        for task in tasks:
            if task.status is not TaskStatus.ALLOCATED:
                self.set_status(task, TaskStatus.BINDING)
                continue
            task.status = TaskStatus.BINDING
            moved[task.role] = moved.get(task.role, 0) + 1
            if self.subjobs is not None:
                sub = self.subjob_of[task.uid]
                sub.counts[TaskStatus.ALLOCATED] -= 1
                sub.counts[TaskStatus.BINDING] += 1
        for role, n in moved.items():
            self.counts[TaskStatus.ALLOCATED] -= n
            self.counts[TaskStatus.BINDING] += n
            counts = self.role_counts[role]
            counts[TaskStatus.ALLOCATED] -= n
            counts[TaskStatus.BINDING] += n

    def count(self, statuses: frozenset[TaskStatus] | set[TaskStatus]) -> int:
        counts = self.counts
        return sum([counts[s] for s in statuses])

    def inqueue_reservation(self) -> Vec | None:
        """What an admitted job still holds in its queue beyond what it has been given (Volcano's
        GetInqueueResource): while Inqueue, whose tasks may already be allocated or binding (all of minResources
        would count them twice), and while Running with its gang placed. None for a job without minResources or
        in another phase."""
        if self.min_resources is None:
            return None
        if self.phase == "Inqueue" or (self.phase == "Running" and self.count(ALLOCATED_STATUS) >= self.min_member):
            return np.maximum(self.min_resources - self.allocated, 0.0)
        if self.degraded():
            # A gang regaining members keeps its admission: new work of its queue is admitted only beside what it
            # still needs (Volcano drops the reservation once a gang falls below minMember, and new work takes
            # the room its lost member held).
            return np.maximum(self.min_resources - self.allocated, 0.0)
        return None

    def degraded(self) -> bool:
        """A gang that ran (PodGroup Running, or Unknown: running members, the rest unschedulable) and now has some
        members but fewer than minMember: one was deleted, evicted or failed, or its node is gone. It is ordered
        before new work of its queue and keeps its admission until it heals, or its Job's policies decide."""
        if self.phase not in ("Running", "Unknown") or self.min_member <= 1:
            return False
        return self.ready < self.min_member and self.count(ALLOCATED_STATUS) > 0

    def role_count(self, role: str, statuses: frozenset[TaskStatus] | set[TaskStatus]) -> int:
        counts = self.role_counts.get(role)
        return 0 if counts is None else sum([counts[s] for s in statuses])

    def pending_best_effort(self) -> int:
        return self.pending_best_effort_count

    def ready_num(self) -> int:
        return self.ready

    def waiting_num(self) -> int:
        return self.counts[TaskStatus.PIPELINED]

    def is_ready(self) -> bool:
        return self.ready + self.pending_best_effort_count >= self.min_member

    def is_pipelined(self) -> bool:
        return self.counts[TaskStatus.PIPELINED] + self.ready + self.pending_best_effort_count >= self.min_member

    def is_starving(self) -> bool:
        return self.counts[TaskStatus.PIPELINED] + self.ready < self.min_member

    def is_pending(self) -> bool:
        return self.phase in ("", "Pending")

    def pending_tasks(self) -> list[Task]:
        return [t for t in self.tasks.values() if t.status is TaskStatus.PENDING]

    def task_min_sum(self) -> int:
        return sum(self.min_task_member.values())


@dataclass(slots=True, eq=False)
class Queue:
    uid: str
    name: str
    weight: int
    capability: Vec  # +inf where the queue sets no limit
    guarantee: Vec
    deserved_spec: Vec | None
    reclaimable: bool
    state: str
    parent: str
    priority: int
    creation: float
    annotations: dict[str, str] = field(default_factory=dict)
    has_capability: dict[str, bool] = field(default_factory=dict)
    has_deserved: dict[str, bool] = field(default_factory=dict)
    # With a `fairshare` entry in the conf (extender/engine/usage.py): the decayed usage at the session's `now`
    # (Volcano units × seconds), and what the share plugins add to the queue's allocation when they compute its
    # share (shareWeight × the usage's average rate; None when shareWeight is 0). Both None without fairshare.
    usage: Vec | None = None
    share_bias: Vec | None = None


@dataclass(slots=True, eq=False)
class Node:
    name: str
    idx: int
    # The snapshot record's own (read-only, so shared rather than copied per session)
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    tasks: dict[str, Task] = field(default_factory=dict)
    used_ports: set[tuple[str, str, int]] = field(default_factory=set)
    cards: tuple[Card, ...] = ()  # registered vGPU cards (none when its register annotation could not be read)


@dataclass(slots=True)
class NodeArrays:
    """Per-node resources as rows, so a predicate or a score covers every node in one numpy expression.

    The four matrices are views into one `state` matrix ([allocatable | used | releasing | pipelined] per row), so
    a node's whole state is one contiguous row: `state[i].tobytes()` identifies it, `state[i].tolist()` reads it.
    """

    allocatable: npt.NDArray[np.float64]
    used: npt.NDArray[np.float64]
    releasing: npt.NDArray[np.float64]
    pipelined: npt.NDArray[np.float64]
    state: npt.NDArray[np.float64]
    # Each node's row of `state`, `used` and `pipelined` as views made once: a placement reads and adds to them,
    # and indexing a list costs a fifth of making a numpy view.
    state_rows: list[npt.NDArray[np.float64]] = field(default_factory=list)
    used_rows: list[npt.NDArray[np.float64]] = field(default_factory=list)
    pipelined_rows: list[npt.NDArray[np.float64]] = field(default_factory=list)

    @classmethod
    def of(cls, allocatable: npt.NDArray[np.float64]) -> NodeArrays:
        """Nothing used, releasing or pipelined yet."""
        nodes, dims = allocatable.shape
        state = np.zeros((nodes, 4 * dims))
        state[:, :dims] = allocatable
        parts = [state[:, k * dims : (k + 1) * dims] for k in range(4)]
        return cls(allocatable=parts[0], used=parts[1], releasing=parts[2], pipelined=parts[3], state=state,
                   state_rows=list(state), used_rows=list(parts[1]), pipelined_rows=list(parts[3]))

    def idle(self) -> npt.NDArray[np.float64]:
        return self.allocatable - self.used

    def future_idle(self) -> npt.NDArray[np.float64]:
        return self.allocatable - self.used + self.releasing - self.pipelined

    def future_idle_row(self, i: int) -> Vec:
        return self.allocatable[i] - self.used[i] + self.releasing[i] - self.pipelined[i]
