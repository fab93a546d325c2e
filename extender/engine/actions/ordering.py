"""Priority queues ordered by the session's combined comparators (Volcano's `util.PriorityQueue`)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from functools import cmp_to_key
from typing import Generic, TypeVar

T = TypeVar("T")


class PriorityQueue(Generic[T]):
    """A heap over a comparator. Comparators end in a unique id, so the pop order is total and reproducible."""

    __slots__ = ("_heap", "_key")

    def __init__(self, compare: Callable[[T, T], int], items: Iterable[T] = ()) -> None:
        self._key = cmp_to_key(compare)
        self._heap = [self._key(item) for item in items]
        heapq.heapify(self._heap)

    def push(self, item: T) -> None:
        heapq.heappush(self._heap, self._key(item))

    def pop(self) -> T:
        wrapped = heapq.heappop(self._heap)
        item: T = wrapped.obj  # type: ignore[attr-defined]
        return item

    def __len__(self) -> int:
        return len(self._heap)

    def empty(self) -> bool:
        return not self._heap


def pop_best(items: list[T], compare: Callable[[T, T], int]) -> T:
    """Remove and return the best item by a comparator whose keys may have changed since the last pop."""
    best = 0
    for i in range(1, len(items)):
        if compare(items[i], items[best]) < 0:
            best = i
    return items.pop(best)
