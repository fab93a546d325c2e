"""The de-duplicating work queue that sits between reflector handlers and workers."""

from __future__ import annotations

import asyncio

from lapilli.cluster import WorkQueue


async def test_duplicates_collapse_while_waiting():
    q: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "a", "a"):
        q.add(key)
    assert len(q) == 2
    assert [await q.get(), await q.get()] == ["a", "b"]


async def test_key_added_during_processing_comes_back_after_done_not_before():
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    key = await q.get()
    q.add("a")  # a new event while a worker holds "a"
    assert len(q) == 0  # no second worker may take it now
    q.done(key)
    assert len(q) == 1 and await q.get() == "a"
    q.done("a")
    assert len(q) == 0 and q.busy == 0


async def test_add_after_delays():
    q: WorkQueue[str] = WorkQueue()
    q.add_after("later", 0.05)
    assert len(q) == 0
    assert await asyncio.wait_for(q.get(), 1) == "later"
