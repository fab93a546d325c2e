"""Stopping background tasks: cancel, then wait until the task has really finished.

A component's `stop()` must not return while its task can still touch shared state, and the task's own
`CancelledError` is the expected way it ends, not an error. Tasks are stopped one after another in the order
given, so a caller that must stop one task before another (a term before its Lease) passes them in that order.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def cancel_and_wait(*tasks: asyncio.Task[object] | None) -> None:
    """Cancel each task that exists and wait for it to end; a task that already ended is only awaited."""
    for task in tasks:
        if task is None:
            continue
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def gather_or_cancel(*aws: Awaitable[T]) -> list[T]:
    """`asyncio.gather` that, when one of them fails, cancels the others and waits for them to end before raising
    that first failure: nothing is left running behind the caller (a request still fetching credentials when
    `asyncio.run` tears the loop down could otherwise keep it waiting)."""
    tasks = [asyncio.ensure_future(aw) for aw in aws]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        await cancel_and_wait(*tasks)
        raise
