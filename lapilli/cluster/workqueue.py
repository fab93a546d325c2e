"""A de-duplicating work queue (client-go's workqueue): a key is queued at most once, and never handed to
two workers at the same time; a key added while being processed is queued again when it is done.

Handlers add keys; workers take a key, look at the *latest* object in a reflector's store, act, and call
`done`. Many events for one object thus collapse into one unit of work.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(self) -> None:
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
