"""The session loop's PodGroup events and Queue status writes, end to end through the service: which events a
session records (Volcano's RecordJobStatusEvent), how repeats bump one Event instead of piling up new ones, and
how often Queue status goes out. Sessions run on a clock the tests move."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from extender.engine.conf import SchedulerConf
from extender.service.loop import ConfSource, SessionLoop
from extender.service.metrics import ExtenderMetrics
from extender.service.pacing import EVENT_REPEAT_S, Pacer
from extender.service.plan import Plan, overlay
from extender.service.session import Outcome, run
from extender.service.state import ClusterState
from tests.service.extender_state import RecordingClient, cluster_state, feed
from tests.unit.extender.engine.builders import node, pod, podgroup, queue

pytestmark = pytest.mark.asyncio(loop_scope="session")

GPU = {"cpu": "1", "nvidia.com/gpu": "1"}


class ClockedRunner:
    """ThreadRunner's session, in line and with the pacer's clock in the test's hands."""

    def __init__(self, state: ClusterState) -> None:
        self.state, self.pacer, self.now = state, Pacer(), 1000.0

    async def __call__(self, placements: dict[str, str], conf: SchedulerConf,
                       idle: frozenset[str] = frozenset(),
                       devices: dict[str, Any] | None = None) -> Outcome | None:
        snap = overlay(self.state.copy(), placements, devices)
        snap.idle_reclaimable = idle
        pgs, queues = self.state.store("PodGroup"), self.state.store("Queue")
        return run(snap, conf, placements, pgs, queues, self.pacer, now=self.now)


def _gpu_nodes(count: int, start: int = 0) -> list[dict[str, Any]]:
    return [node({"name": f"n{i}", "alloc": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "1"}})
            for i in range(start, start + count)]


def _gang(name: str, size: int, **extra: Any) -> list[dict[str, Any]]:
    pg = podgroup({"name": f"ml/{name}", "min": size, "phase": "Inqueue"})
    pg["metadata"]["uid"] = f"uid-{name}"
    return [pg, *(pod({"name": f"ml/{name}-w-{i}", "group": name, "req": GPU, **extra}) for i in range(size))]


def _loop(state: ClusterState) -> tuple[SessionLoop, RecordingClient, ClockedRunner]:
    client = RecordingClient()
    runner = ClockedRunner(state)
    metrics = ExtenderMetrics(CollectorRegistry(), parked=lambda: 0, restarts=state.restarts)
    loop = SessionLoop(state, Plan(ttl_s=60), client, ConfSource(None), metrics, runner=runner)  # type: ignore[arg-type]
    return loop, client, runner


async def _session(loop: SessionLoop) -> None:
    await loop.run_once()
    await loop.recorder.flush()


def _events(client: RecordingClient) -> list[tuple[str, Any]]:
    return [(verb, body) for verb, kind, body in client.bodies if kind == "Event"]


def _queue_writes(client: RecordingClient) -> list[Any]:
    return [body["status"] for verb, kind, body in client.bodies if kind == "Queue"]


async def test_a_gang_that_cannot_fit_gets_one_unschedulable_event_like_volcanos():
    state = cluster_state([*_gpu_nodes(3), queue({"name": "default"}), *_gang("toobig", 4)])
    loop, client, _ = _loop(state)
    await _session(loop)
    [(verb, event)] = _events(client)
    assert verb == "create"
    assert event["involvedObject"] == {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "name": "toobig", "namespace": "ml",
        "uid": "uid-toobig", "resourceVersion": "",
    }
    assert event["metadata"]["namespace"] == "ml" and event["metadata"]["name"].startswith("toobig.")
    assert (event["type"], event["reason"], event["count"]) == ("Warning", "Unschedulable", 1)
    assert event["source"] == {"component": "volcano"}
    # Every task is still Pending after the session (the gang was discarded whole); the fit errors are the
    # condition's.
    assert event["message"] == ("4/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, "
                                "4 minAvailable; Pending: 4 Unschedulable")


