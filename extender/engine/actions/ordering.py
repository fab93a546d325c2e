"""Priority queues ordered by the session's combined comparators (Volcano's `util.PriorityQueue`), and the order in
which the evicting actions take starving jobs.

With a sort key (`Session.job_key` / `task_key` / `queue_key`) the heap compares key tuples instead of calling the
plugins' comparators: the same pops, since the key orders exactly as the comparator does and ends in a unique id.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from functools import cmp_to_key
from typing import Generic, TypeVar

from extender.engine.interface import SortKey
from extender.engine.model import Job, Queue
from extender.engine.session import Session

T = TypeVar("T")


class _Ranked(Generic[T]):
    """An item in a heap ordered by a comparator (what `functools.cmp_to_key` makes, typed)."""

    __slots__ = ("compare", "item")

    def __init__(self, item: T, compare: Callable[[T, T], int]) -> None:
        self.item, self.compare = item, compare

    def __lt__(self, other: _Ranked[T]) -> bool:
        return self.compare(self.item, other.item) < 0


class PriorityQueue(Generic[T]):
    """A priority queue over a comparator (or its sort key). Orders end in a unique id, so the pop order is total and
    reproducible. A key is computed when the item is pushed: use one only while queued items do not change."""

    __slots__ = ("_compare", "_entries", "_heap", "_key")

    def __init__(
        self, compare: Callable[[T, T], int], items: Iterable[T] = (), key: Callable[[T], SortKey] | None = None
    ) -> None:
        # With a key, (key, item) entries are kept sorted best last, compared in C: keys are unique tuples (they end
        # in the uid), so the order is total and the items are never compared; one sort and pops from the end cost
        # a tenth of a heap's sifts over long keys. A comparator may be intransitive within a plugin's tolerance,
        # so it keeps the heap, whose pops have always defined its order.
        self._key = key
        self._compare = compare
        self._heap: list[_Ranked[T]] = []
        self._entries: list[tuple[SortKey, T]] = []
        if key is None:
            self._heap = [_Ranked(item, compare) for item in items]
            heapq.heapify(self._heap)
        else:
            self._entries = sorted([(key(item), item) for item in items], reverse=True)

    def push(self, item: T) -> None:
        if self._key is None:
            heapq.heappush(self._heap, _Ranked(item, self._compare))
            return
        entry = (self._key(item), item)
        entries = self._entries
        low, high = 0, len(entries)
        while low < high:  # the place that keeps the list sorted best last (`bisect` takes ascending lists only)
            middle = (low + high) // 2
            if entry < entries[middle]:
                low = middle + 1
            else:
                high = middle
        entries.insert(low, entry)

    def pop(self) -> T:
        if self._key is None:
            return heapq.heappop(self._heap).item
        return self._entries.pop()[1]

    def __len__(self) -> int:
        return len(self._entries) if self._key is not None else len(self._heap)

    def empty(self) -> bool:
        return not (self._entries if self._key is not None else self._heap)


def best_last(items: Iterable[T], compare: Callable[[T, T], int], key: Callable[[T], SortKey] | None = None) -> list[T]:
    """`items` ordered so that `list.pop()` takes them in the order a `PriorityQueue` over the same order pops them.
    For items that do not change while queued and never return: a sort and a pop from the end cost less than a
    heap's sifts, for allocate's one queue of tasks per job turn. The order is total (it ends in a unique id), so
    the reversed sort is exactly the heap's pop order reversed."""
    return sorted(items, key=key if key is not None else cmp_to_key(compare), reverse=True)


def pop_best(items: list[T], compare: Callable[[T, T], int], key: Callable[[T], SortKey] | None = None) -> T:
    """Remove and return the best item (the first of equals) by a comparator or its key, evaluated now: keys may
    have changed since the last pop."""
    best = 0
    if key is not None:
        keys = [key(item) for item in items]
        best = keys.index(min(keys))
        return items.pop(best)
    for i in range(1, len(items)):
        if compare(items[i], items[best]) < 0:
            best = i
    return items.pop(best)


def starving_by_queue(ssn: Session) -> tuple[list[Queue], dict[str, list[Job]]]:
    """The queues holding a valid, admitted job (in job-uid order of their first) and each queue's starving jobs
    (Volcano's preemptorsMap in reclaim, gangpreempt and gangreclaim)."""
    queues: list[Queue] = []
    starving: dict[str, list[Job]] = {}
    for job in sorted(ssn.jobs.values(), key=lambda j: j.uid):
        if job.is_pending() or ssn.job_valid(job) is not None or job.queue not in ssn.queues:
            continue
        if job.queue not in starving:
            starving[job.queue] = []
            queues.append(ssn.queues[job.queue])
        if ssn.job_starving(job) and job.uid not in ssn.parked:  # a parked gang is left out (parking.py)
            starving[job.queue].append(job)
    return queues, starving


def each_starving(ssn: Session, skip_overused: bool) -> Iterator[tuple[Queue, Job]]:
    """Starving jobs queue by queue in QueueOrder (an overused queue left out when `skip_overused`, as reclaim does),
    each queue's in JobOrder; orders are asked as each is popped, after what the previous ones changed."""
    queues, starving = starving_by_queue(ssn)
    while queues:
        queue = pop_best(queues, ssn.queue_order)
        if skip_overused and ssn.overused(queue):
            continue
        jobs = PriorityQueue(ssn.job_order, starving[queue.name])
        while not jobs.empty():
            yield queue, jobs.pop()
