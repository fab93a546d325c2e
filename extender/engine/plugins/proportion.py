"""proportion: weighted fair share between queues (Volcano's `plugins/proportion/proportion.go`).

With fairshare's `shareWeight` a queue's share counts its allocation plus that weight × its decayed average usage
(`Queue.share_bias`); deserved, overused, allocatable and reclaim keep the allocation alone.

Each queue with jobs gets a `deserved` share by water-filling the cluster total by weight, capped by its real
capability (capability, and what the other queues' guarantees leave) and by what it requests, floored at its
guarantee. A queue is overused once its allocation reaches deserved; a task is allocatable while the queue stays
within deserved on the dimensions the task asks for; reclaim takes from queues above deserved.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from extender.engine.interface import (
    PERMIT,
    REJECT,
    EventHandler,
    EvictionContext,
    EvictionKind,
    KeyedOrder,
    QueueReport,
    SessionView,
    Vote,
)
from extender.engine.model import ALLOCATED_STATUS, Job, Queue, Task, TaskStatus
from extender.engine.registry import register_plain_plugin
from lapilli.resources.vector import (
    TOLERANCE,
    Dims,
    Vec,
    exceeded_part,
    is_empty,
    less_equal,
    less_equal_on,
    sequential_sum,
)


@dataclass(slots=True)
class QueueAttr:
    name: str
    weight: int
    allocated: Vec
    request: Vec
    elastic: Vec
    inqueue: Vec
    guarantee: Vec
    real_capability: Vec
    deserved: Vec
    share: float = 0.0
    stale: bool = False  # allocated changed since share was computed (it is recomputed when next read)
    deserved_list: list[float] = field(default_factory=list)  # deserved as floats, once water-filling is done
    bias: Vec | None = None  # fairshare's shareWeight × average decayed usage, counted into the share only

    def share_of(self, deserved: Vec) -> float:
        held = self.allocated if self.bias is None else self.allocated + self.bias
        return queue_share(held, deserved)

    def current_share(self) -> float:
        if self.stale:
            self.share = self.share_of(self.deserved)
            self.stale = False
        return self.share


def queue_share(allocated: Vec, deserved: Vec) -> float:
    """max over dimensions with deserved ≥ 0.1 of allocated / deserved (0 when there is none)."""
    # Over Python floats: the vectors are a handful of resources, and numpy's per-call cost dominates at that size.
    shares = [a / d for a, d in zip(allocated.tolist(), deserved.tolist(), strict=True) if d >= TOLERANCE]
    return max(shares) if shares else 0.0


def water_fill(attrs: list[QueueAttr], total: Vec, dims: Dims) -> None:
    """Volcano's deserved loop; every queue of a round sees the same `remaining`."""
    remaining = total.copy()
    meet: set[str] = set()
    while True:
        weight = sum(a.weight for a in attrs if a.name not in meet)
        if weight == 0:
            return
        old_remaining = remaining.copy()
        increased = dims.zeros()
        decreased = dims.zeros()
        for attr in attrs:
            if attr.name in meet:
                continue
            old = attr.deserved.copy()
            deserved = old + remaining * (attr.weight / weight)
            deserved = np.minimum(deserved, attr.real_capability)
            deserved = np.minimum(deserved, attr.request)
            deserved = np.maximum(deserved, attr.guarantee)
            attr.deserved = deserved
            attr.share = attr.share_of(deserved)
            if less_equal(attr.request, deserved) or np.array_equal(deserved, old):
                meet.add(attr.name)
            increased += np.maximum(deserved - old, 0.0)
            decreased += np.maximum(old - deserved, 0.0)
        remaining = np.maximum(remaining + decreased - increased, 0.0)
        if is_empty(remaining, dims.pods) or np.array_equal(remaining, old_remaining):
            return


def _non_negative(vec: Vec, known: dict[int, bool]) -> bool:
    """`(vec >= 0).all()`, remembered by the vector's id in `known` (the caller keeps every vector alive)."""
    found = known.get(id(vec))
    if found is None:
        found = known[id(vec)] = bool((vec >= 0).all())
    return found


def elastic(job: Job) -> Vec:
    minimum = job.min_resources if job.min_resources is not None else np.zeros_like(job.allocated)
    return exceeded_part(job.allocated, minimum)


