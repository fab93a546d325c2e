"""A de-duplicating, rate-limited work queue (client-go's workqueue): a key is queued at most once, and never
handed to two workers at the same time; a key added while being processed is queued again when it is done.

Handlers add keys; workers take a key, look at the *latest* object in a reflector's store, act, and call
`done`. Many events for one object thus collapse into one unit of work. A worker that failed calls
`add_rate_limited(key)` (the key comes back after the queue's `RateLimiter` says) and one that succeeded calls
`forget(key)`: the queue owns every retry's backoff, so workers keep no attempt counters of their own.

`run_worker` is that worker, the one loop every controller (and the simulated kubelet) runs: a key whose work
raises — a refused request or a bug alike — is queued again with the queue's back-off and counted, never dropped
(client-go's `processNextWorkItem` with `handleErr`).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Hashable
from typing import Final, Generic, Literal, NoReturn, TypeVar

from lapilli.kube.client import REQUEST_ERRORS

K = TypeVar("K", bound=Hashable)

__all__ = ["RateLimiter", "WorkQueue", "run_worker"]

log = logging.getLogger(__name__)

Cause = Literal["request", "unexpected"]
CAUSES: Final[tuple[Cause, ...]] = ("request", "unexpected")


class RateLimiter(Generic[K]):
    """client-go's ItemExponentialFailureRateLimiter: the n-th consecutive failure of an item waits
    `base_s * 2**n`, capped at `max_s`; `forget` after a success starts the item over. With `jitter` > 0 each
    wait is stretched by up to that fraction at random (wait.Backoff's jitter), still capped, so a fleet of
    clients does not retry in lock-step."""

    def __init__(
        self, base_s: float, max_s: float, *, jitter: float = 0.0, rng: random.Random | None = None,
    ) -> None:
        self.base_s, self.max_s, self.jitter = base_s, max_s, jitter
        self._rng = rng or random.Random()
        self._failures: dict[K, int] = {}

    def when(self, item: K) -> float:
        """Record one more failure of `item` and return how long to wait before trying it again."""
        n = self._failures.get(item, 0)
        self._failures[item] = n + 1
        delay = min(self.max_s, self.base_s * 2.0**n)
        if self.jitter:
            delay = min(self.max_s, delay * (1.0 + self.jitter * self._rng.random()))
        return delay

    def forget(self, item: K) -> None:
        """`item` succeeded (or is given up on): its next failure waits `base_s` again."""
        self._failures.pop(item, None)

    def num_requeues(self, item: K) -> int:
        """Failures of `item` since it was last forgotten."""
        return self._failures.get(item, 0)

    async def until(self, item: K, attempt: Callable[[], Awaitable[bool]]) -> None:
        """Call `attempt` until it succeeds (returns True), waiting `when(item)` after each failure, then forget
        `item`: the retry loop of work that is not an item of a work queue (a controller's start-up step)."""
        while not await attempt():
            await asyncio.sleep(self.when(item))
        self.forget(item)


class WorkQueue(Generic[K]):
    def __init__(self, limiter: RateLimiter[K] | None = None) -> None:
        """`limiter`: the backoff of `add_rate_limited` (default 0.1 s doubling to 30 s)."""
        self.limiter: RateLimiter[K] = limiter or RateLimiter(0.1, 30.0)
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()

    def add(self, key: K) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.put_nowait(key)

    def add_after(self, key: K, delay_s: float) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(max(0.0, delay_s), self.add, key)

    def add_rate_limited(self, key: K) -> float:
        """Queue `key` again once the rate limiter allows (one more failure counted); returns the delay."""
        delay = self.limiter.when(key)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """`key` was processed successfully: stop counting its failures."""
        self.limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return self.limiter.num_requeues(key)

    async def get(self) -> K:
        key = await self._queue.get()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.put_nowait(key)

    def __len__(self) -> int:
        """Keys waiting (not counting those being processed)."""
        return self._queue.qsize()

    @property
    def busy(self) -> int:
        return len(self._processing)


def _ignore(_cause: Cause) -> None:
    return None


async def run_worker(
    queue: WorkQueue[K], process: Callable[[K], Awaitable[object]], *, name: str,
    retried: Callable[[Cause], None] = _ignore, expected: tuple[type[BaseException], ...] = REQUEST_ERRORS,
) -> NoReturn:
    """Take keys from `queue` forever and `process` each. Success forgets the key's failures; any exception queues
    the key again after the queue's back-off and calls `retried` with its cause: "request" for the `expected`
    failures (an API server's refusal, a dropped connection: logged in one line), "unexpected" for anything else
    (a bug: logged with its traceback). `process` must leave what it took for the key where the retry finds it."""
    while True:
        key = await queue.get()
        try:
            await process(key)
        except expected as exc:
            delay = queue.add_rate_limited(key)
            retried("request")
            log.info("%s %s: %s: %s; retry %d in %.2fs", name, key, type(exc).__name__, exc,
                     queue.num_requeues(key), delay)
        except Exception:
            delay = queue.add_rate_limited(key)
            retried("unexpected")
            log.exception("%s %s: unexpected error; retry %d in %.2fs", name, key, queue.num_requeues(key), delay)
        else:
            queue.forget(key)
        finally:
            queue.done(key)
