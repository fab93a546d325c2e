"""Idle-GPU reclaim in the service, against a stand-in Prometheus over HTTP (the real one is tests/e2e/test_idle_gpu.py):
readings become the lapilli.io/IdleGPU condition, Events and metrics; marked pods reach the engine through the
session loop, which evicts them for a job that waits, and only then; dry-run and a failed reading evict nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from prometheus_client import CollectorRegistry

from assembly.why.gather import SHIPPED_CONF
from extender.service.idle.loop import IdleLoop
from extender.service.idle.settings import IdleGpuSettings
from extender.service.loop import ConfSource
from extender.service.state import ClusterState
from lapilli.prometheus import Prometheus
from tests.service.extender_state import RecordingClient, cluster_state, feed
from tests.service.test_extender_events import _loop
from tests.unit.extender.engine.builders import node, pod, podgroup, queue

pytestmark = pytest.mark.asyncio(loop_scope="session")

WINDOW, GRACE, T0 = 600.0, 300.0, 1_700_000_000.0


class FakePrometheus:
    """Answers /api/v1/query with each pod's utilisation as the DCGM exporter labels it (or fails)."""

    def __init__(self) -> None:
        self.usage: dict[str, float] = {}
        self.queries: list[str] = []
        self.down = False

    async def query(self, request: web.Request) -> web.Response:
        self.queries.append(request.query["query"])
        if self.down:
            return web.json_response({"status": "error", "errorType": "unavailable", "error": "TSDB closed"},
                                     status=503)
        result = [{"metric": {"namespace": key.split("/")[0], "pod": key.split("/")[1], "gpu": "0"},
                   "value": [T0, str(value)]} for key, value in self.usage.items()]
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": result}})


@pytest.fixture
async def prometheus() -> AsyncIterator[tuple[FakePrometheus, str]]:
    fake = FakePrometheus()
    app = web.Application()
    app.router.add_get("/api/v1/query", fake.query)
    server = TestServer(app)
    await server.start_server()
    try:
        yield fake, str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


def _cluster() -> ClusterState:
    """lab-a (policy reclaim, not reclaimable) runs a 4-GPU notebook on the one node; lab-b's 2-GPU job waits."""
    nb = podgroup({"name": "ml/nb", "queue": "lab-a", "min": 1, "phase": "Running"})
    nb["metadata"]["uid"] = "uid-nb"
    return cluster_state([
        node({"name": "n1", "alloc": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "4"}}),
        queue({"name": "lab-a", "reclaimable": False, "annotations": {"lapilli.io/idle-gpu-policy": "reclaim"}}),
        queue({"name": "lab-b"}), nb,
        pod({"name": "ml/nb-0", "group": "nb", "req": {"cpu": "1", "nvidia.com/gpu": "4"}, "node": "n1",
             "phase": "Running"}),
        podgroup({"name": "ml/train", "queue": "lab-b", "min": 1, "phase": "Inqueue"}),
        pod({"name": "ml/train-0", "group": "train", "req": {"cpu": "1", "nvidia.com/gpu": "2"}}),
    ])


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def _idle_loop(state: ClusterState, url: str, mode: str = "on") -> tuple[IdleLoop, RecordingClient, Clock]:
    settings = IdleGpuSettings(mode=mode, prometheus_url=url, query="max by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL)",
                               window_s=WINDOW, grace_s=GRACE)
    client, clock = RecordingClient(), Clock()
    loop = IdleLoop(settings, state.copy, lambda: state.store("PodGroup"), client,  # type: ignore[arg-type]
                    CollectorRegistry(), prometheus=Prometheus(url), clock=clock)
    return loop, client, clock


def _land(state: ClusterState, client: RecordingClient) -> None:
    """The API server stores the conditions written so far (the watch brings them back)."""
    for verb, kind, body in client.bodies:
        if verb == "patch_status" and kind == "PodGroup":
            stored = state.store("PodGroup")["ml/nb"]
            feed(state, {**stored, "status": {**stored["status"], **body["status"]}})


def _events(client: RecordingClient) -> list[str]:
    return [body["reason"] for verb, kind, body in client.bodies if verb == "create" and kind == "Event"]


def _gauge(loop: IdleLoop) -> dict[tuple[str, str], float]:
    return {(s.labels["queue"], s.labels["state"]): s.value for m in loop.metrics.jobs.collect() for s in m.samples}


async def test_idle_notebook_is_warned_then_evicted_for_the_waiting_job(prometheus: Any) -> None:
    fake, url = prometheus
    fake.usage = {"ml/nb-0": 1.0}
    state = _cluster()
    idle, client, clock = _idle_loop(state, url)
    await idle.run_once()
    assert client.bodies == [] and _gauge(idle) == {("lab-a", "idle"): 1}
    assert fake.queries == ["max by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL)"]

    clock.now += WINDOW
    await idle.run_once()
    await idle.recorder.flush()
    [(_, _, body)] = [b for b in client.bodies if b[1] == "PodGroup"]
    [condition] = body["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == ("lapilli.io/IdleGPU", "True", "Idle")
    assert _events(client) == ["IdleGPU"] and idle.reclaimable == frozenset()
    _land(state, client)

    # Within the grace period the session leaves the notebook alone (lab-a is not reclaimable).
    sessions, writes, _ = _loop(state)
    sessions.conf = ConfSource(SHIPPED_CONF)  # Lapilli's conf: preempt and reclaim run (Volcano's default has neither)
    sessions.idle = lambda: idle.reclaimable
    sessions.evicted = idle.evicted
    await sessions.run_once()
    assert not [c for c in writes.calls if c[0] == "evict"]

    clock.now += GRACE
    await idle.run_once()
    await idle.recorder.flush()
    assert idle.reclaimable == frozenset({"ml/nb-0"}) and _gauge(idle) == {("lab-a", "Reclaimable"): 1}
    assert _events(client) == ["IdleGPU", "IdleGPUReclaimable"]
    await sessions.run_once()
    assert ("evict", ("ml", "nb-0")) in writes.calls
    await idle.recorder.flush()
    assert _events(client)[-1] == "IdleGPUReclaimed"
    assert [s.value for m in idle.metrics.evictions.collect() for s in m.samples if s.name.endswith("_total")] == [1]


async def test_dry_run_marks_nothing_and_a_failed_reading_unmarks(prometheus: Any) -> None:
    fake, url = prometheus
    fake.usage = {"ml/nb-0": 0.0}
    for mode in ("dry-run", "on"):
        state = _cluster()
        idle, client, clock = _idle_loop(state, url, mode)
        await idle.run_once()
        clock.now += WINDOW
        await idle.run_once()
        _land(state, client)
        clock.now += GRACE
        await idle.run_once()
        reasons = [b["status"]["conditions"][0]["reason"] for v, k, b in client.bodies if k == "PodGroup"]
        if mode == "dry-run":
            assert reasons == ["Idle", "ReclaimableDryRun"] and idle.reclaimable == frozenset()
            continue
        assert idle.reclaimable == frozenset({"ml/nb-0"})
        fake.down = True
        await idle.run_once()
        assert idle.reclaimable == frozenset(), "no reading, no eviction"
        assert [s.value for m in idle.metrics.failures.collect() for s in m.samples
                if s.name.endswith("_total")] == [1]
        fake.down = False
        await idle.run_once()
        assert idle.reclaimable == frozenset({"ml/nb-0"}), "the warning time was kept through the gap"
        idle.is_leader = lambda: False
        idle.stand_down()
        assert idle.reclaimable == frozenset() and _gauge(idle) == {}
