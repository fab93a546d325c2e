"""The action queues' orders: a keyed `PriorityQueue` (a list sorted best last) and `best_last` pop exactly what a
heap over the same order pops, whatever the pushes and pops in between."""

from __future__ import annotations

import heapq

from hypothesis import given
from hypothesis import strategies as st

from extender.engine.actions.ordering import PriorityQueue, best_last


def _compare(left: tuple[int, str], right: tuple[int, str]) -> int:
    return (left > right) - (left < right)


def _key(item: tuple[int, str]) -> tuple[int, str]:
    return item


# Items are (rank, unique name): ranks repeat, names make the order total, as the session's keys end in a uid.
ITEMS = st.lists(st.integers(-3, 3), max_size=40).map(lambda ranks: [(r, f"u{i:03d}") for i, r in enumerate(ranks)])


@given(ITEMS, st.lists(st.booleans(), max_size=80), st.integers(0, 40))
def test_keyed_queue_pops_as_a_heap(items: list[tuple[int, str]], ops: list[bool], start: int) -> None:
    """Start with some items, then push the rest (True) or pop (False) in the order given: every pop matches a
    reference heap's, for the keyed queue and for the comparator one."""
    keyed = PriorityQueue(_compare, items[:start], _key)
    compared = PriorityQueue(_compare, items[:start])
    reference = list(items[:start])
    heapq.heapify(reference)
    waiting = items[start:]
    for push in ops:
        if push and waiting:
            item = waiting.pop()
            keyed.push(item)
            compared.push(item)
            heapq.heappush(reference, item)
        elif reference:
            expected = heapq.heappop(reference)
            assert keyed.pop() == expected
            assert compared.pop() == expected
        assert len(keyed) == len(compared) == len(reference)
        assert keyed.empty() == compared.empty() == (not reference)


@given(ITEMS)
def test_best_last_pops_in_order(items: list[tuple[int, str]]) -> None:
    ordered = best_last(items, _compare, _key)
    assert [ordered.pop() for _ in range(len(ordered))] == sorted(items)
    assert best_last(items, _compare) == best_last(items, _compare, _key)
