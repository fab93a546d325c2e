"""The engine's contract: what a plugin may register, what it may see of a session, and what an outcome means.

Mirrors kube-scheduler's framework interface (`pkg/scheduler/framework/interface.go`: one small interface per
extension point, a `Status` with a closed set of codes) and Volcano's callback kinds (`framework/session_plugins.go`:
`AddJobOrderFn`, `AddPredicateFn`, …). A plugin is typed against `SessionView`, the narrow part of a session it uses
(the session's data, its combined orders, and one typed `add_*` method per callback kind), never the concrete
`Session`; explain reads a session through `ExplainView` (that view, the combined votes and trial placements) and
follows one as it runs through a `SessionProbe`; actions use the whole session. Nothing here imports the session,
so plugins, callbacks, explain and the session depend on this module and not on each other.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Final, Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from extender.engine.hypernodes import Topology
from extender.engine.model import Job, Node, NodeArrays, Queue, SubJob, Task
from extender.engine.rowmath import NodeRows, Num, Ops
from extender.engine.status import SUCCESS, Code, Status
from lapilli.devices.assign import PodDevices
from lapilli.devices.config import DeviceConfig
from lapilli.resources.vector import Dims, Vec

Mask = npt.NDArray[np.bool_]
Index = npt.NDArray[np.intp]
Scores = npt.NDArray[np.float64]


# ---- outcomes -------------------------------------------------------------------------------------------------
class Vote(IntEnum):
    """Votes of JobEnqueueable / JobPipelined (Volcano's `util.Permit`, `Abstain`, `Reject`)."""

    REJECT = -1
    ABSTAIN = 0
    PERMIT = 1


PERMIT: Final = Vote.PERMIT
ABSTAIN: Final = Vote.ABSTAIN
REJECT: Final = Vote.REJECT


@dataclass(frozen=True, slots=True)
class ValidateResult:
    """Volcano's `api.ValidateResult`: why a job may not be scheduled at all this session."""

    passed: bool
    reason: str = ""
    message: str = ""


@dataclass(slots=True)
class QueueReport:
    """What a queue-share plugin (proportion, capacity) reports for a queue's status: deserved and share."""

    deserved: Vec
    share: float


# ---- callback kinds (one Protocol each) -----------------------------------------------------------------------
# What order callbacks' keys return, and the session's combined sort keys (plugin keys, then a unique id).
KeyValue = float | tuple[float, ...]
SortKey = tuple[KeyValue | str | None, ...]
T_contra = TypeVar("T_contra", contravariant=True)
T = TypeVar("T")


class OrderFn(Protocol[T_contra]):
    """JobOrder / QueueOrder / TaskOrder: < 0 when `left` goes first, 0 when this plugin has no opinion."""

    def __call__(self, left: T_contra, right: T_contra, /) -> int: ...


@dataclass(frozen=True, slots=True)
class KeyedOrder(Generic[T]):
    """An order callback defined by a sort key: calling it compares the keys, so `compare(a, b) < 0` exactly when
    `key(a) < key(b)`. When every callback of a kind has a key, the session sorts by one tuple instead of walking
    the callbacks for every comparison."""

    key: Callable[[T], KeyValue]

    def __call__(self, left: T, right: T, /) -> int:
        lk, rk = _tuple(self.key(left)), _tuple(self.key(right))
        return (lk > rk) - (lk < rk)


def _tuple(value: KeyValue) -> tuple[float, ...]:
    # One callback's keys are all numbers or all tuples; as tuples both compare alike.
    return value if isinstance(value, tuple) else (value,)


class VictimQueueOrderFn(Protocol):
    def __call__(self, left: Queue, right: Queue, preemptor: Queue, /) -> int: ...


class JobPredicateFn(Protocol):
    """JobReady / JobStarving: a yes/no about a job."""

    def __call__(self, job: Job, /) -> bool: ...


class JobVoteFn(Protocol):
    """JobPipelined / JobEnqueueable: permit, abstain or reject, decided tier by tier."""

    def __call__(self, job: Job, /) -> Vote: ...


class JobValidFn(Protocol):
    """JobValid: None or a passing result when the job may be scheduled."""

    def __call__(self, job: Job, /) -> ValidateResult | None: ...


class JobEnqueuedFn(Protocol):
    def __call__(self, job: Job, /) -> None: ...


class VictimsFn(Protocol):
    """Preemptable / Reclaimable: which of `candidates` the plugin lets go (None abstains)."""

    def __call__(self, actor: Task, candidates: list[Task], /) -> list[Task] | None: ...


class EvictionKind(Enum):
    """Which gang-aware eviction asks (Volcano's `api.EvictionKind`)."""

    GANG_PREEMPT = "gangpreempt"
    GANG_RECLAIM = "gangreclaim"


@dataclass(frozen=True, slots=True)
class EvictionContext:
    """Volcano's `api.EvictionContext`: who evicts, for which gang, in which domain. `actor` is the gang's pending
    need as one request (a pending member whose `resreq` is the sum), for votes that weigh a reclaimer's request."""

    kind: EvictionKind
    job: Job
    actor: Task
    domain: str


class EvictableFn(Protocol):
    """UnifiedEvictable: which of `candidates` (whole gangs and surplus members, least important first) the plugin
    lets a gang-aware eviction take (None abstains)."""

    def __call__(self, ctx: EvictionContext, candidates: list[Task], /) -> list[Task] | None: ...


class QueuePredicateFn(Protocol):
    """Overused: a yes/no about a queue."""

    def __call__(self, queue: Queue, /) -> bool: ...


class QueueTaskFn(Protocol):
    """Allocatable / Preemptive: may this queue take (or preempt for) this task?"""

    def __call__(self, queue: Queue, task: Task, /) -> bool: ...


class SubJobPredicateFn(Protocol):
    """SubJobReady: a yes/no about a sub-gang."""

    def __call__(self, subjob: SubJob, /) -> bool: ...


class SubJobVoteFn(Protocol):
    """SubJobPipelined: permit, abstain or reject, decided tier by tier."""

    def __call__(self, subjob: SubJob, /) -> Vote: ...


# Why HyperNodes are searched (Volcano's `api.SearchPurpose`): to place a gang, or to pick where to evict for one.
PURPOSE_ALLOCATE: Final = "allocate"
PURPOSE_EVICT: Final = "evict"


class HyperNodeGradientFn(Protocol[T_contra]):
    """HyperNodeGradientForJob / ForSubJob: the HyperNodes under `root` the job or sub-gang may go to, grouped
    into gradients tried in order (lowest tier first when allocating)."""

    def __call__(self, target: T_contra, root: str, purpose: str, /) -> list[list[str]]: ...


class HyperNodeOrderFn(Protocol):
    """HyperNodeOrder: a score per HyperNode for placing the sub-gang there (higher is better); the HyperNodes and
    their scores as arrays, the HyperNodes by index (`Topology.index.names`)."""

    def __call__(self, subjob: SubJob, hypernodes: Index, /) -> Scores: ...


class TaskEventFn(Protocol):
    def __call__(self, task: Task, /) -> None: ...


@dataclass(slots=True)
class EventHandler:
    """Volcano's `framework.EventHandler`: told of every allocation and deallocation a Statement makes."""

    allocate: TaskEventFn | None = None
    deallocate: TaskEventFn | None = None


class Predicate(Protocol):
    """A node filter (Volcano's PredicateFn over all nodes at once). `static_mask` depends only on
    `task.predicate_key` (cached per key) and what it refuses no eviction can fix (UnschedulableAndUnresolvable);
    `dynamic_mask` depends on what is placed and is evaluated per task (None when it does not constrain this task),
    and `unresolvable_mask` says which of the nodes it refuses no eviction could open (kube-scheduler's
    UnschedulableAndUnresolvable: required pod affinity, a missing spread key; None when there are none);
    `explain` gives the reasons one node refuses a task, for the fit error. It is asked only about nodes one of the
    predicates' masks refuses, and must say nothing about a node its own masks accept; when no dynamic mask
    constrains the task, its answer may depend only on the task's `predicate_key` and the node (it is kept per
    template for the session). Placement asks `dynamic_mask` only for tasks marked `Task.dynamic`, so a predicate
    that constrains a task this way marks it when the session opens."""

    def static_mask(self, task: Task, idx: Index) -> Mask: ...

    def dynamic_mask(self, task: Task, idx: Index) -> Mask | None: ...

    def unresolvable_mask(self, task: Task, idx: Index) -> Mask | None: ...

    def explain(self, task: Task, node: Node) -> list[str]: ...


class Scorer(Protocol):
    """A node score (Volcano's NodeOrderFn). `row_score` is the formula over node rows, written once for
    `rowmath.VECTOR` and `SCALAR`; it may depend only on the task's class and the row's numbers (the session caches
    it per class and memoises it by row contents). `normalized` is computed over the candidate set at pick time,
    and `normalizes(task)` says whether it contributes anything for this task's class (the session asks the first
    task of a class); a score that varies between tasks of one class contributes through `normalized` for the tasks
    it marks `Task.rescored`."""

    def row_score(self, task: Task, ops: Ops, rows: NodeRows) -> Num: ...

    def normalized(self, task: Task, idx: Index) -> Scores | None: ...

    def normalizes(self, task: Task) -> bool: ...


class NodeBonus(Protocol):
    """A node score that depends on more than the node's own row, but not on which nodes are candidates (the
    network-topology plugin's HyperNode binpack for pods without a topology: how full each node's HyperNodes are).
    Per task, one additive score for every node (None: nothing for this task); the session adds it to the class's
    cached picks, so such tasks keep the fast path."""

    def __call__(self, task: Task, /) -> Scores | None: ...


class NodeLocal(Protocol):
    """A filter and score that read a node's own state beyond its resource row (its vGPU cards: which pods hold
    which card). The session caches its answers per task class like a row-local scorer's, refreshing a node when
    the node's row changes (every placement on a node touches its row) and sharing one evaluation between nodes
    whose row and `key` are equal.

    `applies(task)` depends only on the task's class (request, template, `device_ask`); `evaluate(task, row)` is
    (fits if allocated now, fits if pipelined onto room being released, score); `explain` gives the reasons one
    node refuses the task, for the fit error."""

    def applies(self, task: Task) -> bool: ...

    def key(self, task: Task, row: int) -> Hashable: ...

    def evaluate(self, task: Task, row: int) -> tuple[bool, bool, float]: ...

    def explain(self, task: Task, node: Node) -> list[str]: ...

    def summary(self, task: Task, rows: Index) -> str:
        """One line on what comes closest when none of the nodes `rows` admits the task by its local state ("" when
        one does): `no card with 20 GB free: best sim-node-3 card 1 with 12 GB`."""
        ...


# ---- what a plugin sees ---------------------------------------------------------------------------------------
class SessionView(Protocol):
    """The part of a session a plugin uses: read its data, ask its combined orders, register callbacks (only from
    `on_session_open`), report queue shares, PodGroup conditions and events."""

    now: float
    dims: Dims
    total: Vec
    arrays: NodeArrays
    queue_reports: dict[str, QueueReport]
    # Jobs this session leaves out (extender/engine/parking.py): no action tries them and their PodGroup result is
    # the one they got when parked, so a plugin's per-job close work skips them.
    parked: frozenset[str]
    topology: Topology
    # The card assignment of each task placed (binding or pipelined; task uid -> cards), filled in by the device
    # plugin when the session closes.
    assignments: dict[str, PodDevices]
    # Each node's cards once the session ends: per card (uuid, MB in use, MB, pods, split), for reports.
    card_report: Mapping[str, tuple[tuple[str, int, int, int, int], ...]]
    # Tasks whose GPUs idle under a policy that reclaims them (`Task.idle`), by pod key.
    idle_tasks: list[Task]
    # Some pod of the session has inter-pod (anti-)affinity or spread terms (`Task.terms`); without any, the pod
    # terms' plugins have nothing to count.
    pod_terms: bool

    @property
    def device_configs(self) -> Mapping[str, DeviceConfig]: ...

    @property
    def jobs(self) -> Mapping[str, Job]: ...

    @property
    def queues(self) -> Mapping[str, Queue]: ...

    @property
    def nodes(self) -> Sequence[Node]: ...

    @property
    def node_by_name(self) -> Mapping[str, Node]: ...

    def current_flags(self) -> Mapping[str, bool]: ...

    def job_order(self, left: Job, right: Job) -> int: ...

    def queue_order(self, left: Queue, right: Queue) -> int: ...

    def task_order(self, left: Task, right: Task) -> int: ...

    def victim_queue_order(self, left: Queue, right: Queue, preemptor: Queue) -> int: ...

    def job_fit_error(self, job: Job) -> str: ...

    def set_condition(self, job: Job, kind: str, reason: str, message: str) -> None: ...

    def record_event(self, key: str, type_: str, reason: str, message: str) -> None: ...

    def add_job_order(self, fn: OrderFn[Job]) -> None: ...

    def add_queue_order(self, fn: OrderFn[Queue]) -> None: ...

    def add_victim_queue_order(self, fn: VictimQueueOrderFn) -> None: ...

    def add_task_order(self, fn: OrderFn[Task]) -> None: ...

    def add_job_ready(self, fn: JobPredicateFn) -> None: ...

    def add_job_pipelined(self, fn: JobVoteFn) -> None: ...

    def add_job_valid(self, fn: JobValidFn) -> None: ...

    def add_job_starving(self, fn: JobPredicateFn) -> None: ...

    def add_job_enqueueable(self, fn: JobVoteFn) -> None: ...

    def add_job_enqueued(self, fn: JobEnqueuedFn) -> None: ...

    def add_preemptable(self, fn: VictimsFn) -> None: ...

    def add_reclaimable(self, fn: VictimsFn) -> None: ...

    def add_evictable(self, fn: EvictableFn, *, guard: bool = False) -> None:
        """A vote for gangpreempt/gangreclaim; `guard`: it also applies whatever tier decides (the queue-share
        plugins' reclaim check, so a queue within its deserved share never loses a gang)."""

    def add_overused(self, fn: QueuePredicateFn) -> None: ...

    def add_allocatable(self, fn: QueueTaskFn) -> None: ...

    def add_preemptive(self, fn: QueueTaskFn) -> None: ...

    def add_predicate(self, fn: Predicate) -> None: ...

    def add_node_order(self, fn: Scorer) -> None: ...

    def add_node_bonus(self, fn: NodeBonus) -> None: ...

    def add_node_local(self, fn: NodeLocal) -> None: ...

    def add_event_handler(self, handler: EventHandler) -> None: ...

    def add_subjob_ready(self, fn: SubJobPredicateFn) -> None: ...

    def add_subjob_pipelined(self, fn: SubJobVoteFn) -> None: ...

    def add_subjob_order(self, fn: OrderFn[SubJob]) -> None: ...

    def add_hypernode_gradient_for_job(self, fn: HyperNodeGradientFn[Job]) -> None: ...

    def add_hypernode_gradient_for_subjob(self, fn: HyperNodeGradientFn[SubJob]) -> None: ...

    def add_hypernode_order(self, fn: HyperNodeOrderFn) -> None: ...


class Trial(Protocol):
    """Placements made to be undone: a `Statement`'s allocate and pipeline, discarded rather than committed."""

    def allocate(self, task: Task, node: Node) -> None: ...

    def pipeline(self, task: Task, node: Node) -> None: ...

    def discard(self) -> None: ...


class ExplainView(SessionView, Protocol):
    """What an explanation reads of a session beyond a plugin's view: its tasks, its plugins by name, the combined
    votes the actions ask for, where a task may go, and placements tried and undone. Nothing here changes what the
    session decides."""

    @property
    def tasks(self) -> Mapping[str, Task]: ...

    def plugin(self, name: str) -> Plugin | None: ...

    def job_valid(self, job: Job) -> ValidateResult | None: ...

    def preemptive(self, queue: Queue, task: Task) -> bool: ...

    def preemptable(self, preemptor: Task, candidates: list[Task]) -> list[Task] | None: ...

    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> list[Task] | None: ...

    def preempt_mask(self, task: Task) -> Mask: ...

    def predicate_node(self, task: Task, node: Node) -> bool: ...

    def predicate_reasons(self, task: Task, node: Node) -> list[str]: ...

    def local_summary(self, task: Task) -> str: ...

    def choose(self, task: Task) -> tuple[Node, bool] | None: ...

    def trial(self) -> Trial: ...


class SessionProbe(Protocol):
    """Told what a session does as it runs (explain's recorder): `opened` once its plugins are open and before the
    first action, each combined vote the actions ask that explain names (an enqueue vote before and after it is
    taken, a queue found overused, a task a queue refuses), and `closing` after the last action, before the plugins
    drop their state."""

    def opened(self, ssn: ExplainView) -> None: ...

    def enqueue_asked(self, job: Job) -> None: ...

    def enqueue_answered(self, job: Job, admitted: bool) -> None: ...

    def queue_overused(self, queue: Queue) -> None: ...

    def task_refused(self, queue: Queue, task: Task) -> None: ...

    def closing(self, ssn: ExplainView) -> None: ...


class Plugin(Protocol):
    """Volcano's `framework.Plugin`: built fresh for each session from its frozen arguments."""

    name: str

    def on_session_open(self, ssn: SessionView) -> None: ...

    def on_session_close(self, ssn: SessionView) -> None: ...


# A conf entry's plugin, its arguments already parsed (conf.py); called once per session.
PluginBuilder = Callable[[], Plugin]
# What a plugin registers: parse a conf entry's `arguments` (raising ConfError) into its builder.
PluginLoader = Callable[[Mapping[str, object]], PluginBuilder]


__all__ = [
    "ABSTAIN",
    "PERMIT",
    "PURPOSE_ALLOCATE",
    "PURPOSE_EVICT",
    "REJECT",
    "SUCCESS",
    "Code",
    "EventHandler",
    "EvictableFn",
    "EvictionContext",
    "EvictionKind",
    "ExplainView",
    "HyperNodeGradientFn",
    "HyperNodeOrderFn",
    "Index",
    "KeyedOrder",
    "Mask",
    "NodeBonus",
    "NodeLocal",
    "Plugin",
    "PluginBuilder",
    "PluginLoader",
    "Predicate",
    "QueueReport",
    "Scorer",
    "Scores",
    "SessionProbe",
    "SessionView",
    "SortKey",
    "Status",
    "SubJobPredicateFn",
    "SubJobVoteFn",
    "Trial",
    "ValidateResult",
    "Vote",
]
