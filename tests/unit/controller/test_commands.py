"""Commands through the router's rate-limited work queue: taken once, retried with the queue's backoff, a Job read
given up after five failures."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from controller.commands import CommandRouter
from controller.context import Context
from controller.metrics import ControllerMetrics
from controller.settings import ControllerSettings
from lapilli.api import Action
from lapilli.api.constants import BATCH_API_VERSION, JOB_KIND, QUEUE_KIND, SCHEDULING_API_VERSION
from lapilli.cluster import Event as WatchEvent
from lapilli.cluster import RateLimiter, WorkQueue
from lapilli.kube import NotFound


class FlakyClient:
    """Fails the first `delete_failures` deletes and every read of a Job with an OSError."""

    def __init__(self, delete_failures: int = 0, missing: bool = False) -> None:
        self.delete_failures, self.missing = delete_failures, missing
        self.deletes = 0
        self.reads = 0

    async def delete(self, resource: Any, name: str, namespace: str | None = None, uid: str | None = None) -> None:
        self.deletes += 1
        if self.missing:
            raise NotFound(404, "NotFound", "commands \"c1\" not found")
        if self.deletes <= self.delete_failures:
            raise OSError("connection refused")

    async def get(self, resource: Any, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.reads += 1
        raise OSError("connection refused")


class Recorded:
    def __init__(self) -> None:
        self.submitted: list[Any] = []

    def submit(self, *args: Any) -> None:
        self.submitted.append(args)


def command(kind: str, action: str) -> dict[str, Any]:
    target = ({"apiVersion": BATCH_API_VERSION, "kind": JOB_KIND} if kind == "job"
              else {"apiVersion": SCHEDULING_API_VERSION, "kind": QUEUE_KIND})
    return {"metadata": {"name": "c1", "namespace": "ns", "uid": "u1"}, "action": action,
            "target": {**target, "name": "t1"}}


def router(client: FlakyClient) -> tuple[CommandRouter, Recorded, Recorded]:
    ctx = Context(client, ControllerSettings(), None, ControllerMetrics())  # type: ignore[arg-type]
    jobs, queues = Recorded(), Recorded()
    out = CommandRouter(ctx, jobs, queues)  # type: ignore[arg-type]
    out.queue = WorkQueue(RateLimiter(0.001, 0.004))
    return out, jobs, queues


async def drain(r: CommandRouter, until: Any) -> None:
    """Run one worker until `until()` holds and a little longer; the worker must log no unexpected error."""
    worker = asyncio.create_task(r.run_worker())
    try:
        async with asyncio.timeout(5):
            while not until():
                await asyncio.sleep(0.001)
        await asyncio.sleep(0.02)  # nothing more arrives
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)


@pytest.fixture(autouse=True)
def no_unexpected_errors(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    yield
    assert not [rec for rec in caplog.get_records("call") if rec.levelno >= logging.ERROR]


async def test_a_command_that_cannot_be_taken_is_retried_through_the_queue_then_runs_once() -> None:
    client = FlakyClient(delete_failures=2)
    r, _jobs, queues = router(client)
    r.on_command(WatchEvent("ADDED", command("queue", "CloseQueue")))
    await drain(r, lambda: queues.submitted)
    assert (client.deletes, r.taken, queues.submitted) == (3, 1, [("t1", Action.CLOSE_QUEUE)])
    assert r.queue.num_requeues("u1") == 0 and not r._work


async def test_a_command_someone_else_took_is_dropped() -> None:
    client = FlakyClient(missing=True)
    r, _jobs, queues = router(client)
    r.on_command(WatchEvent("ADDED", command("queue", "OpenQueue")))
    await drain(r, lambda: client.deletes)
    assert (client.deletes, r.taken, queues.submitted, r._work) == (1, 0, [], {})


async def test_the_job_of_a_taken_command_is_read_five_times_then_given_up() -> None:
    client = FlakyClient()
    r, jobs, _queues = router(client)
    r.on_command(WatchEvent("ADDED", command("job", "AbortJob")))
    await drain(r, lambda: not r._work)
    assert (client.deletes, client.reads, jobs.submitted) == (1, 5, [])
