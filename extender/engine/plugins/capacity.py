"""capacity: queues with an explicit `spec.deserved`, flat or as a tree (Volcano's `plugins/capacity/capacity.go`).

Allocation is limited by each queue's realCapability (for the queue and, with `enableHierarchy: true`, every
ancestor); deserved only matters for reclaim: a queue may reclaim while it is below deserved on a dimension it
requests, and loses tasks only on dimensions where it holds more than deserved (never below its guarantee).
QueueOrder: higher `spec.priority`, then lower share (allocated/deserved), then queues that have a deserved before
best-effort ones; in a tree, leaves first and siblings by the share of their ancestors where the paths part. Jobs
are enqueued while minResources + allocated + inqueue − elastic fits realCapability. Like upstream, capacity
registers no Overused function. The queue accounting lives in `capacity_queues`.

Arguments: `ancestorReclaimLevel` (default 0): with a hierarchy, also let ancestors up to that many levels decide
whether a queue may reclaim, and spare victims whose ancestors there are not above deserved.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from extender.engine.arguments import Arguments, integer
from extender.engine.interface import (
    PERMIT,
    REJECT,
    EventHandler,
    EvictionContext,
    EvictionKind,
    QueueReport,
    SessionView,
    Vote,
)
from extender.engine.model import Job, Queue, Task
from extender.engine.plugins.capacity_queues import ROOT, QueueAttr, build_flat, build_tree, update_share
from extender.engine.registry import register_plugin
from extender.engine.victims import victim_order
from lapilli.resources.vector import CPU, MEMORY, TOLERANCE, Vec, is_empty, less_equal, less_equal_on

Mask = npt.NDArray[np.bool_]
QUOTA_MESSAGE = "queue resource quota insufficient"


@dataclass(frozen=True, slots=True)
class CapacityArgs:
    ancestor_level: int = 0


def parse_arguments(arguments: Arguments) -> CapacityArgs:
    # Volcano warns and falls back to 0 for a negative level.
    return CapacityArgs(ancestor_level=max(integer(arguments, "ancestorReclaimLevel", 0), 0))


class CapacityPlugin:
    name = "capacity"

    def __init__(self, args: CapacityArgs) -> None:
        self.ancestor_level = args.ancestor_level
        self.hierarchy = False
        self.ready = True
        self.attrs: dict[str, QueueAttr] = {}
        # PodGroup events this plugin raised (job uid → message).
        self.rejected: dict[str, str] = {}
        self._pods = 0
        self._cpu_mem: list[int] = []
        self._jobs: Mapping[str, Job] = {}

    # ---- opening --------------------------------------------------------------------------------------------
    def on_session_open(self, ssn: SessionView) -> None:
        # enableHierarchy is off unless written (Volcano does not default it to true).
        self.hierarchy = bool(ssn.current_flags().get("enableHierarchy", False))
        self._pods = ssn.dims.pods
        self._cpu_mem = [ssn.dims.index[CPU], ssn.dims.index[MEMORY]]
        if self.hierarchy:
            self.attrs, self.ready = build_tree(ssn)
        else:
            self.attrs, self.ready = build_flat(ssn), True
        ssn.add_reclaimable(lambda reclaimer, reclaimees: self._reclaimable(ssn, reclaimer, reclaimees))
        ssn.add_evictable(lambda ctx, candidates: self._evictable(ssn, ctx, candidates), guard=True)
        ssn.add_preemptive(self._preemptive)
        ssn.add_allocatable(self._allocatable)
        ssn.add_job_enqueueable(lambda job: self._enqueueable(ssn, job))
        ssn.add_job_enqueued(self._enqueued)
        if self.ready:
            ssn.add_queue_order(self._queue_order)
            if self.hierarchy:
                ssn.add_victim_queue_order(self._victim_queue_order)
        ssn.add_event_handler(EventHandler(allocate=self._on_allocate, deallocate=self._on_deallocate))
        self._jobs = ssn.jobs

    def _chain(self, attr: QueueAttr) -> list[QueueAttr]:
        """The queue, then its ancestors up to root (only the queue without a hierarchy)."""
        return [attr, *(self.attrs[a] for a in reversed(attr.ancestors))]

    # ---- queue order ----------------------------------------------------------------------------------------
    def _by_share(self, left: QueueAttr, right: QueueAttr) -> int:
        if left.share == right.share:
            left_has, right_has = not is_empty(left.deserved, self._pods), not is_empty(right.deserved, self._pods)
            return 0 if left_has == right_has else (-1 if left_has else 1)
        return -1 if left.share < right.share else 1

    def _queue_order(self, left: Queue, right: Queue) -> int:
        if left.priority != right.priority:
            return right.priority - left.priority
        la, ra = self.attrs.get(left.name), self.attrs.get(right.name)
        if la is None or ra is None:
            return 0
        if not self.hierarchy:
            return self._by_share(la, ra)
        if la.is_leaf != ra.is_leaf:
            return -1 if la.is_leaf else 1
        if not la.is_leaf:
            return self._by_share(la, ra)
        # Two leaves: compare the ancestors just below the deepest common one.
        level = _common_level(la, ra)
        lp = la.ancestors[level + 1] if level + 1 < len(la.ancestors) else la.name
        rp = ra.ancestors[level + 1] if level + 1 < len(ra.ancestors) else ra.name
        return self._by_share(self.attrs[lp], self.attrs[rp])

    def _victim_queue_order(self, left: Queue, right: Queue, preemptor: Queue) -> int:
        """Victims from queues closer to the preemptor's in the tree go first."""
        pa = self.attrs[preemptor.name]
        ll, rl = _common_level(self.attrs[left.name], pa), _common_level(self.attrs[right.name], pa)
        return 0 if ll == rl else (-1 if ll > rl else 1)

    # ---- quota votes ----------------------------------------------------------------------------------------
    def _allocatable(self, queue: Queue, task: Task) -> bool:
        if queue.state != "Open" or not self.ready:
            return False
        attr = self.attrs.get(queue.name)
        if attr is None:
            return True
        if self.hierarchy and not attr.is_leaf:
            return False
        return all(
            less_equal_on(a.allocated + task.resreq, a.real_capability, task.resreq, self._pods)
            for a in self._chain(attr)
        )

    def _preemptive(self, queue: Queue, task: Task) -> bool:
        if not self.ready or queue.state != "Open":
            return False
        attr = self.attrs.get(queue.name)
        if attr is None:
            return False
        future = attr.allocated + task.resreq
        if not less_equal_on(future, attr.real_capability, task.resreq, self._pods):
            return False
        # One requested dimension still at or below deserved is enough to reclaim (the opposite of Overused).
        if _partly_at_most(future, attr.deserved, task.resreq, self._pods):
            return True
        if self.hierarchy:
            for level in range(1, self.ancestor_level + 1):
                ancestor = _ancestor_at(attr, level)
                if ancestor is None or ancestor == ROOT:
                    continue
                a = self.attrs[ancestor]
                if _partly_at_most(a.allocated + task.resreq, a.deserved, task.resreq, self._pods):
                    return True
        return False

    def _enqueueable(self, ssn: SessionView, job: Job) -> Vote:
        if not self.ready:
            return REJECT
        attr = self.attrs.get(job.queue)
        if attr is None or (self.hierarchy and not attr.is_leaf):
            return REJECT
        if ssn.queues[job.queue].state != "Open":
            return REJECT
        minimum = job.min_resources
        if minimum is None:
            return PERMIT
        for a in self._chain(attr):
            wanted = minimum + a.allocated + a.inqueue - a.elastic
            mask = (minimum > 0) & (wanted > a.real_capability)
            mask[self._pods] = False
            if mask.any():
                names = ", ".join(f"insufficient {ssn.dims.names[int(i)]}" for i in np.flatnonzero(mask))
                message = f"{QUOTA_MESSAGE}: {names}"
                self.rejected[job.uid] = message
                ssn.record_event(job.uid, "Normal", "Unschedulable", message)
                return REJECT
        return PERMIT

    def _enqueued(self, job: Job) -> None:
        attr = self.attrs.get(job.queue)
        if attr is None or job.min_resources is None:
            return
        for a in self._chain(attr):
            a.inqueue = a.inqueue + job.min_resources

    # ---- reclaim victims ------------------------------------------------------------------------------------
    def _reclaimable(self, ssn: SessionView, reclaimer: Task, reclaimees: list[Task]) -> list[Task]:
        return self._reclaim_victims(ssn, reclaimer, victim_order(ssn, reclaimees, reclaimer))

    def _evictable(self, ssn: SessionView, ctx: EvictionContext, candidates: list[Task]) -> list[Task] | None:
        """gangreclaim: the reclaim check over the candidates in the order given (whole gangs and surplus members,
        least important first), once for the whole list, as Volcano's UnifiedEvictable asks it; a guard, so a
        queue within its deserved share never loses a gang whatever tier decides."""
        if ctx.kind is not EvictionKind.GANG_RECLAIM:
            return None  # capacity does not judge preemption inside a queue
        return self._reclaim_victims(ssn, ctx.actor, candidates)

    def _reclaim_victims(self, ssn: SessionView, reclaimer: Task, ordered: list[Task]) -> list[Task]:
        reclaimer_job = ssn.jobs.get(reclaimer.job)
        reclaimer_attr = self.attrs.get(reclaimer_job.queue) if reclaimer_job is not None else None
        if not self.ready or reclaimer_attr is None:
            return []
        allocations: dict[str, Vec] = {}
        victims: list[Task] = []
        for reclaimee in ordered:
            job = ssn.jobs.get(reclaimee.job)
            attr = self.attrs.get(job.queue) if job is not None else None
            # A reclaimee sharing no resource with the reclaimer frees nothing it needs.
            if attr is None or not _intersects(reclaimee.resreq, reclaimer.resreq, self._pods):
                continue
            allocated = allocations.setdefault(attr.name, attr.allocated.copy())
            if not less_equal(attr.guarantee, allocated - reclaimee.resreq):
                continue
            if not self._victim_of(attr, allocated, reclaimee, reclaimer_attr, reclaimer):
                continue
            ancestor_allocs = self._ancestors_allow(reclaimer_attr, attr, reclaimee, allocations)
            if ancestor_allocs is None:
                continue
            for held in [allocated, *ancestor_allocs]:
                held -= reclaimee.resreq
            victims.append(reclaimee)
        return victims

    def _ancestors_allow(
        self, reclaimer_attr: QueueAttr, attr: QueueAttr, reclaimee: Task, allocations: dict[str, Vec]
    ) -> list[Vec] | None:
        """With ancestorReclaimLevel, the reclaimee's ancestors that must also hold more than deserved: their
        running allocations when all agree, None when one refuses (or is unknown)."""
        ancestors = self._ancestors_to_check(reclaimer_attr, attr)
        if ancestors is None:
            return None
        held: list[Vec] = []
        for ancestor in ancestors:
            ancestor_alloc = allocations.setdefault(ancestor.name, ancestor.allocated.copy())
            relevant = _intersects(reclaimee.resreq, ancestor.deserved, None)
            if relevant and not self._exceeds(ancestor_alloc, ancestor.deserved, reclaimee.resreq):
                return None
            held.append(ancestor_alloc)
        return held

    def _victim_of(
        self, attr: QueueAttr, allocated: Vec, reclaimee: Task, reclaimer_attr: QueueAttr, reclaimer: Task
    ) -> bool:
        if not _intersects(reclaimee.resreq, attr.deserved, None):
            # An "immediate victim": its queue is owed nothing of what it uses. With ancestor-level reclaim it is
            # still spared when both leaves sit under a common ancestor and neither is owed what is requested.
            if self.hierarchy and self.ancestor_level > 0 and self._share_ancestor(reclaimer_attr, attr):
                return _intersects(reclaimer.resreq, reclaimer_attr.deserved, None)
            return True
        return self._exceeds(allocated, attr.deserved, reclaimee.resreq)

    def _exceeds(self, allocated: Vec, deserved: Vec, request: Vec) -> bool:
        """Volcano's `GreaterPartlyWithRelevantDimensions`: allocated > deserved on a requested dimension that
        deserved defines (cpu/memory ≥ 0.1, other resources > 0; `pods` ignored)."""
        defined = deserved > 0
        defined[self._cpu_mem] = deserved[self._cpu_mem] >= TOLERANCE
        mask = (request > 0) & defined
        mask[self._pods] = False
        return bool(np.any(allocated[mask] > deserved[mask]))

    def _ancestors_to_check(self, reclaimer_attr: QueueAttr, attr: QueueAttr) -> list[QueueAttr] | None:
        """The reclaimee's ancestors (≤ ancestorReclaimLevel up, not root, not shared with the reclaimer at that
        level) that must also be above deserved; None when one of them is unknown."""
        if not self.hierarchy or self.ancestor_level <= 0:
            return []
        out: list[QueueAttr] = []
        for level in range(1, self.ancestor_level + 1):
            mine = _ancestor_at(attr, level)
            if mine is None or mine == ROOT or _ancestor_at(reclaimer_attr, level) == mine:
                continue
            if mine not in self.attrs:
                return None
            out.append(self.attrs[mine])
        return out

    def _share_ancestor(self, left: QueueAttr, right: QueueAttr) -> bool:
        levels = range(1, self.ancestor_level + 1)
        mine = {_ancestor_at(left, lv) for lv in levels} - {None, ROOT}
        theirs = {_ancestor_at(right, lv) for lv in levels} - {None, ROOT}
        return bool(mine & theirs)

    # ---- events and close -----------------------------------------------------------------------------------
    def _shift(self, task: Task, sign: float) -> None:
        job = self._jobs.get(task.job)
        attr = self.attrs.get(job.queue) if job is not None else None
        if attr is None:
            return
        attr.allocated += task.resreq * sign
        update_share(attr, self._pods)
        # Upstream moves the ancestors' allocation too but leaves their share as computed at open.
        if self.hierarchy:
            for name in attr.ancestors:
                self.attrs[name].allocated += task.resreq * sign

    def _on_allocate(self, task: Task) -> None:
        self._shift(task, 1.0)

    def _on_deallocate(self, task: Task) -> None:
        self._shift(task, -1.0)

    def on_session_close(self, ssn: SessionView) -> None:
        for name in sorted(self.attrs):
            if name in ssn.queues:
                attr = self.attrs[name]
                ssn.queue_reports[name] = QueueReport(deserved=attr.deserved.copy(), share=attr.share)


