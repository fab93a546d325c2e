"""Gang-aware eviction through the service (issue 20): the shipped conf's gangpreempt evicts the chosen gangs whole
through the Eviction API, marks each pod first (`lapilli.io/evicted-by`, so the Job controller acts on its policy at
once), and records why with Volcano's Events — a Warning `Evict` on the pod ("Pod is evicted, because of …") and a
Normal `Evict` on its PodGroup — and the PodGroup's `lapilli.io/Evicted` condition, each naming the gang the room
is for. The cluster: two nodes of 3 GPUs, three low-priority gangs of 2, a high-priority gang of 3 waiting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from extender.service.core import PROMISED
from extender.service.loop import ConfSource, SessionLoop
from extender.service.metrics import ExtenderMetrics
from extender.service.plan import Plan
from extender.service.wire import ExtenderArgs
from lapilli.api.constants import EVICTED_BY_ANNOTATION
from tests.service.extender_state import RecordingClient, cluster_state, make_extender, volcano_pod
from tests.service.test_extender_events import ClockedRunner
from tests.unit.extender.engine.builders import node, pod, podgroup, priority_class, queue

pytestmark = pytest.mark.asyncio(loop_scope="session")

SHIPPED = Path(__file__).resolve().parents[2] / "manifests" / "scheduler" / "lapilli-scheduler.conf"
GPU = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}
REASON = "gangpreempt: gang ml/{} evicted whole (2 pod(s)) for gang ml/high (priority 1000 > 10)"


def _objects() -> list[dict[str, Any]]:
    docs = [node({"name": n, "alloc": {"cpu": "8", "memory": "8Gi", "nvidia.com/gpu": "3"}}) for n in ("n1", "n2")]
    docs += [queue({"name": "default"}), priority_class({"name": "low", "value": 10}),
             priority_class({"name": "high", "value": 1000})]
    places = {"low1": ("n1", "n1"), "low2": ("n1", "n2"), "low3": ("n2", "n2")}
    for minute, (gang, nodes) in enumerate(places.items()):
        pg = podgroup({"name": f"ml/{gang}", "min": 2, "phase": "Running", "priorityClassName": "low"})
        pg["metadata"]["uid"] = f"uid-{gang}"
        docs.append(pg)
        docs += [pod({"name": f"ml/{gang}-w-{i}", "group": gang, "req": GPU, "node": n, "phase": "Running",
                      "priorityClassName": "low", "created": f"2026-01-01T00:0{minute}:00Z"})
                 for i, n in enumerate(nodes)]
    docs.append(podgroup({"name": "ml/high", "min": 3, "phase": "Inqueue", "priorityClassName": "high"}))
    docs += [pod({"name": f"ml/high-w-{i}", "group": "high", "req": GPU, "priorityClassName": "high"})
             for i in range(3)]
    return docs


async def test_gangpreempt_evicts_whole_gangs_marks_them_and_says_for_whom() -> None:
    state = cluster_state(_objects())
    client = RecordingClient()
    registry = CollectorRegistry()
    metrics = ExtenderMetrics(registry, parked=lambda: 0, restarts=state.restarts)
    loop = SessionLoop(state, Plan(ttl_s=60), client, ConfSource(SHIPPED), metrics, runner=ClockedRunner(state))
    await loop.run_once()
    await loop.recorder.flush()

    evicted = sorted(args for verb, args in client.calls if verb == "evict")
    assert evicted == [("ml", "low2-w-0"), ("ml", "low2-w-1"), ("ml", "low3-w-0"), ("ml", "low3-w-1")]
    marks = {args[2]: body["metadata"]["annotations"][EVICTED_BY_ANNOTATION]
             for (verb, args), (_, kind, body) in zip(
                 [c for c in client.calls if c[0] == "patch"], [b for b in client.bodies if b[0] == "patch"],
                 strict=True) if kind == "Pod"}
    assert marks == {f"low{g}-w-{i}": REASON.format(f"low{g}") for g in (2, 3) for i in (0, 1)}
    for i in (0, 1):  # each mark goes out before its eviction
        assert client.calls.index(("patch", ("Pod", "ml", f"low2-w-{i}"))) < client.calls.index(
            ("evict", ("ml", f"low2-w-{i}")))

    events = [body for verb, kind, body in client.bodies if verb == "create" and kind == "Event"
              and body["reason"] == "Evict"]
    on_pods = {e["involvedObject"]["name"]: (e["type"], e["message"]) for e in events
               if e["involvedObject"]["kind"] == "Pod"}
    assert on_pods["low2-w-0"] == ("Warning", f"Pod is evicted, because of {REASON.format('low2')}")
    assert set(on_pods) == {"low2-w-0", "low2-w-1", "low3-w-0", "low3-w-1"}
    on_groups = [(e["involvedObject"]["name"], e["involvedObject"]["uid"], e["type"], e["message"], e["count"])
                 for e in events if e["involvedObject"]["kind"] == "PodGroup"]
    # One Event per PodGroup: its second pod's repeat bumps it.
    assert sorted(on_groups) == [("low2", "uid-low2", "Normal", REASON.format("low2"), 1),
                                 ("low3", "uid-low3", "Normal", REASON.format("low3"), 1)]
    bumps = [body for verb, kind, body in client.bodies if verb == "patch" and kind == "Event"]
    assert len(bumps) == 2

    statuses = {args[2]: body["status"] for (verb, args), (_, kind, body) in zip(
        [c for c in client.calls if c[0] == "patch_status"], [b for b in client.bodies if b[0] == "patch_status"],
        strict=True) if kind == "PodGroup"}
    condition = next(c for c in statuses["low2"]["conditions"] if c["type"] == "lapilli.io/Evicted")
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "True", "GangPreempted", REASON.format("low2"))
    assert "lapilli.io/Evicted" not in [c["type"] for c in statuses.get("low1", {}).get("conditions", [])]
    labels = {"action": "gangpreempt", "queue": "default"}
    assert registry.get_sample_value("lapilli_evictions_by_action_total", labels) == 4
    assert registry.get_sample_value("lapilli_evictions_in_flight") == 0  # every Eviction call answered


async def test_a_pod_that_needs_no_plan_does_not_take_the_room_promised_to_the_preemptor() -> None:
    """Between the session that evicted for `ml/high` (its members pipelined onto the victims' room) and the one
    that binds them, kube-scheduler sees the victims' room free once they are gone. A gang of one passes filter
    without a plan; it must not take that room back (a victim's pod made again would, and the preemptor would have
    evicted for nothing): it is refused on the promised nodes, where it fits only the room nobody waits for."""
    one = podgroup({"name": "ml/one", "min": 1, "phase": "Running", "priorityClassName": "low"})
    extender = make_extender([*_objects(), one], RecordingClient(), conf=SHIPPED)
    await extender.loop.run_once()
    latest = extender.loop.latest
    assert latest is not None
    # high's three members wait on n1 (low2's pod there) and n2 (low2's other, low3's two: one GPU left over).
    gpus = {node: room[latest.dims.index["nvidia.com/gpu"]] for node, room in latest.promised.items()}
    assert gpus == {"n1": 0, "n2": 1000}, gpus

    def single(name: str, req: dict[str, str]) -> dict[str, Any]:
        doc = volcano_pod({"name": f"ml/{name}", "group": "one", "req": req, "priorityClassName": "low"})
        extender.state.apply("ADDED", doc)
        return doc

    one_gpu = extender.filter(ExtenderArgs(Pod=single("one-gpu", GPU), Nodes=None, NodeNames=["n1", "n2"]))
    assert one_gpu["NodeNames"] == ["n2"] and one_gpu["FailedNodes"] == {"n1": PROMISED}, one_gpu
    two = extender.filter(ExtenderArgs(Pod=single("two-gpu", {**GPU, "nvidia.com/gpu": "2"}), Nodes=None,
                                       NodeNames=["n1", "n2"]))
    assert two["NodeNames"] == [] and set(two["FailedNodes"]) == {"n1", "n2"}, two
    # A pod that fits the room no one waits for passes, to the node a session would give it (`pick`): n1 or n2,
    # whichever binpack fills first, never refused.
    cpu = extender.filter(ExtenderArgs(Pod=single("one-cpu", {"cpu": "1", "memory": "1Gi"}), Nodes=None,
                                       NodeNames=["n1", "n2"]))
    assert cpu["NodeNames"] == ["n1"] and not cpu["FailedNodes"], cpu
