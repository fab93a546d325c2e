"""The session loop does not hold the next session for the last one's writes: plans reach the verbs as soon as a
session ends, while one outcome's writes land in order before the next outcome's, and a stopping loop takes its
writes in flight down with it."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import extender.service.loop as loop_module
from extender.engine.conf import SchedulerConf
from extender.service.loop import ConfSource, SessionLoop
from extender.service.metrics import ExtenderMetrics
from extender.service.pacing import Pacer
from extender.service.plan import Plan, overlay
from extender.service.session import Outcome, StatusWrite, run
from extender.service.state import ClusterState
from tests.service.extender_state import RecordingClient, cluster_state
from tests.unit.extender.engine.builders import node, pod, podgroup, queue

pytestmark = pytest.mark.asyncio(loop_scope="session")


class GatedClient(RecordingClient):
    """Status writes wait for `gate` (the API server slow to answer them)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def patch_status(self, res: Any, name: str, patch: Any, namespace: str | None = None) -> dict:
        await self.gate.wait()
        return await super().patch_status(res, name, patch, namespace)


class NumberedRunner:
    """Real sessions over `state`; the n-th outcome writes PodGroup ml/a's phase as `P<n>`, so the order its writes
    land in tells which outcome sent them."""

    def __init__(self, state: ClusterState) -> None:
        self.state, self.pacer = state, Pacer()
        self.outcomes: list[Outcome] = []

    async def __call__(self, placements: dict[str, str], conf: SchedulerConf, idle: frozenset[str] = frozenset(),
                       devices: dict[str, Any] | None = None) -> Outcome | None:
        snap = overlay(self.state.copy(), placements, devices)
        outcome = run(snap, conf, placements, self.state.store("PodGroup"), self.state.store("Queue"), self.pacer)
        numbered = dataclasses.replace(outcome, events=[], status_writes=[
            StatusWrite("PodGroup", "ml/a", {"phase": f"P{len(self.outcomes) + 1}"})])
        self.outcomes.append(numbered)
        return numbered


async def _until(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        while not check():
            await asyncio.sleep(0.005)


def _written(client: RecordingClient) -> list[str]:
    return [body["status"]["phase"] for verb, _kind, body in client.bodies if verb == "patch_status"]


@pytest.fixture
def loop(monkeypatch: pytest.MonkeyPatch) -> tuple[SessionLoop, GatedClient, NumberedRunner]:
    monkeypatch.setattr(loop_module, "MIN_SESSION_GAP_S", 0.0)
    state = cluster_state([
        node({"name": "n0", "alloc": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "1"}}),
        queue({"name": "default"}),
        podgroup({"name": "ml/a", "min": 1, "phase": "Inqueue"}),
        pod({"name": "ml/a-0", "group": "a", "req": {"cpu": "1", "nvidia.com/gpu": "1"}}),
    ])
    client, runner = GatedClient(), NumberedRunner(state)
    metrics = ExtenderMetrics(CollectorRegistry(), parked=lambda: 0, restarts=state.restarts)
    return SessionLoop(state, Plan(ttl_s=60), client, ConfSource(None), metrics,  # type: ignore[arg-type]
                       period_s=0.01, runner=runner), client, runner


async def test_the_next_session_runs_while_the_last_ones_writes_wait_and_the_writes_keep_their_order(loop):
    sessions, client, runner = loop
    task = asyncio.create_task(sessions.run_forever())
    try:
        await _until(lambda: len(runner.outcomes) >= 2)
        assert sessions.latest is runner.outcomes[1], "the second session's plans are the verbs' at once"
        await asyncio.sleep(0.1)
        assert len(runner.outcomes) == 2, "a third session waits for the first outcome's writes to land"
        assert _written(client) == []
        client.gate.set()
        await _until(lambda: len(_written(client)) >= 4)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    written = _written(client)
    assert written == [f"P{n}" for n in range(1, len(written) + 1)], "each outcome's writes after the last one's"
    assert sessions.failures == 0


async def test_a_stopping_loop_cancels_the_writes_it_left_in_flight(loop):
    sessions, client, runner = loop
    task = asyncio.create_task(sessions.run_forever())
    await _until(lambda: len(runner.outcomes) >= 2)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "session-writes"]
    client.gate.set()
    await asyncio.sleep(0.05)
    assert _written(client) == [], "no write goes out after the loop stopped"
