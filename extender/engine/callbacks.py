"""The plugins' callbacks by kind and how the session combines them (Volcano's `framework/session_plugins.go`).

Plugins register callbacks while the session opens; `Callbacks` keeps them by kind and tier and answers the
actions' questions: orders (comparators, or one sort key when every plugin of a kind defines its order by a key),
job and queue votes (tier by tier where Volcano does so), victim selection, and allocate/deallocate events.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from extender.engine.conf import PluginOption, SchedulerConf
from extender.engine.framework import FLAG_OF, PERMIT, REJECT, Fn, KeyedOrder, Plugin
from extender.engine.model import Job, Queue, Task

if TYPE_CHECKING:
    from extender.engine.session import Session


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
class _Registered:
    tier: int
    option: PluginOption
    fn: Any


def _chain_keys(keys: list[Callable[[Any], Any]], tail: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any], Any]:
    """(k1(x), k2(x), …) + tail(x): the plugins' keys in tier order, then the built-in tie-break."""
    if not keys:
        return tail
    if len(keys) == 1:
        (first,) = keys
        return lambda item: (first(item), *tail(item))
    return lambda item: (*[key(item) for key in keys], *tail(item))


class Callbacks:
    """The session's side that plugins plug into (`Session` builds on it)."""

    def __init__(self, conf: SchedulerConf) -> None:
        self.conf = conf
        self._fns: dict[Fn, dict[str, Any]] = {kind: {} for kind in Fn}
        self._events: list[EventHandler] = []
        self._on_allocate: list[Callable[[Task], None]] = []
        self._on_deallocate: list[Callable[[Task], None]] = []
        self._tier_cache: dict[Fn, list[list[_Registered]]] = {}
        self._all_cache: dict[Fn, list[Any]] = {}
        self.plugins: list[tuple[int, PluginOption, Plugin]] = []
        self._current: PluginOption | None = None
        self._current_tier = 0
        self._ready_fns: list[Any] = []
        self._allocatable_fns: list[Any] = []

    def _open_plugins(self, ssn: Session) -> None:
        for ti, tier in enumerate(self.conf.tiers):
            for option in tier.plugins:
                self.plugins.append((ti, option, option.build()))
        for ti, option, plugin in self.plugins:
            self._current, self._current_tier = option, ti
            plugin.on_session_open(ssn)
        self._current = None
        # Callbacks are registered only while plugins open; the per-task votes keep their lists at hand.
        self._ready_fns = self._all(Fn.JOB_READY)
        self._allocatable_fns = self._all(Fn.ALLOCATABLE)

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