class ProportionPlugin:
    name = "proportion"

    def __init__(self) -> None:
        self.attrs: dict[str, QueueAttr] = {}

    def _build(self, ssn: SessionView) -> None:
        dims, total = ssn.dims, ssn.total
        guarantees = dims.zeros()
        for queue in ssn.queues.values():
            guarantees += queue.guarantee
        free = exceeded_part(total, guarantees)
        # Each queue's allocated and requested resources, task by task in job order (`sequential_sum` adds them).
        allocated: dict[str, list[Vec]] = {}
        requested: dict[str, list[Vec]] = {}
        signs: dict[int, bool] = {}  # `_non_negative` per minResources vector (jobs of one template share one)
        for job in ssn.jobs.values():
            queue = ssn.queues[job.queue]
            attr = self.attrs.get(queue.name)
            if attr is None:
                attr = QueueAttr(
                    name=queue.name,
                    weight=queue.weight,
                    allocated=dims.zeros(),
                    request=dims.zeros(),
                    elastic=dims.zeros(),
                    inqueue=dims.zeros(),
                    guarantee=queue.guarantee.copy(),
                    real_capability=np.minimum(free + queue.guarantee, queue.capability),
                    deserved=dims.zeros(),
                    bias=queue.share_bias,
                )
                self.attrs[queue.name] = attr
                allocated[queue.name], requested[queue.name] = [], []
            held, asked = allocated[queue.name], requested[queue.name]
            if job.counts[TaskStatus.PENDING] == len(job.tasks):  # a gang waiting whole: the same rows, in one pass
                asked += [task.resreq for task in job.tasks.values()]
            else:
                for task in job.tasks.values():
                    if task.status in ALLOCATED_STATUS:
                        held.append(task.resreq)
                        asked.append(task.resreq)
                    elif task.status is TaskStatus.PENDING:
                        asked.append(task.resreq)
            inqueue = job.inqueue_reservation()
            if inqueue is not None:
                attr.inqueue += inqueue
            minimum = job.min_resources
            # A job with no ready task has had nothing added to `allocated` (all zeros) while the session opens.
            if minimum is None or not _non_negative(minimum, signs) or (job.ready and job.allocated.any()):
                attr.elastic += elastic(job)  # else max(0 - minimum, 0) is zero: adding it changes nothing
        for name, attr in self.attrs.items():
            attr.allocated = sequential_sum(attr.allocated, allocated[name])
            attr.request = sequential_sum(attr.request, requested[name])
        ordered = [self.attrs[name] for name in sorted(self.attrs)]
        water_fill(ordered, total, dims)
        for attr in ordered:
            attr.share = attr.share_of(attr.deserved)
            attr.deserved_list = attr.deserved.tolist()

    def on_session_open(self, ssn: SessionView) -> None:
        self._build(ssn)
        pods = ssn.dims.pods
        attrs = self.attrs

        def queue_order(queue: Queue) -> tuple[int, float]:
            # Higher priority, then lower share, first. Asked for every queue on every turn: the share kept since
            # the queue last allocated is read without a call.
            attr = attrs.get(queue.name)
            if attr is None:
                return -queue.priority, 0.0
            return -queue.priority, attr.current_share() if attr.stale else attr.share

        def overused(queue: Queue) -> bool:
            # `less_equal(attr.deserved, attr.allocated)` over Python floats (the same sums and comparisons): asked
            # on every queue turn of allocate.
            attr = attrs.get(queue.name)
            if attr is None:
                return False
            for deserved, allocated in zip(attr.deserved_list, attr.allocated.tolist(), strict=True):
                if not deserved < allocated + TOLERANCE:
                    return False
            return True

        def fits(queue: Queue, request: Vec) -> bool:
            attr = attrs.get(queue.name)
            if attr is None:
                return True
            return less_equal_on(attr.allocated + request, attr.deserved, request, pods)

        # `fits` for a task, on every placement: `less_equal_on` over just the columns the request asks for
        # (> 0, `pods` left out), with the same float sums, without numpy's per-call overhead on 4-element vectors.
        requested: dict[bytes, list[tuple[int, float]]] = {}
        # The last request vector asked about and its columns: a gang's tasks share one vector, so most asks are
        # answered without hashing it.
        last_request: Vec | None = None
        columns: list[tuple[int, float]] = []

        def allocatable(queue: Queue, task: Task) -> bool:
            nonlocal last_request, columns
            if queue.state != "Open":
                return False
            attr = attrs.get(queue.name)
            if attr is None:
                return True
            if task.resreq is not last_request:
                key = task.resreq.tobytes()
                found = requested.get(key)
                if found is None:
                    found = requested[key] = [(d, float(v)) for d, v in enumerate(task.resreq) if v > 0 and d != pods]
                last_request, columns = task.resreq, found
            allocated, deserved = attr.allocated.tolist(), attr.deserved_list
            for d, want in columns:  # noqa: SIM110 (a generator costs more; this runs per task)
                if not allocated[d] + want <= deserved[d]:
                    return False
            return True

        def reclaimable(reclaimer: Task, candidates: list[Task]) -> list[Task]:
            running: dict[str, Vec] = {}
            chosen = []
            for task in candidates:
                attr = attrs[ssn.jobs[task.job].queue]
                allocated = running.setdefault(attr.name, attr.allocated.copy())
                # Volcano's current rule: any task of a queue above its deserved share is a victim, even when that
                # queue alone could not free the whole request (the node's idle room and other queues' victims
                # make up the rest; reclaim_test "Node available resources should be included").
                if not less_equal(allocated, attr.deserved):
                    allocated -= task.resreq
                    chosen.append(task)
            return chosen

        def enqueueable(job: Job) -> Vote:
            queue = ssn.queues[job.queue]
            if queue.state != "Open":
                return REJECT
            if job.min_resources is None:
                return PERMIT
            attr = attrs[queue.name]
            # minResources + allocated + inqueue − elastic ≤ capability on the dimensions minResources asks for
            # (`pods` left out): the same additions in the same order over Python floats, once per pending job,
            # without numpy's per-call cost on a handful of resources.
            allocated, inqueue = attr.allocated.tolist(), attr.inqueue.tolist()
            elastic, capability = attr.elastic.tolist(), attr.real_capability.tolist()
            for d, want in enumerate(job.min_resources.tolist()):
                if want > 0 and d != pods and not want + allocated[d] + inqueue[d] - elastic[d] <= capability[d]:
                    job.job_fit_error = "queue resource quota insufficient"
                    return REJECT
            return PERMIT

        def enqueued(job: Job) -> None:
            if job.min_resources is not None:
                attrs[job.queue].inqueue += job.min_resources

        def on_allocate(task: Task) -> None:
            attr = attrs[ssn.jobs[task.job].queue]
            attr.allocated += task.resreq
            attr.stale = True

        def on_deallocate(task: Task) -> None:
            attr = attrs[ssn.jobs[task.job].queue]
            attr.allocated -= task.resreq
            attr.stale = True

        ssn.add_queue_order(KeyedOrder(queue_order))
        ssn.add_overused(overused)
        ssn.add_allocatable(allocatable)
        # Volcano's queueAllocatable: a queue that is not Open reclaims nothing either.
        ssn.add_preemptive(lambda queue, task: queue.state == "Open" and fits(queue, task.resreq))
        ssn.add_reclaimable(reclaimable)
        def gang_reclaimable(ctx: EvictionContext, candidates: list[Task]) -> list[Task] | None:
            # A gang cannot be split, so the question is the queue's, asked before the eviction: does it hold more
            # than its deserved share? Per member, as reclaim asks it, no gang larger than its queue's excess could
            # ever be taken back. A guard: it holds whatever tier decides.
            if ctx.kind is not EvictionKind.GANG_RECLAIM:
                return None
            above = {name: not less_equal(attr.allocated, attr.deserved) for name, attr in attrs.items()}
            return [t for t in candidates if above.get(ssn.jobs[t.job].queue, False)]

        ssn.add_evictable(gang_reclaimable, guard=True)
        ssn.add_job_enqueueable(enqueueable)
        ssn.add_job_enqueued(enqueued)
        ssn.add_event_handler(EventHandler(allocate=on_allocate, deallocate=on_deallocate))

    def on_session_close(self, ssn: SessionView) -> None:
        for name, attr in self.attrs.items():
            ssn.queue_reports[name] = QueueReport(deserved=attr.deserved.copy(), share=attr.current_share())
        self.attrs = {}


register_plain_plugin("proportion", ProportionPlugin)
