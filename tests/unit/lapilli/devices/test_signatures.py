"""Ledger signatures by number (`Signatures`): a session's memo keys use a ledger's number instead of its signature,
and a ledger that changed since it was numbered is numbered from (that number, its changes) when another ledger made
the same move before. Whatever the order of holds, releases and kind changes on several ledgers, and whenever they
are numbered, two ledgers must get one number exactly when their signatures are equal (else a memoised fit of one
would be given to the other: a pod placed on a card that is full)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lapilli.devices import cards as cards_module
from lapilli.devices.cards import HELD, PIPELINED, RELEASING, CardLedger, Holding, Signatures, _Hold
from tests.unit.lapilli.devices.helpers import ledger

# Few values, so that ledgers meet in equal states often and reuse each other's moves.
HOLDINGS = st.sampled_from([(Holding(0, 1024, 0),), (Holding(1, 1024, 0),), (Holding(0, 2048, 25),)])
OPS = st.lists(st.one_of(
    st.tuples(st.just("hold"), st.integers(0, 1), st.integers(0, 2), HOLDINGS, st.sampled_from([HELD, PIPELINED])),
    st.tuples(st.just("release"), st.integers(0, 1), st.integers(0, 2)),
    st.tuples(st.just("kind"), st.integers(0, 1), st.integers(0, 2), st.sampled_from([HELD, RELEASING, PIPELINED])),
    st.tuples(st.just("number"), st.integers(0, 1)),
    st.tuples(st.just("number"), st.integers(0, 1)),
), max_size=60)


def _apply(ledgers: list[CardLedger], table: Signatures, op: tuple) -> None:
    what, which = op[0], ledgers[op[1]]
    if what == "hold":
        which._put(f"p{op[2]}", _Hold(op[4], op[3], "", frozenset(), ()))
    elif what == "release":
        which.release(f"p{op[2]}")
    elif what == "kind":
        which.set_kind(f"p{op[2]}", op[3])
    else:
        which.signature_id(table)


def _check(ledgers: list[CardLedger], seen: dict[int, tuple[object, ...]]) -> None:
    """Every number given so far, on any ledger at any time, stands for one signature and no other number does."""
    for led in ledgers:
        if led._signature_id >= 0:
            assert seen.setdefault(led._signature_id, led.signature()) == led.signature()
    assert len(set(seen.values())) == len(seen)


@settings(max_examples=500, deadline=None)
@given(ops=OPS, pending_max=st.sampled_from([1, 2, 8]))
def test_equal_numbers_exactly_for_equal_signatures(ops, pending_max):
    original = cards_module.PENDING_MAX
    cards_module.PENDING_MAX = pending_max
    try:
        table = Signatures()
        seen: dict[int, tuple[object, ...]] = {}
        ledgers = [ledger(cards=2) for _ in range(2)]
        for led in ledgers:  # as a session's first look at every node
            led.signature_id(table)
        for op in ops:  # changes pile up between numberings, as between a session's looks at a node
            _apply(ledgers, table, op)
            _check(ledgers, seen)
        for led in ledgers:
            led.signature_id(table)
        _check(ledgers, seen)
    finally:
        cards_module.PENDING_MAX = original


def test_a_move_one_ledger_made_numbers_another_without_hashing_its_signature():
    table = Signatures()
    first, second = ledger(cards=2), ledger(cards=2)
    empty = first.signature_id(table)
    assert second.signature_id(table) == empty
    for led in (first, second):
        led._put("a", _Hold(HELD, (Holding(0, 1024, 0),), "", frozenset(), ()))
    after = first.signature_id(table)
    assert after != empty and len(table.moves) == 1
    second._signature = ("not", "read")  # a move found: the signature is not built
    assert second.signature_id(table) == after


def test_a_release_is_not_taken_for_a_hold_of_the_same_cards():
    table = Signatures()
    first, second = ledger(cards=2), ledger(cards=2)
    one = (Holding(0, 1024, 0),)
    for led in (first, second):
        led._put("a", _Hold(HELD, one, "", frozenset(), ()))
        led.signature_id(table)
    first._put("b", _Hold(HELD, one, "", frozenset(), ()))  # a second pod of the same size on the same card
    second.release("a")
    assert first.signature_id(table) != second.signature_id(table)
    assert second.signature_id(table) == ledger(cards=2).signature_id(table)
