"""The leader persists each queue's decayed usage on the Queue, and a new leader continues from what was persisted
(extender/service/usage.py). The write client stands in for the API server and the watch: a patch lands in the
state's stored Queue and comes back as a watch event, as it would."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from extender.engine.run import parse_scheduler_conf
from extender.service.state import ClusterState
from extender.service.usage import UsageLoop, UsageMetrics
from lapilli.usage import USAGE_ANNOTATION, UsageRecord, advance, parse_record
from tests.service.extender_state import RecordingClient, cluster_state, feed
from tests.unit.extender.engine.builders import node, pod, podgroup, queue

pytestmark = pytest.mark.asyncio(loop_scope="session")

CONF = parse_scheduler_conf("""
actions: enqueue, allocate
tiers:
- plugins: [{name: fairshare, arguments: {halfLife: 1h, samplingInterval: 1s}}, {name: gang}, {name: proportion}]
""")
T0 = 1_704_672_000.0
HALF_LIFE = 3600.0
INTERVAL = 1.0  # CONF's samplingInterval


class ApiServer(RecordingClient):
    """Applies a Queue's annotation patch to the stored object and hands it back as a watch event."""

    def __init__(self, state: ClusterState) -> None:
        super().__init__()
        self.state = state

    async def patch(self, res: Any, name: str, patch: Any, namespace: str | None = None) -> dict:
        await super().patch(res, name, patch, namespace)
        stored = dict(self.state.store("Queue")[name])
        meta = dict(stored["metadata"])
        meta["annotations"] = {**(meta.get("annotations") or {}), **patch["metadata"]["annotations"]}
        stored["metadata"] = meta
        feed(self.state, stored)
        return stored


def _objects() -> list[dict[str, Any]]:
    return [
        node({"name": "n1", "alloc": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4"}}),
        queue({"name": "lab-a"}), queue({"name": "lab-a-alice", "parent": "lab-a"}), queue({"name": "lab-b"}),
        podgroup({"name": "a/train", "queue": "lab-a-alice", "min": 2, "phase": "Running"}),
        pod({"name": "a/train-w-0", "group": "train", "req": {"nvidia.com/gpu": "1"}, "node": "n1", "phase": "Running"}),
        pod({"name": "a/train-w-1", "group": "train", "req": {"nvidia.com/gpu": "1"}, "node": "n1", "phase": "Running"}),
    ]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def _leader(state: ClusterState, client: ApiServer, clock: Clock) -> UsageLoop:
    return UsageLoop(lambda: state.copy(), lambda: CONF, client, UsageMetrics(CollectorRegistry()),
                     is_leader=lambda: True, clock=clock)


def _gpu_seconds(state: ClusterState, name: str) -> float:
    text = state.store("Queue")[name]["metadata"]["annotations"][USAGE_ANNOTATION]
    return parse_record(text).usage.get("nvidia.com/gpu", 0.0)


async def test_the_leader_persists_and_a_new_leader_continues_from_the_persisted_value() -> None:
    state = cluster_state(_objects())
    client, clock = ApiServer(state), Clock()
    first = _leader(state, client, clock)
    assert await first.run_once() == 2  # the user's queue and its lab start their clocks; lab-b holds nothing
    assert {c[1][2] for c in client.calls} == {"lab-a", "lab-a-alice"}
    clock.now += INTERVAL
    await first.run_once()
    after_one = advance({}, {"nvidia.com/gpu": 2000.0}, INTERVAL, HALF_LIFE)["nvidia.com/gpu"]
    assert _gpu_seconds(state, "lab-a-alice") == pytest.approx(after_one)
    assert _gpu_seconds(state, "lab-a") == pytest.approx(after_one)  # each level keeps its own record

    # The leader is gone with its memory; another replica reads the cluster afresh (the persisted Queues) and leads.
    persisted = [json.loads(json.dumps(o)) for kind in ("Node", "Queue", "PodGroup", "Pod")
                 for o in state.store(kind).values()]
    successor_state = cluster_state(persisted)
    successor = _leader(successor_state, ApiServer(successor_state), clock)
    clock.now += INTERVAL
    await successor.run_once()
    uninterrupted = advance({}, {"nvidia.com/gpu": 2000.0}, 2 * INTERVAL, HALF_LIFE)["nvidia.com/gpu"]
    assert _gpu_seconds(successor_state, "lab-a-alice") == pytest.approx(uninterrupted, rel=1e-9)
    assert "lapilli.io/decayed-usage" not in (successor_state.store("Queue")["lab-b"]["metadata"].get("annotations")
                                              or {})


async def test_a_follower_writes_nothing_and_an_unreadable_record_is_replaced() -> None:
    objects = _objects()
    objects[2]["metadata"]["annotations"] = {USAGE_ANNOTATION: "{broken"}
    state = cluster_state(objects)
    client, clock = ApiServer(state), Clock()
    asked = asyncio.Event()

    def following() -> bool:
        asked.set()
        return False

    follower = UsageLoop(lambda: state.copy(), lambda: CONF, client, UsageMetrics(CollectorRegistry()),
                         is_leader=following, clock=clock)
    task = asyncio.create_task(follower.run_forever())
    await asyncio.wait_for(asked.wait(), 30)  # a sampling interval (1s) passed and the loop asked who leads
    task.cancel()
    assert client.calls == []
    leader = _leader(state, client, clock)
    await leader.run_once()
    assert leader.metrics.unreadable.labels("lab-a-alice")._value.get() == 1
    assert parse_record(state.store("Queue")["lab-a-alice"]["metadata"]["annotations"][USAGE_ANNOTATION]).at == T0


async def test_nothing_is_sampled_without_a_fairshare_entry() -> None:
    state = cluster_state(_objects())
    client = ApiServer(state)
    loop = UsageLoop(lambda: state.copy(), lambda: parse_scheduler_conf(None), client,
                     UsageMetrics(CollectorRegistry()), clock=Clock())
    assert await loop.run_once() == 0 and client.calls == []


async def test_a_queue_that_held_nothing_since_its_last_sample_is_not_counted_for_the_whole_gap() -> None:
    """The leader rewrites only the records of queues that hold something, so a queue idle overnight keeps last
    evening's record. What it holds now is counted back at most two sampling intervals (Kueue's sampling adds the
    current usage once per interval), never as if held since last evening."""
    objects = _objects()
    evening = UsageRecord(T0 - 86400, HALF_LIFE, {"nvidia.com/gpu": 1000.0 * 3600})  # 1 GPU·h, a day ago
    objects[2]["metadata"]["annotations"] = {USAGE_ANNOTATION: evening.to_annotation()}
    state = cluster_state(objects)
    leader = _leader(state, ApiServer(state), Clock())
    await leader.run_once()
    decayed = advance(evening.usage, {}, 86400 - 2 * INTERVAL, HALF_LIFE)
    expected = advance(decayed, {"nvidia.com/gpu": 2000.0}, 2 * INTERVAL, HALF_LIFE)["nvidia.com/gpu"]
    assert _gpu_seconds(state, "lab-a-alice") == pytest.approx(expected)
