"""Priority queues ordered by the session's combined comparators (Volcano's `util.PriorityQueue`).

With a sort key (`Session.job_key` / `task_key` / `queue_key`) the heap compares key tuples instead of calling the
plugins' comparators: the same pops, since the key orders exactly as the comparator does and ends in a unique id.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from functools import cmp_to_key
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class PriorityQueue(Generic[T]):
    """A heap over a comparator (or its sort key). Orders end in a unique id, so the pop order is total and
    reproducible. A key is computed when the item is pushed: use one only while queued items do not change."""

    __slots__ = ("_heap", "_keyed", "_wrap")

    def __init__(
        self, compare: Callable[[T, T], int], items: Iterable[T] = (), key: Callable[[T], Any] | None = None
    ) -> None:
        self._keyed = key is not None
        if key is None:
            self._wrap: Callable[[T], Any] = cmp_to_key(compare)
        else:
            # Keys are unique (they end in the uid), so a (key, item) pair never compares the items themselves.
            self._wrap = lambda item: (key(item), item)
        self._heap = [self._wrap(item) for item in items]
        heapq.heapify(self._heap)

    def push(self, item: T) -> None:
        heapq.heappush(self._heap, self._wrap(item))

    def pop(self) -> T:
        wrapped = heapq.heappop(self._heap)
        item: T = wrapped[1] if self._keyed else wrapped.obj
        return item

    def __len__(self) -> int:
        return len(self._heap)

    def empty(self) -> bool:
        return not self._heap


def pop_best(items: list[T], compare: Callable[[T, T], int], key: Callable[[T], Any] | None = None) -> T:
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