def _common_level(left: QueueAttr, right: QueueAttr) -> int:
    """Volcano's `getQueueLevel`: index of the deepest ancestor the two paths share (0 = root)."""
    level = 0
    for i in range(min(len(left.ancestors), len(right.ancestors))):
        if left.ancestors[i] != right.ancestors[i]:
            break
        level = i
    return level


def _ancestor_at(attr: QueueAttr, depth: int) -> str | None:
    """The ancestor `depth` levels up (1 = parent)."""
    if depth <= 0 or len(attr.ancestors) < depth:
        return None
    return attr.ancestors[len(attr.ancestors) - depth]


def _intersects(left: Vec, right: Vec, pods: int | None) -> bool:
    """Some resource both use (≥ 0.1); `pods` left out when its index is given."""
    mask: Mask = (left >= TOLERANCE) & (right >= TOLERANCE)
    if pods is not None:
        mask[pods] = False
    return bool(mask.any())


def _partly_at_most(used: Vec, limit: Vec, request: Vec, pods: int) -> bool:
    """Volcano's `LessEqualPartlyWithDimensionZeroFiltered`: on some requested dimension that either side uses,
    used ≤ limit (within 0.1); `pods` ignored."""
    mask = (request > 0) & ~((used < TOLERANCE) & (limit < TOLERANCE))
    mask[pods] = False
    return bool(np.any(used[mask] < limit[mask] + TOLERANCE))


register_plugin("capacity", parse_arguments, CapacityPlugin)
