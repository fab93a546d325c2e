"""One scheduling cycle over a snapshot (Volcano's `framework/session.go` + `session_plugins.go`).

The session turns the snapshot's records into tasks, jobs, queues and node arrays, opens the configured plugins
(each registers callbacks by kind), and offers the combined votes the actions ask for. Only a `Statement` changes
task placement; `place`/`unplace` here are the primitive moves it records with their inverses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from extender.engine.conf import PluginOption, SchedulerConf
from extender.engine.framework import ABSTAIN, FLAG_OF, PERMIT, PLUGINS, REJECT, Fn, KeyedOrder, Plugin
from extender.engine.model import (
    ALLOCATED_STATUS,
    ON_NODE_STATUS,
    Job,
    Node,
    NodeArrays,
    Queue,
    Task,
    TaskStatus,
)
from extender.engine.placement import Index, Mask, Placement, Predicate, Scorer, Scores
from extender.engine.snapshot import PodRecord, Snapshot
from lapilli.resources.vector import TOLERANCE, Dims, Vec


@dataclass(slots=True)
class EventHandler:
    allocate: Callable[[Task], None] | None = None
    deallocate: Callable[[Task], None] | None = None


@dataclass(slots=True)
class ValidateResult:
    passed: bool
    reason: str = ""
    message: str = ""


@dataclass(slots=True)
class QueueReport:
    deserved: Vec
    share: float


@dataclass(slots=True)
class _Registered:
    tier: int
    option: PluginOption
    fn: Any


@dataclass(slots=True)
class SessionRecords:
    binds: dict[str, str] = field(default_factory=dict)
    evictions: list[str] = field(default_factory=list)
    events: list[tuple[str, str, str, str]] = field(default_factory=list)  # (object key, type, reason, message)


def _priority(pod: PodRecord, snap: Snapshot) -> int:
    if pod.task_priority is not None:
        return pod.task_priority
    if pod.spec_priority is not None:
        return pod.spec_priority
    # The Priority admission plugin would have resolved the class; do it here for hand-written snapshots.
    if pod.priority_class in snap.priority_classes:
        return snap.priority_classes[pod.priority_class]
    return 1


def _task_status(pod: PodRecord) -> TaskStatus:
    if pod.phase in ("Pending", "Running") and pod.deleting:
        return TaskStatus.RELEASING
    if pod.phase == "Running":
        return TaskStatus.RUNNING
    if pod.phase == "Pending":
        return TaskStatus.BOUND if pod.node_name else TaskStatus.PENDING
    if pod.phase == "Succeeded":
        return TaskStatus.SUCCEEDED
    if pod.phase == "Failed":
        return TaskStatus.FAILED
    return TaskStatus.UNKNOWN


def _chain_keys(keys: list[Callable[[Any], Any]], tail: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any], Any]:
    """(k1(x), k2(x), …) + tail(x): the plugins' keys in tier order, then the built-in tie-break."""
    if not keys:
        return tail
    if len(keys) == 1:
        (first,) = keys
        return lambda item: (first(item), *tail(item))
    return lambda item: (*[key(item) for key in keys], *tail(item))


