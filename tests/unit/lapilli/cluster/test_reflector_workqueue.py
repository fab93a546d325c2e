"""The de-duplicating work queue that sits between reflector handlers and workers."""

from __future__ import annotations

import asyncio

from lapilli.cluster import RateLimiter, WorkQueue, run_worker


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


def test_rate_limiter_doubles_per_item_caps_and_forgets():
    limiter: RateLimiter[str] = RateLimiter(0.1, 1.0)
    assert [limiter.when("a") for _ in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert limiter.when("b") == 0.1  # items are counted apart
    assert (limiter.num_requeues("a"), limiter.num_requeues("b")) == (6, 1)
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0 and limiter.when("a") == 0.1


async def test_add_rate_limited_brings_the_key_back_later_and_forget_resets():
    q: WorkQueue[str] = WorkQueue(RateLimiter(0.02, 1.0))
    assert q.add_rate_limited("a") == 0.02
    assert len(q) == 0 and q.num_requeues("a") == 1
    assert await asyncio.wait_for(q.get(), 1) == "a"
    q.done("a")
    assert q.add_rate_limited("a") == 0.04  # a second failure in a row waits twice as long
    q.forget("a")
    assert q.num_requeues("a") == 0


class CountingLimiter(RateLimiter[str]):
    """Records the delays it hands out."""

    def __init__(self) -> None:
        super().__init__(0.001, 0.002)
        self.delays: list[float] = []

    def when(self, item: str) -> float:
        delay = super().when(item)
        self.delays.append(delay)
        return delay


async def test_until_retries_with_the_limiters_delays_then_forgets():
    limiter = CountingLimiter()
    attempts: list[int] = []

    async def attempt() -> bool:
        attempts.append(limiter.num_requeues("root"))
        return len(attempts) == 4

    await limiter.until("root", attempt)
    assert attempts == [0, 1, 2, 3]
    assert limiter.delays == [0.001, 0.002, 0.002]  # doubling, capped
    assert limiter.num_requeues("root") == 0


async def test_run_worker_requeues_a_failed_key_with_back_off_counts_its_cause_and_forgets_on_success():
    q: WorkQueue[str] = WorkQueue(RateLimiter(0.001, 0.004))
    causes: list[str] = []
    tries: list[str] = []

    async def process(key: str) -> None:
        tries.append(key)
        if len(tries) == 1:
            raise OSError("connection refused")
        if len(tries) == 2:
            raise KeyError("a bug")

    q.add("a")
    worker = asyncio.create_task(run_worker(q, process, name="test", retried=causes.append))
    try:
        async with asyncio.timeout(5):
            while len(tries) < 3 or q.busy:
                await asyncio.sleep(0.001)
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)
    assert tries == ["a", "a", "a"] and causes == ["request", "unexpected"]
    assert q.num_requeues("a") == 0 and len(q) == 0
