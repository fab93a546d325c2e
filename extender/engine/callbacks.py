"""The plugins' callbacks by kind and how the session combines them (Volcano's `framework/session_plugins.go`).

Plugins register callbacks while the session opens, one typed `add_*` method per kind (as Volcano's
`ssn.AddJobOrderFn(name, fn)`); a conf entry's `enableXxx: false` drops that plugin's callbacks of that kind.
`Callbacks` keeps each kind in a typed `Slot` by tier and answers the actions' questions: orders (comparators, or one
sort key when every plugin of a kind defines its order by a key), job and queue votes (tier by tier where Volcano
does so), victim selection, and allocate/deallocate events. A `SessionProbe`, when given, is told of the votes
an explanation names; only a vote's refusing path pays for asking whether there is one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Generic, TypeVar

import numpy as np

from extender.engine.conf import PluginOption, SchedulerConf
from extender.engine.interface import (
    PERMIT,
    REJECT,
    EventHandler,
    EvictableFn,
    EvictionContext,
    HyperNodeGradientFn,
    HyperNodeOrderFn,
    Index,
    JobEnqueuedFn,
    JobPredicateFn,
    JobValidFn,
    JobVoteFn,
    KeyedOrder,
    KeyValue,
    NodeBonus,
    NodeLocal,
    OrderFn,
    Plugin,
    Predicate,
    QueuePredicateFn,
    QueueTaskFn,
    Scorer,
    Scores,
    SessionProbe,
    SessionView,
    SortKey,
    SubJobPredicateFn,
    SubJobVoteFn,
    TaskEventFn,
    ValidateResult,
    VictimQueueOrderFn,
    VictimsFn,
)
from extender.engine.model import Job, Queue, SubJob, Task

F = TypeVar("F")
T = TypeVar("T")


@dataclass(slots=True)
class Slot(Generic[F]):
    """The callbacks of one kind, by plugin, in conf order; `flag` is the conf flag that switches the kind off
    (None: always on, as in Volcano)."""

    flag: str | None
    entries: list[tuple[int, str, F]] = field(default_factory=list)  # (tier, plugin, callback)
    _all: list[F] | None = None
    _tiers: list[list[F]] | None = None

    def add(self, tier: int, option: PluginOption, fn: F) -> None:
        if self.flag is not None and not option.enabled(self.flag):
            return
        # A plugin registering a kind twice replaces its first callback (Volcano keeps one per plugin name).
        self.entries = [e for e in self.entries if e[1] != option.name] + [(tier, option.name, fn)]
        self.entries.sort(key=lambda e: e[0])  # stable: conf order within a tier
        self._all = self._tiers = None

    def all(self) -> list[F]:
        if self._all is None:
            self._all = [fn for _, _, fn in self.entries]
        return self._all

    def by_tier(self, tiers: int) -> list[list[F]]:
        if self._tiers is None:
            grouped: list[list[F]] = [[] for _ in range(tiers)]
            for tier, _, fn in self.entries:
                grouped[tier].append(fn)
            self._tiers = grouped
        return self._tiers

    def __bool__(self) -> bool:
        return bool(self.entries)


def _chain_keys(keys: list[Callable[[T], KeyValue]], *tail: str) -> Callable[[T], SortKey]:
    """(k1(x), k2(x), …, x.tail…): the plugins' keys in tier order, then the built-in tie-break's attributes.
    Keys are made for every task and job and for every queue on every turn, so the tie-break is an `attrgetter`
    (no Python frame of its own) and a lone plugin key (tasks', queues') is called without a loop."""
    rest = attrgetter(*tail)
    if not keys:
        return rest  # type: ignore[no-any-return]  # several names: attrgetter returns their tuple
    if len(keys) == 1:
        (first,) = keys
        return lambda item: (first(item), *rest(item))
    return lambda item: (*[key(item) for key in keys], *rest(item))


def _plugin_keys(fns: list[OrderFn[T]]) -> list[Callable[[T], KeyValue]] | None:
    keys = []
    for fn in fns:
        if not isinstance(fn, KeyedOrder):
            return None
        keys.append(fn.key)
    return keys


def _compare(fns: list[OrderFn[T]], left: T, right: T) -> int:
    for fn in fns:
        result = fn(left, right)
        if result != 0:
            return result
    return 0


class Callbacks:
    """The session's side that plugins plug into (`Session` builds on it)."""

    def __init__(self, conf: SchedulerConf, probe: SessionProbe | None = None) -> None:
        self.conf = conf
        self.probe = probe
        self.job_orders: Slot[OrderFn[Job]] = Slot("enableJobOrder")
        self.queue_orders: Slot[OrderFn[Queue]] = Slot("enableQueueOrder")
        self.victim_queue_orders: Slot[VictimQueueOrderFn] = Slot("enableQueueOrder")
        self.task_orders: Slot[OrderFn[Task]] = Slot("enableTaskOrder")
        self.job_readies: Slot[JobPredicateFn] = Slot("enableJobReady")
        self.job_pipelineds: Slot[JobVoteFn] = Slot("enableJobPipelined")
        self.job_valids: Slot[JobValidFn] = Slot(None)
        self.job_starvings: Slot[JobPredicateFn] = Slot("enableJobStarving")
        self.job_enqueueables: Slot[JobVoteFn] = Slot("enableJobEnqueued")
        self.job_enqueueds: Slot[JobEnqueuedFn] = Slot("enableJobEnqueued")
        self.preemptables: Slot[VictimsFn] = Slot("enablePreemptable")
        self.reclaimables: Slot[VictimsFn] = Slot("enableReclaimable")
        # Volcano's UnifiedEvictable has no conf flag; guards apply whatever tier decides (see `evictable`).
        self.evictables: Slot[EvictableFn] = Slot(None)
        self.evict_guards: Slot[EvictableFn] = Slot(None)
        self.overuseds: Slot[QueuePredicateFn] = Slot("enabledOverused")
        self.allocatables: Slot[QueueTaskFn] = Slot("enabledAllocatable")
        self.preemptives: Slot[QueueTaskFn] = Slot("enablePreemptive")
        self.predicates: Slot[Predicate] = Slot("enablePredicate")
        self.node_orders: Slot[Scorer] = Slot("enableNodeOrder")
        self.node_bonuses: Slot[NodeBonus] = Slot("enableNodeOrder")
        self.subjob_readies: Slot[SubJobPredicateFn] = Slot("enabledSubJobReady")
        self.subjob_pipelineds: Slot[SubJobVoteFn] = Slot("enabledSubJobPipelined")
        self.subjob_orders: Slot[OrderFn[SubJob]] = Slot("enabledSubJobOrder")
        self.job_gradients: Slot[HyperNodeGradientFn[Job]] = Slot("enabledHyperNodeGradient")
        self.subjob_gradients: Slot[HyperNodeGradientFn[SubJob]] = Slot("enabledHyperNodeGradient")
        self.hypernode_orders: Slot[HyperNodeOrderFn] = Slot("enabledHyperNodeOrder")
        # Its plugin reads enablePredicate / enableNodeOrder itself: one callback both filters and scores.
        self.node_locals: Slot[NodeLocal] = Slot(None)
        self._on_allocate: list[TaskEventFn] = []
        self._on_deallocate: list[TaskEventFn] = []
        self.plugins: list[tuple[int, PluginOption, Plugin]] = []
        self._current: PluginOption | None = None
        self._current_tier = 0
        self._ready_fns: list[JobPredicateFn] = []
        # `task_key`'s two chains (with and without the replica index), made once for the TaskOrder list they
        # were made from: allocate asks on every job turn.
        self._task_keys: tuple[list[OrderFn[Task]], tuple[Callable[[Task], SortKey], ...] | None] | None = None
        self._allocatable_fns: list[QueueTaskFn] = []

    def _open_plugins(self, ssn: SessionView) -> None:
        for ti, tier in enumerate(self.conf.tiers):
            for option in tier.plugins:
                self.plugins.append((ti, option, option.build()))
        for ti, option, plugin in self.plugins:
            self._current, self._current_tier = option, ti
            plugin.on_session_open(ssn)
        self._current = None
        # Callbacks are registered only while plugins open; the per-task votes keep their lists at hand.
        self._ready_fns = self.job_readies.all()
        self._allocatable_fns = self.allocatables.all()

    # ---- registration (only from on_session_open) ----------------------------------------------------------
    def _add(self, slot: Slot[F], fn: F) -> None:
        if self._current is None:
            raise RuntimeError("callbacks are registered from on_session_open")
        slot.add(self._current_tier, self._current, fn)

    def add_job_order(self, fn: OrderFn[Job]) -> None:
        self._add(self.job_orders, fn)

    def add_queue_order(self, fn: OrderFn[Queue]) -> None:
        self._add(self.queue_orders, fn)

    def add_victim_queue_order(self, fn: VictimQueueOrderFn) -> None:
        self._add(self.victim_queue_orders, fn)

    def add_task_order(self, fn: OrderFn[Task]) -> None:
        self._add(self.task_orders, fn)

    def add_job_ready(self, fn: JobPredicateFn) -> None:
        self._add(self.job_readies, fn)

    def add_job_pipelined(self, fn: JobVoteFn) -> None:
        self._add(self.job_pipelineds, fn)

    def add_job_valid(self, fn: JobValidFn) -> None:
        self._add(self.job_valids, fn)

    def add_job_starving(self, fn: JobPredicateFn) -> None:
        self._add(self.job_starvings, fn)

    def add_job_enqueueable(self, fn: JobVoteFn) -> None:
        self._add(self.job_enqueueables, fn)

    def add_job_enqueued(self, fn: JobEnqueuedFn) -> None:
        self._add(self.job_enqueueds, fn)

    def add_preemptable(self, fn: VictimsFn) -> None:
        self._add(self.preemptables, fn)

    def add_reclaimable(self, fn: VictimsFn) -> None:
        self._add(self.reclaimables, fn)

    def add_evictable(self, fn: EvictableFn, *, guard: bool = False) -> None:
        self._add(self.evict_guards if guard else self.evictables, fn)

    def add_overused(self, fn: QueuePredicateFn) -> None:
        self._add(self.overuseds, fn)

    def add_allocatable(self, fn: QueueTaskFn) -> None:
        self._add(self.allocatables, fn)

    def add_preemptive(self, fn: QueueTaskFn) -> None:
        self._add(self.preemptives, fn)

    def add_predicate(self, fn: Predicate) -> None:
        self._add(self.predicates, fn)

    def add_node_order(self, fn: Scorer) -> None:
        self._add(self.node_orders, fn)

    def add_node_bonus(self, fn: NodeBonus) -> None:
        self._add(self.node_bonuses, fn)

    def add_subjob_ready(self, fn: SubJobPredicateFn) -> None:
        self._add(self.subjob_readies, fn)

    def add_subjob_pipelined(self, fn: SubJobVoteFn) -> None:
        self._add(self.subjob_pipelineds, fn)

    def add_subjob_order(self, fn: OrderFn[SubJob]) -> None:
        self._add(self.subjob_orders, fn)

    def add_hypernode_gradient_for_job(self, fn: HyperNodeGradientFn[Job]) -> None:
        self._add(self.job_gradients, fn)

    def add_hypernode_gradient_for_subjob(self, fn: HyperNodeGradientFn[SubJob]) -> None:
        self._add(self.subjob_gradients, fn)

    def add_hypernode_order(self, fn: HyperNodeOrderFn) -> None:
        self._add(self.hypernode_orders, fn)
    def add_node_local(self, fn: NodeLocal) -> None:
        self._add(self.node_locals, fn)

    def add_event_handler(self, handler: EventHandler) -> None:
        if handler.allocate is not None:
            self._on_allocate.append(handler.allocate)
        if handler.deallocate is not None:
            self._on_deallocate.append(handler.deallocate)

    def plugin(self, name: str) -> Plugin | None:
        """The open plugin of that name (the first, should the conf list it twice), if the conf has it."""
        for _, option, instance in self.plugins:
            if option.name == name:
                return instance
        return None

    def current_flags(self) -> Mapping[str, bool]:
        """The conf flags of the plugin being opened (e.g. `enableHierarchy`)."""
        if self._current is None:
            raise RuntimeError("only valid from on_session_open")
        return self._current.flags

    # ---- orders ---------------------------------------------------------------------------------------------
    def job_key(self) -> Callable[[Job], SortKey] | None:
        """A sort key equivalent to `job_order`, or None when some JobOrder callback is a plain comparator. Keys
        read the job's state when they are computed: use them only while the jobs being ordered do not change."""
        keys = _plugin_keys(self.job_orders.all())
        return None if keys is None else _chain_keys(keys, "creation", "uid")

    def queue_key(self) -> Callable[[Queue], SortKey] | None:
        """A sort key equivalent to `queue_order` (see `job_key`)."""
        keys = _plugin_keys(self.queue_orders.all())
        return None if keys is None else _chain_keys(keys, "creation", "uid")

    def task_key(self, tasks: list[Task]) -> Callable[[Task], SortKey] | None:
        """A sort key equivalent to `task_order` over `tasks` (see `job_key`). The replica-index tie-break is a
        total order only when all of the tasks have an index or none has; otherwise there is no key."""
        fns = self.task_orders.all()
        if self._task_keys is None or self._task_keys[0] is not fns:  # a plugin added one since: make them again
            keys = _plugin_keys(fns)
            self._task_keys = (fns, None if keys is None else (
                _chain_keys(keys, "index", "creation", "uid"),
                _chain_keys(keys, "creation", "uid")))
        chains = self._task_keys[1]
        indexed = sum([t.index is not None for t in tasks])
        if chains is None or 0 < indexed < len(tasks):
            return None
        return chains[0] if indexed else chains[1]

    def job_order(self, left: Job, right: Job) -> int:
        result = _compare(self.job_orders.all(), left, right)
        if result:
            return result
        if left.creation != right.creation:
            return -1 if left.creation < right.creation else 1
        return (left.uid > right.uid) - (left.uid < right.uid)

    def queue_order(self, left: Queue, right: Queue) -> int:
        result = _compare(self.queue_orders.all(), left, right)
        if result:
            return result
        if left.creation != right.creation:
            return -1 if left.creation < right.creation else 1
        return (left.uid > right.uid) - (left.uid < right.uid)

    def victim_queue_order(self, left: Queue, right: Queue, preemptor: Queue) -> int:
        for fn in self.victim_queue_orders.all():
            result = fn(left, right, preemptor)
            if result:
                return result
        return -self.queue_order(left, right)

    def task_order(self, left: Task, right: Task) -> int:
        result = _compare(self.task_orders.all(), left, right)
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
        for fn in self.job_valids.all():
            result = fn(job)
            if result is not None and not result.passed:
                return result
        return None

    def job_ready(self, job: Job) -> bool:
        for fn in self._ready_fns:  # noqa: SIM110 (a generator costs more; this runs per placement)
            if not fn(job):
                return False
        return True

    def ready_vote(self) -> Callable[[Job], bool]:
        """`job_ready` as a callable, the only JobReady callback itself when there is one (gang's, usually):
        allocate asks after every placement, and a frame less there is ~1 % of a large session."""
        fns = self._ready_fns
        return fns[0] if len(fns) == 1 else self.job_ready

    def _vote(self, slot: Slot[JobVoteFn] | Slot[SubJobVoteFn], target: Job | SubJob) -> bool:
        for tier in slot.by_tier(len(self.conf.tiers)):
            permitted = False
            for fn in tier:
                vote = fn(target)  # type: ignore[arg-type]  # each slot's callbacks take its own target
                if vote == REJECT:
                    return False
                if vote == PERMIT:
                    permitted = True
            if permitted:
                return True
        return True

    def job_pipelined(self, job: Job) -> bool:
        return self._vote(self.job_pipelineds, job)

    def job_enqueueable(self, job: Job) -> bool:
        if self.probe is None:
            return self._vote(self.job_enqueueables, job)
        self.probe.enqueue_asked(job)
        admitted = self._vote(self.job_enqueueables, job)
        self.probe.enqueue_answered(job, admitted)
        return admitted

    def job_enqueued(self, job: Job) -> None:
        for fn in self.job_enqueueds.all():
            fn(job)

    def job_starving(self, job: Job) -> bool:
        for tier in self.job_starvings.by_tier(len(self.conf.tiers)):
            if tier:
                return all(fn(job) for fn in tier)
        return False

    # ---- sub-gangs (Volcano's SubJobReady / SubJobPipelined / SubJobOrderFn) ----------------------------------
    def subjob_ready(self, job: Job, subjob: SubJob) -> bool:
        """A job without a subGroupPolicy has one sub-gang, ready when the job is."""
        if not job.has_policy:
            return self.job_ready(job)
        return all(fn(subjob) for fn in self.subjob_readies.all())

    def subjob_pipelined(self, job: Job, subjob: SubJob) -> bool:
        if not job.has_policy:
            return self.job_pipelined(job)
        return self._vote(self.subjob_pipelineds, subjob)

    def subjob_order(self, left: SubJob, right: SubJob) -> int:
        result = _compare(self.subjob_orders.all(), left, right)
        if result:
            return result
        if left.match_index != right.match_index:
            return -1 if left.match_index < right.match_index else 1
        return (left.uid > right.uid) - (left.uid < right.uid)

    # ---- HyperNodes (Volcano's HyperNodeGradientFor{Job,SubJob}Fn, HyperNodeOrderMapFn) ---------------------------
    def hypernode_gradients_for_job(self, job: Job, root: str, purpose: str) -> list[list[str]]:
        """The first plugin's gradients (in tier order); without one, `root` alone."""
        fns = self.job_gradients.all()
        return fns[0](job, root, purpose) if fns else [[root]]

    def hypernode_gradients_for_subjob(self, subjob: SubJob, root: str, purpose: str) -> list[list[str]]:
        fns = self.subjob_gradients.all()
        return fns[0](subjob, root, purpose) if fns else [[root]]

    def hypernode_score_array(self, subjob: SubJob, hypernodes: Index) -> Scores:
        """Every plugin's HyperNode scores summed (0 where none scores), HyperNodes by index."""
        total = np.zeros(len(hypernodes))
        for fn in self.hypernode_orders.all():
            total += fn(subjob, hypernodes)
        return total

    # ---- queue votes ----------------------------------------------------------------------------------------
    def overused(self, queue: Queue) -> bool:
        for fn in self.overuseds.all():
            if fn(queue):
                if self.probe is not None:
                    self.probe.queue_overused(queue)
                return True
        return False

    def allocatable(self, queue: Queue, task: Task) -> bool:
        for fn in self._allocatable_fns:
            if not fn(queue, task):
                if self.probe is not None:
                    self.probe.task_refused(queue, task)
                return False
        return True

    def allocatable_vote(self) -> Callable[[Queue, Task], bool]:
        """`allocatable` as a callable, the only Allocatable callback itself when there is one and no probe
        listens (see `ready_vote`)."""
        fns = self._allocatable_fns
        return fns[0] if len(fns) == 1 and self.probe is None else self.allocatable

    def preemptive(self, queue: Queue, task: Task) -> bool:
        return all(fn(queue, task) for fn in self.preemptives.all())

    def _victims(self, slot: Slot[F], ask: Callable[[F], list[Task] | None],
                 candidates: list[Task]) -> list[Task] | None:
        """Volcano's tier walk: in each tier the plugins that vote intersect their choices; the first tier whose
        intersection is not empty decides (a tier whose votes leave nothing falls through to the next)."""
        for tier in slot.by_tier(len(self.conf.tiers)):
            chosen: dict[str, Task] | None = None
            abstained = True
            for fn in tier:
                result = ask(fn)
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
        return self._victims(self.preemptables, lambda fn: fn(preemptor, candidates), candidates)

    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> list[Task] | None:
        return self._victims(self.reclaimables, lambda fn: fn(reclaimer, candidates), candidates)

    def evictable(self, ctx: EvictionContext, candidates: list[Task]) -> list[Task]:
        """Volcano's `UnifiedEvictable` (gangpreempt, gangreclaim): the tier walk over the plugins' votes on the
        whole ordered candidate list at once, then every guard's vote (the queue-share plugins' reclaim check,
        which Volcano's walk skips whenever a first tier that permits everything decides)."""
        chosen = self._victims(self.evictables, lambda fn: fn(ctx, candidates), candidates) or []
        for guard in self.evict_guards.all():
            allowed = guard(ctx, chosen)
            if allowed is not None:
                keep = {t.uid for t in allowed}
                chosen = [t for t in chosen if t.uid in keep]
        return chosen

    # ---- events ---------------------------------------------------------------------------------------------
    def fire_allocate(self, task: Task) -> None:
        for allocate in self._on_allocate:
            allocate(task)

    def fire_deallocate(self, task: Task) -> None:
        for deallocate in self._on_deallocate:
            deallocate(task)