class Session:
    def __init__(self, snap: Snapshot, conf: SchedulerConf, now: float = 0.0) -> None:
        self.conf = conf
        self.now = now
        self.records = SessionRecords()
        names: set[str] = set()
        for n in snap.nodes.values():
            names.update(n.allocatable)
        for p in snap.pods.values():
            names.update(p.request)
        for q in snap.queues.values():
            names.update(q.capability, q.guarantee, q.deserved or {})
        for g in snap.podgroups.values():
            names.update(g.min_resources or {})
        self.dims = Dims(sorted(names))
        self._build_nodes(snap)
        self._build_queues(snap)
        self._build_jobs(snap)
        self._fns: dict[Fn, dict[str, Any]] = {kind: {} for kind in Fn}
        self._events: list[EventHandler] = []
        self._on_allocate: list[Callable[[Task], None]] = []
        self._on_deallocate: list[Callable[[Task], None]] = []
        self._tier_cache: dict[Fn, list[list[_Registered]]] = {}
        self._all_cache: dict[Fn, list[Any]] = {}
        self.queue_reports: dict[str, QueueReport] = {}
        self.conditions: dict[str, tuple[str, str, str]] = {}
        self.plugins: list[tuple[int, PluginOption, Plugin]] = []
        for ti, tier in enumerate(conf.tiers):
            for option in tier.plugins:
                self.plugins.append((ti, option, PLUGINS[option.name](option.arguments)))
        self._current: PluginOption | None = None
        self._current_tier = 0
        for ti, option, plugin in self.plugins:
            self._current, self._current_tier = option, ti
            plugin.on_session_open(self)
        self._current = None
        # Callbacks are registered only while plugins open; the per-task votes keep their lists at hand.
        self._ready_fns = self._all(Fn.JOB_READY)
        self._allocatable_fns = self._all(Fn.ALLOCATABLE)

    # ---- building -------------------------------------------------------------------------------------------
    def _build_nodes(self, snap: Snapshot) -> None:
        ready = sorted((n for n in snap.nodes.values() if n.ready), key=lambda n: n.name)
        self.nodes: list[Node] = [
            Node(name=n.name, idx=i, labels=dict(n.labels), taints=list(n.taints), unschedulable=n.unschedulable)
            for i, n in enumerate(ready)
        ]
        self.node_by_name: dict[str, Node] = {n.name: n for n in self.nodes}
        size = (len(self.nodes), self.dims.size)
        alloc = np.zeros(size)
        for i, n in enumerate(ready):
            alloc[i] = self.dims.vector(n.allocatable)
        self.arrays = NodeArrays.of(alloc)
        self.placement = Placement(
            self.nodes, self.arrays, self.dims, lambda: self._all(Fn.PREDICATE), lambda: self._all(Fn.NODE_ORDER)
        )
        self.total: Vec = alloc.sum(axis=0) if len(self.nodes) else self.dims.zeros()

    def _build_queues(self, snap: Snapshot) -> None:
        self.queues: dict[str, Queue] = {}
        for q in snap.queues.values():
            capability = self.dims.vector(q.capability, missing=np.inf)
            self.queues[q.name] = Queue(
                uid=q.uid,
                name=q.name,
                weight=q.weight,
                capability=capability,
                guarantee=self.dims.vector(q.guarantee),
                deserved_spec=self.dims.vector(q.deserved) if q.deserved is not None else None,
                reclaimable=q.reclaimable,
                state=q.state,
                parent=q.parent,
                priority=q.priority,
                creation=q.creation,
                annotations=dict(q.annotations),
                has_capability={k: True for k in q.capability},
                has_deserved={k: True for k in (q.deserved or {})},
            )

    def _vector(self, units: Mapping[str, float]) -> Vec:
        """`dims.vector(units)`, shared between equal resource lists (read-only, so sharing is safe): a snapshot's
        pods and PodGroups come from a few templates."""
        key = tuple(units.items())
        vec = self._vectors.get(key)
        if vec is None:
            vec = self._vectors[key] = self.dims.vector(units)
            vec.flags.writeable = False
        return vec

    def _build_jobs(self, snap: Snapshot) -> None:
        self._vectors: dict[tuple[tuple[str, float], ...], Vec] = {}
        self.jobs: dict[str, Job] = {}
        for pg in snap.podgroups.values():
            if pg.queue not in self.queues:
                continue  # Volcano drops jobs whose queue does not exist from the snapshot
            priority = snap.priority_classes.get(pg.priority_class, snap.default_priority or 0)
            self.jobs[pg.key] = Job(
                uid=pg.key,
                namespace=pg.namespace,
                name=pg.name,
                queue=pg.queue,
                min_member=pg.min_member,
                min_task_member=dict(pg.min_task_member),
                min_resources=self._vector(pg.min_resources) if pg.min_resources is not None else None,
                priority=priority,
                creation=pg.creation,
                phase=pg.phase,
                preemptable=pg.preemptable,
                allocated=self.dims.zeros(),
                annotations=dict(pg.annotations),
                conditions=[dict(c) for c in pg.conditions],
            )
        self.tasks: dict[str, Task] = {}
        self.other_tasks: list[Task] = []
        best_effort: dict[int, bool] = {}  # by id of the shared request vector
        for pod in sorted(snap.pods.values(), key=lambda p: (p.namespace, p.name)):
            job = self.jobs.get(f"{pod.namespace}/{pod.group}") if pod.group else None
            resreq = self._vector(pod.request)
            if id(resreq) not in best_effort:
                best_effort[id(resreq)] = all(v < TOLERANCE for k, v in pod.request.items() if k != "pods")
            # Positional, in field order: keyword arguments double the cost of building 50,000 tasks.
            task = Task(
                pod.uid,  # uid
                pod.namespace,  # namespace
                pod.name,  # name
                job.uid if job is not None else "",  # job
                pod.role,  # role
                resreq,  # resreq
                _priority(pod, snap),  # priority
                _task_status(pod),  # status
                pod.node_name,  # node
                pod.creation,  # creation
                best_effort[id(resreq)],  # best_effort
                pod.preemptable,  # preemptable
                pod.spec,  # spec: records are frozen and the engine only reads it
                pod.priority_class,  # priority_class
                pod.nominated_node,  # nominated_node
                pod.preemption_never,  # preemption_never
                pod.host_ports,  # host_ports
                pod.predicate_key,  # predicate_key
            )
            if task.node is not None and task.status in ON_NODE_STATUS:
                node = self.node_by_name.get(task.node)
                if node is not None:
                    self._occupy(task, node, 1)
                    if task.status is TaskStatus.RELEASING:
                        self.arrays.releasing[node.idx] += task.resreq
                        self.placement.touch(node.idx)
            if job is not None:
                job.add_task(task)
                self.tasks[task.uid] = task
            else:
                self.other_tasks.append(task)

    def _occupy(self, task: Task, node: Node, sign: int) -> None:
        if sign > 0:
            self.arrays.used[node.idx] += task.resreq
        else:
            self.arrays.used[node.idx] -= task.resreq
        self.placement.touch(node.idx)
        if sign > 0:
            node.tasks[task.uid] = task
            if task.host_ports:
                node.used_ports.update(task.host_ports)
        else:
            node.tasks.pop(task.uid, None)
            node.used_ports.difference_update(task.host_ports)

    # ---- registration ---------------------------------------------------------------------------------------
    def add_fn(self, kind: Fn, fn: Any) -> None:
        """Register a callback for the plugin being opened, unless its conf flag switches that kind off."""
        option = self._current
        if option is None:
            raise RuntimeError("callbacks are registered from on_session_open")
        flag = FLAG_OF.get(kind)
        if flag is not None and not option.enabled(flag):
            return
        self._fns[kind][option.name] = _Registered(self._current_tier, option, fn)
        self._tier_cache.pop(kind, None)
        self._all_cache.pop(kind, None)

    def current_option(self) -> PluginOption:
        """The conf entry of the plugin being opened (its flags and arguments)."""
        if self._current is None:
            raise RuntimeError("only valid from on_session_open")
        return self._current

    def add_event_handler(self, handler: EventHandler) -> None:
        self._events.append(handler)
        self._on_allocate = [h.allocate for h in self._events if h.allocate is not None]
        self._on_deallocate = [h.deallocate for h in self._events if h.deallocate is not None]

    def _by_tier(self, kind: Fn) -> list[list[_Registered]]:
        cached = self._tier_cache.get(kind)
        if cached is not None:
            return cached
        tiers: list[list[_Registered]] = [[] for _ in self.conf.tiers]
        registered = self._fns[kind]
        for ti, option, _ in self.plugins:
            reg = registered.get(option.name)
            if reg is not None and reg.tier == ti:
                tiers[ti].append(reg)
        self._tier_cache[kind] = tiers
        self._all_cache[kind] = [r.fn for tier in tiers for r in tier]
        return tiers

    def _all(self, kind: Fn) -> list[Any]:
        cached = self._all_cache.get(kind)
        if cached is None:
            self._by_tier(kind)
            cached = self._all_cache[kind]
        return cached

    def has_fn(self, kind: Fn) -> bool:
        return bool(self._fns[kind])

    # ---- orders ---------------------------------------------------------------------------------------------
    def _compare(self, kind: Fn, left: Any, right: Any) -> int:
        for fn in self._all(kind):
            result: int = fn(left, right)
            if result != 0:
                return result
        return 0

    def _plugin_keys(self, kind: Fn) -> list[Callable[[Any], Any]] | None:
        keys = []
        for fn in self._all(kind):
            if not isinstance(fn, KeyedOrder):
                return None
            keys.append(fn.key)
        return keys

    def job_key(self) -> Callable[[Job], tuple[Any, ...]] | None:
        """A sort key equivalent to `job_order`, or None when some JobOrder callback is a plain comparator. Keys
        read the job's state when they are computed: use them only while the jobs being ordered do not change."""
        keys = self._plugin_keys(Fn.JOB_ORDER)
        return None if keys is None else _chain_keys(keys, lambda job: (job.creation, job.uid))

    def queue_key(self) -> Callable[[Queue], tuple[Any, ...]] | None:
        """A sort key equivalent to `queue_order` (see `job_key`)."""
        keys = self._plugin_keys(Fn.QUEUE_ORDER)
        return None if keys is None else _chain_keys(keys, lambda queue: (queue.creation, queue.uid))

    def task_key(self, tasks: list[Task]) -> Callable[[Task], tuple[Any, ...]] | None:
        """A sort key equivalent to `task_order` over `tasks` (see `job_key`). The replica-index tie-break is a
        total order only when all of the tasks have an index or none has; otherwise there is no key."""
        keys = self._plugin_keys(Fn.TASK_ORDER)
        indexed = sum(1 for t in tasks if t.index is not None)
        if keys is None or 0 < indexed < len(tasks):
            return None
        if indexed:
            return _chain_keys(keys, lambda task: (task.index, task.creation, task.uid))
        return _chain_keys(keys, lambda task: (task.creation, task.uid))

    def job_order(self, left: Job, right: Job) -> int:
        result = self._compare(Fn.JOB_ORDER, left, right)
        if result:
            return result
        if left.creation != right.creation:
            return -1 if left.creation < right.creation else 1
        return (left.uid > right.uid) - (left.uid < right.uid)

    def queue_order(self, left: Queue, right: Queue) -> int:
        result = self._compare(Fn.QUEUE_ORDER, left, right)
        if result:
            return result
        if left.creation != right.creation:
            return -1 if left.creation < right.creation else 1
        return (left.uid > right.uid) - (left.uid < right.uid)

    def victim_queue_order(self, left: Queue, right: Queue, preemptor: Queue) -> int:
        for fn in self._all(Fn.VICTIM_QUEUE_ORDER):
            result: int = fn(left, right, preemptor)
            if result:
                return result
        return -self.queue_order(left, right)

    def task_order(self, left: Task, right: Task) -> int:
        result = self._compare(Fn.TASK_ORDER, left, right)
        if result:
            return result
        li, ri = left.index, right.index
        if li is None or ri is None or li == ri:
            if left.creation == right.creation:
                return (left.uid > right.uid) - (left.uid < right.uid)
            return -1 if left.creation < right.creation else 1
        return -1 if li < ri else 1

    # ---- job votes ------------------------------------------------------------------------------------------
    def job_valid(self, job: Job) -> ValidateResult | None:
        for fn in self._all(Fn.JOB_VALID):
            result: ValidateResult | None = fn(job)
            if result is not None and not result.passed:
                return result
        return None

    def job_ready(self, job: Job) -> bool:
        for fn in self._ready_fns:  # noqa: SIM110 (a generator costs more; this runs per placement)
            if not fn(job):
                return False
        return True

    def _vote(self, kind: Fn, job: Job) -> bool:
        for tier in self._by_tier(kind):
            permitted = False
            for reg in tier:
                vote = reg.fn(job)
                if vote == REJECT:
                    return False
                if vote == PERMIT:
                    permitted = True
            if permitted:
                return True
        return True

    def job_pipelined(self, job: Job) -> bool:
        return self._vote(Fn.JOB_PIPELINED, job)

    def job_enqueueable(self, job: Job) -> bool:
        return self._vote(Fn.JOB_ENQUEUEABLE, job)

    def job_enqueued(self, job: Job) -> None:
        for fn in self._all(Fn.JOB_ENQUEUED):
            fn(job)

    def job_starving(self, job: Job) -> bool:
        for tier in self._by_tier(Fn.JOB_STARVING):
            if tier:
                return all(reg.fn(job) for reg in tier)
        return False

    # ---- queue votes ----------------------------------------------------------------------------------------
    def overused(self, queue: Queue) -> bool:
        for fn in self._all(Fn.OVERUSED):  # noqa: SIM110 (a generator costs more; this runs per job)
            if fn(queue):
                return True
        return False

    def allocatable(self, queue: Queue, task: Task) -> bool:
        for fn in self._allocatable_fns:  # noqa: SIM110 (a generator costs more; this runs per task)
            if not fn(queue, task):
                return False
        return True

    def preemptive(self, queue: Queue, task: Task) -> bool:
        return all(fn(queue, task) for fn in self._all(Fn.PREEMPTIVE))

    def _victims(self, kind: Fn, actor: Task, candidates: list[Task]) -> list[Task] | None:
        for tier in self._by_tier(kind):
            chosen: dict[str, Task] | None = None
            abstained = True
            for reg in tier:
                result: list[Task] | None = reg.fn(actor, candidates)
                if result is None:
                    continue  # abstain
                abstained = False
                if not result:
                    chosen = {}
                    break
                keys = {t.uid: t for t in result}
                chosen = keys if chosen is None else {k: v for k, v in chosen.items() if k in keys}
            if not abstained and chosen:
                return [t for t in candidates if t.uid in chosen]
        return None

    def preemptable(self, preemptor: Task, candidates: list[Task]) -> list[Task] | None:
        return self._victims(Fn.PREEMPTABLE, preemptor, candidates)

    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> list[Task] | None:
        return self._victims(Fn.RECLAIMABLE, reclaimer, candidates)

    # ---- events ---------------------------------------------------------------------------------------------
    def fire_allocate(self, task: Task) -> None:
        for allocate in self._on_allocate:
            allocate(task)

    def fire_deallocate(self, task: Task) -> None:
        for deallocate in self._on_deallocate:
            deallocate(task)

    # ---- primitive moves (used by Statement) ----------------------------------------------------------------
    def set_status(self, task: Task, status: TaskStatus) -> None:
        self.jobs[task.job].set_status(task, status)

    def place(self, task: Task, node: Node, status: TaskStatus) -> None:
        """Pending → Allocated/Pipelined on `node`."""
        # `_occupy`, `set_status` and `fire_allocate` inlined: this runs once per placement.
        task.node = node.name
        if status is TaskStatus.PIPELINED:
            self.arrays.pipelined[node.idx] += task.resreq
        else:
            self.arrays.used[node.idx] += task.resreq
        self.placement.touch(node.idx)
        node.tasks[task.uid] = task
        if task.host_ports:
            node.used_ports.update(task.host_ports)
        self.jobs[task.job].set_status(task, status)
        for allocate in self._on_allocate:
            allocate(task)

    def unplace(self, task: Task) -> None:
        """Undo `place`: back to Pending."""
        node = self.node_by_name[task.node or ""]
        if task.status is TaskStatus.PIPELINED:
            self.arrays.pipelined[node.idx] -= task.resreq
            self.placement.touch(node.idx)
            node.tasks.pop(task.uid, None)
            node.used_ports.difference_update(task.host_ports)
        else:
            self._occupy(task, node, -1)
        self.set_status(task, TaskStatus.PENDING)
        task.node = None
        self.fire_deallocate(task)

    def release(self, task: Task) -> TaskStatus:
        """A running/bound task starts releasing (eviction); returns the previous status."""
        node = self.node_by_name[task.node or ""]
        previous = task.status
        self.arrays.releasing[node.idx] += task.resreq
        self.placement.touch(node.idx)
        self.set_status(task, TaskStatus.RELEASING)
        self.fire_deallocate(task)
        return previous

    def unrelease(self, task: Task, previous: TaskStatus) -> None:
        node = self.node_by_name[task.node or ""]
        self.arrays.releasing[node.idx] -= task.resreq
        self.placement.touch(node.idx)
        self.set_status(task, previous)
        self.fire_allocate(task)

    # ---- placement (extender/engine/placement.py) -------------------------------------------------------------
    def feasible(self, task: Task) -> tuple[Mask, Mask]:
        """(fits FutureIdle and passes predicates, fits Idle) over all nodes."""
        return self.placement.feasible(task)

    def best_node(self, task: Task, candidates: Mask) -> Node:
        """The highest-scoring node among `candidates`; ties go to the lowest node name."""
        return self.placement.best_node(task, candidates)

    def choose(self, task: Task) -> tuple[Node, bool] | None:
        """The best node with idle room (True: allocate there), else the best node whose room is being released
        (False: pipeline there), else None."""
        return self.placement.choose(task)

    def scores(self, task: Task, idx: Index) -> Scores:
        return self.placement.scores(task, idx)

    def static_mask(self, task: Task) -> Mask:
        """Nodes the static predicates (selector, affinity, taints, unschedulable) accept: what no eviction can
        change, so preempt and reclaim look for victims only there (Volcano's `PredicateForPreemptAction`)."""
        return self.placement.static_mask(task).copy()

    def predicate_node(self, task: Task, node: Node) -> bool:
        """Plugin predicates only (no resource fit), for one node."""
        return self.placement.predicate_node(task, node)

    def fit_error(self, task: Task) -> str:
        """Volcano's FitErrors text for a task no node accepts: `0/N nodes are unavailable: 3 Insufficient cpu.`"""
        return self.placement.fit_error(task)

    # ---- helpers for actions --------------------------------------------------------------------------------
    def queue_of(self, job: Job) -> Queue:
        return self.queues[job.queue]

    def job_of(self, task: Task) -> Job:
        return self.jobs[task.job]

    def allocated_tasks(self, job: Job) -> Iterable[Task]:
        return (t for t in job.tasks.values() if t.status in ALLOCATED_STATUS)

    def set_condition(self, job: Job, kind: str, reason: str, message: str) -> None:
        """Record this session's PodGroup condition (`Unschedulable` or `Scheduled`) for `job`."""
        self.conditions[job.uid] = (kind, reason, message)

    def job_fit_error(self, job: Job) -> str:
        """Volcano's `JobInfo.FitError`: a histogram of task statuses, then why pending tasks did not fit."""
        statuses: dict[str, int] = {"minAvailable": job.min_member}
        for task in job.tasks.values():
            label = task.status.label()
            statuses[label] = statuses.get(label, 0) + 1
        text = "pod group is not ready, " + ", ".join(sorted(f"{n} {s}" for s, n in statuses.items()))
        if job.job_fit_error:
            return f"{text}; {job.job_fit_error}"
        pending = [t for t in job.tasks.values() if t.status is TaskStatus.PENDING]
        if pending:
            text += f"; Pending: {len(pending)} Unschedulable"
            errors = dict.fromkeys(job.fit_errors[t.uid] for t in pending if t.uid in job.fit_errors)
            if errors:
                text += " (" + " ".join(errors) + ")"
        return text

    def close(self) -> None:
        for _, _, plugin in self.plugins:
            plugin.on_session_close(self)


__all__ = [
    "ABSTAIN",
    "PERMIT",
    "REJECT",
    "EventHandler",
    "Index",
    "Mask",
    "Predicate",
    "QueueReport",
    "Scorer",
    "Session",
]
