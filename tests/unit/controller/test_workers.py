"""Every controller's worker through the one `run_worker` loop: work that fails in a way nobody expected (a bug) is
queued again with the queue's back-off and counted in `lapilli_controller_work_retries_total{controller,cause}`,
and the retry finds what the failed try had taken (the Job's requests, the Queue's actions, the Command's step)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from controller.commands import CommandRouter
from controller.context import Context
from controller.jobs.controller import JobController
from controller.jobs.requests import Request
from controller.metrics import ControllerMetrics
from controller.podgroups.controller import PodGroupController
from controller.queues.controller import QueueController
from controller.settings import ControllerSettings
from lapilli.api import Action, Event
from lapilli.api.constants import QUEUE_KIND, SCHEDULING_API_VERSION
from lapilli.cluster import Event as WatchEvent
from lapilli.cluster import RateLimiter, WorkQueue
from tests.unit.controller.builders import job_doc


class Once:
    """An async stand-in that raises `RuntimeError` on its first call and records every later one."""

    def __init__(self, result: Any = None) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.result = result

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(args)
        if len(self.calls) == 1:
            raise RuntimeError("a bug")
        return self.result


def context() -> tuple[Context, CollectorRegistry]:
    registry = CollectorRegistry()
    return Context(None, ControllerSettings(), None, ControllerMetrics(registry)), registry  # type: ignore[arg-type]


def retries(registry: CollectorRegistry, controller: str, cause: str) -> float:
    value = registry.get_sample_value("lapilli_controller_work_retries_total",
                                      {"controller": controller, "cause": cause})
    return value or 0.0


async def drain(worker: Callable[[], Any], until: Callable[[], bool]) -> None:
    task = asyncio.create_task(worker())
    try:
        async with asyncio.timeout(5):
            while not until():
                await asyncio.sleep(0.001)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def fast(queue: WorkQueue[Any]) -> None:
    queue.limiter = RateLimiter(0.001, 0.004)


async def test_job_request_survives_an_unexpected_error(caplog: pytest.LogCaptureFixture) -> None:
    ctx, registry = context()
    jobs = JobController(ctx)
    fast(jobs.queue)
    ctx.jobs.observe("ADDED", job_doc())
    jobs.actions.execute = execute = Once()  # type: ignore[method-assign]
    jobs.submit(Request("ns1", "job1", event=Event.OUT_OF_SYNC))
    with caplog.at_level(logging.ERROR):
        await drain(jobs.run_worker, lambda: len(execute.calls) == 2)
    assert len(execute.calls) == 2, "the sync that failed ran again"
    assert retries(registry, "jobs", "unexpected") == 1 and jobs.executed == 1
    assert jobs.queue.num_requeues("ns1/job1") == 0, "forgotten once it succeeded"
    assert any("unexpected error" in r.getMessage() for r in caplog.records)


async def test_deleted_job_cleanup_is_retried_until_it_succeeds() -> None:
    ctx, registry = context()
    cleanup = Once()
    jobs = JobController(ctx, cleanup=cleanup)
    fast(jobs.queue)
    jobs.on_job(WatchEvent("DELETED", job_doc()))
    await drain(jobs.run_worker, lambda: len(cleanup.calls) == 2)
    assert [args[0]["metadata"]["name"] for args in cleanup.calls] == ["job1", "job1"]
    assert retries(registry, "jobs", "unexpected") == 1


async def test_queue_actions_survive_an_unexpected_error() -> None:
    ctx, registry = context()
    queues = QueueController(ctx)
    fast(queues.queue)
    queues._execute = execute = Once()  # type: ignore[method-assign]
    queues.submit("q1", Action.CLOSE_QUEUE)
    await drain(queues.run_worker, lambda: len(execute.calls) == 2)
    assert execute.calls == [("q1", Action.CLOSE_QUEUE)] * 2
    assert retries(registry, "queues", "unexpected") == 1 and not queues._actions


async def test_plain_pod_podgroup_survives_an_unexpected_error() -> None:
    ctx, registry = context()
    podgroups = PodGroupController(ctx)
    fast(podgroups.queue)
    podgroups._sync = sync = Once()  # type: ignore[method-assign]
    podgroups.queue.add(("pod", "ns/p"))
    await drain(podgroups.run_worker, lambda: len(sync.calls) == 2)
    assert sync.calls == [("ns/p",)] * 2 and retries(registry, "podgroups", "unexpected") == 1


async def test_a_taken_command_is_dispatched_after_an_unexpected_error() -> None:
    ctx, registry = context()

    class Client:
        deletes = 0

        async def delete(self, *args: Any, **kwargs: Any) -> None:
            Client.deletes += 1

    ctx.client = Client()  # type: ignore[assignment]
    queues = QueueController(ctx)
    router = CommandRouter(ctx, JobController(ctx), queues)
    fast(router.queue)
    dispatch, calls = router._dispatch, []

    def flaky(cmd: Any) -> Any:
        calls.append(cmd)
        if len(calls) == 1:
            raise RuntimeError("a bug")
        return dispatch(cmd)

    router._dispatch = flaky  # type: ignore[method-assign]
    cmd = {"metadata": {"name": "c1", "namespace": "ns", "uid": "u1"}, "action": "CloseQueue",
           "target": {"apiVersion": SCHEDULING_API_VERSION, "kind": QUEUE_KIND, "name": "q1"}}
    router.on_command(WatchEvent("ADDED", cmd))
    await drain(router.run_worker, lambda: not router._work)
    assert Client.deletes == 1, "taken once: the retry resumes after the delete"
    assert queues._actions == {"q1": [Action.CLOSE_QUEUE]}
    assert retries(registry, "commands", "unexpected") == 1
