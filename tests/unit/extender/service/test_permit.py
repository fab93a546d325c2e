"""The gang permit cache: parked members bind together at minMember, or are all released on timeout."""

from __future__ import annotations

import asyncio

from extender.service.permit import PermitCache


class Binder:
    def __init__(self, fail: set[str] | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.fail = fail or set()

    async def __call__(self, namespace: str, name: str, node: str, uid: str) -> str:
        self.calls.append((name, node))
        return "boom" if name in self.fail else ""


async def test_members_wait_until_min_member_then_bind_together():
    binder = Binder()
    cache = PermitCache(binder, timeout_s=5)
    first = [asyncio.create_task(cache.park("ns/g", 3, 0, "ns", f"p{i}", f"u{i}", f"n{i}")) for i in range(2)]
    await asyncio.sleep(0.05)
    assert not any(t.done() for t in first) and binder.calls == []
    assert cache.parked_count() == 2
    last = await cache.park("ns/g", 3, 0, "ns", "p2", "u2", "n2")
    assert last == "" and [await t for t in first] == ["", ""]
    assert sorted(binder.calls) == [("p0", "n0"), ("p1", "n1"), ("p2", "n2")]
    assert cache.parked_count() == 0


async def test_already_bound_members_count_towards_min_member():
    binder = Binder()
    cache = PermitCache(binder, timeout_s=5)
    assert await cache.park("ns/g", 3, 2, "ns", "p2", "u2", "n2") == ""
    assert binder.calls == [("p2", "n2")]


async def test_timeout_releases_every_parked_member_with_one_error():
    timed_out: list[tuple[str, int, int]] = []
    cache = PermitCache(Binder(), timeout_s=0.1, on_timeout=lambda g, n, m: timed_out.append((g, n, m)))
    answers = await asyncio.gather(*(cache.park("ns/g", 4, 0, "ns", f"p{i}", f"u{i}", "n") for i in range(3)))
    assert len(set(answers)) == 1 and "only 3 of 4 pods" in answers[0]
    assert timed_out == [("ns/g", 3, 4)]
    assert cache.parked_count() == 0


async def test_a_repeated_bind_for_a_parked_uid_waits_on_the_same_outcome():
    binder = Binder()
    cache = PermitCache(binder, timeout_s=5)
    a = asyncio.create_task(cache.park("ns/g", 2, 0, "ns", "p0", "u0", "n0"))
    again = asyncio.create_task(cache.park("ns/g", 2, 0, "ns", "p0", "u0", "n0"))
    await asyncio.sleep(0.05)
    assert cache.parked_count() == 1
    assert await cache.park("ns/g", 2, 0, "ns", "p1", "u1", "n1") == ""
    assert await a == "" and await again == ""
    assert len(binder.calls) == 2


async def test_a_failed_binding_is_reported_to_that_member_only():
    cache = PermitCache(Binder(fail={"p1"}), timeout_s=5)
    answers = await asyncio.gather(*(cache.park("ns/g", 2, 0, "ns", f"p{i}", f"u{i}", "n") for i in range(2)))
    assert answers == ["", "boom"]


async def test_cancel_all_answers_parked_members():
    cache = PermitCache(Binder(), timeout_s=5)
    task = asyncio.create_task(cache.park("ns/g", 2, 0, "ns", "p0", "u0", "n0"))
    await asyncio.sleep(0.05)
    cache.cancel_all("stopping")
    assert await task == "stopping"


async def test_recheck_releases_a_member_once_its_siblings_show_up_bound():
    binder = Binder()
    cache = PermitCache(binder, timeout_s=5)
    extra = asyncio.create_task(cache.park("ns/g", 3, 0, "ns", "p3", "u3", "n3"))  # watch lagging: 0 bound
    await asyncio.sleep(0.05)
    assert not extra.done()
    cache.recheck(lambda gang: 1)  # 1 bound + 1 parked < 3: keep waiting
    await asyncio.sleep(0.05)
    assert not extra.done() and binder.calls == []
    cache.recheck(lambda gang: 2)  # the watch now shows two siblings bound: 2 + 1 parked = 3
    assert await extra == "" and binder.calls == [("p3", "n3")]


async def test_a_release_is_counted_when_its_bindings_are_sent_and_under_way_until_all_are_answered():
    answer = asyncio.Event()
    released: list[str] = []

    async def slow(namespace: str, name: str, node: str, uid: str) -> str:
        await answer.wait()
        return ""

    cache = PermitCache(slow, timeout_s=5, on_release=released.append)
    parked = [asyncio.create_task(cache.park("ns/g", 2, 0, "ns", f"p{i}", f"u{i}", "n")) for i in range(2)]
    await asyncio.sleep(0.01)
    assert released == ["ns/g"] and cache.releasing() == 1, "Bindings sent, none answered: the gang is mid-release"
    answer.set()
    assert [await t for t in parked] == ["", ""]
    await asyncio.sleep(0)
    assert cache.releasing() == 0 and released == ["ns/g"]