async def test_a_gang_that_stays_unschedulable_bumps_its_event_once_per_repeat_interval():
    state = cluster_state([*_gpu_nodes(3), queue({"name": "default"}), *_gang("toobig", 4)])
    loop, client, runner = _loop(state)
    start = runner.now
    await _session(loop)
    for step in range(1, 20):  # five sessions a second, as a busy cluster runs them
        runner.now = start + step * 0.2
        await _session(loop)
    assert len(_events(client)) == 1, "repeats within the interval are not written"
    runner.now = start + EVENT_REPEAT_S
    await _session(loop)
    (_, created), (verb, patch) = _events(client)
    assert verb == "patch" and patch["count"] == 2 and "lastTimestamp" in patch
    assert ("patch", ("Event", "ml", created["metadata"]["name"])) in client.calls, "the same Event, bumped"


async def test_a_gang_whose_pods_are_bound_gets_scheduled_and_a_planned_one_gets_nothing_yet():
    state = cluster_state([*_gpu_nodes(4), queue({"name": "default"}), *_gang("fits", 4)])
    loop, client, runner = _loop(state)
    await _session(loop)
    assert loop.plan.gangs, "the gang was planned"
    assert _events(client) == [], "a gang on its way through bind is neither unschedulable nor scheduled yet"

    # kube-scheduler bound the pods: the API server now shows them Running, the PodGroup still Inqueue.
    for i in range(4):
        feed(state, pod({"name": f"ml/fits-w-{i}", "group": "fits", "req": GPU, "node": f"n{i}", "phase": "Running"}))
        loop.plan.forget_pod(f"ml/fits-w-{i}")
    runner.now += 1
    await _session(loop)
    [(verb, event)] = _events(client)
    assert verb == "create"
    assert (event["type"], event["reason"], event["message"]) == ("Normal", "Scheduled", "pod group is ready")
    assert ("patch_status", ("PodGroup", "ml", "fits")) in client.calls


async def test_a_running_gang_whose_status_does_not_change_gets_no_event():
    docs = [*_gpu_nodes(2), queue({"name": "default"}), *_gang("steady", 2)]
    for i, doc in enumerate(docs[-2:]):
        doc["spec"]["nodeName"], doc["status"]["phase"] = f"n{i}", "Running"
    docs[-3]["status"] = {"phase": "Running", "running": 2, "conditions": [
        {"type": "Scheduled", "status": "True", "reason": "tasks in gang are ready to be scheduled"}]}
    state = cluster_state(docs)
    loop, client, _ = _loop(state)
    await _session(loop)
    assert not [c for c in client.calls if c[1][0] == "PodGroup"], "nothing to write"
    assert _events(client) == []


async def test_queue_allocated_goes_out_at_most_once_a_second_and_the_latest_value_wins():
    state = cluster_state([*_gpu_nodes(3), queue({"name": "default"})])
    loop, client, runner = _loop(state)
    start = runner.now

    def running(i: int) -> None:
        [pg, member] = _gang(f"solo{i}", 1, node=f"n{i}", phase="Running")
        feed(state, pg)
        feed(state, member)

    running(0)
    await _session(loop)
    assert _queue_writes(client) == [{"allocated": {"cpu": "1", "nvidia.com/gpu": "1", "pods": "1"}}]
    # The stored status follows (as the watch would show the patch); more pods start within the second.
    feed(state, {**queue({"name": "default"}), "status": {"state": "Open", "allocated": _queue_writes(client)[0]
                                                           ["allocated"]}})
    for step, i in ((0.3, 1), (0.6, 2)):
        running(i)
        runner.now = start + step
        await _session(loop)
    assert len(_queue_writes(client)) == 1, "no second write within the second"
    # The cluster goes quiet: the session the loop runs every period still writes the latest value.
    runner.now = start + 1.0
    await _session(loop)
    assert _queue_writes(client)[1:] == [{"allocated": {"cpu": "3", "nvidia.com/gpu": "3", "pods": "3"}}]


async def test_a_queue_without_state_gets_it_at_once_even_within_the_second():
    state = cluster_state([*_gpu_nodes(1), queue({"name": "default"})])
    loop, client, runner = _loop(state)
    for doc in _gang("solo", 1, node="n0", phase="Running"):
        feed(state, doc)
    await _session(loop)
    assert len(_queue_writes(client)) == 1
    feed(state, {**queue({"name": "default"}), "status": {}})
    runner.now += 0.2
    await _session(loop)
    assert _queue_writes(client)[1]["state"] == "Open"
