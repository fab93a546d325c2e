"""An object the scheduler cannot read is left out of scheduling, and said so: the leader's session loop records a
Warning Event `InvalidObject` on it (once per reason and term) and counts it in
`lapilli_extender_ignored_objects{kind}`; once fixed or deleted it counts no more."""

from __future__ import annotations

import copy

import pytest
from prometheus_client import CollectorRegistry

from extender.service.loop import IGNORED_REASON, ConfSource, SessionLoop
from extender.service.metrics import ExtenderMetrics
from extender.service.plan import Plan
from tests.service.extender_state import RecordingClient, cluster_state, feed
from tests.unit.extender.engine.builders import node, pod, podgroup, queue

pytestmark = pytest.mark.asyncio(loop_scope="session")


def ignored(registry: CollectorRegistry, kind: str) -> float | None:
    return registry.get_sample_value("lapilli_extender_ignored_objects", {"kind": kind})


async def test_unreadable_pod_and_podgroup_get_an_event_and_a_count_until_fixed() -> None:
    good_pod = pod({"name": "ml/w-0", "group": "g", "req": {"cpu": "1"}})
    bad_pod = copy.deepcopy(good_pod)
    bad_pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    bad_group = podgroup({"name": "ml/g", "min": 1, "phase": "Inqueue"})
    bad_group["spec"]["minMember"] = "two"
    state = cluster_state([node({"name": "n0", "alloc": {"cpu": "8"}}), queue({"name": "default"}), bad_group, bad_pod])
    client, registry = RecordingClient(), CollectorRegistry()
    loop = SessionLoop(state, Plan(ttl_s=60), client, ConfSource(None),
                       ExtenderMetrics(registry, parked=lambda: 0, restarts=state.restarts))
    assert loop.term()
    for _ in range(2):  # the second session tells nothing new
        await loop.run_once()
        await loop.recorder.flush()
    events = [body for verb, kind, body in client.bodies if verb == "create" and kind == "Event"]
    assert sorted((e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"], e["type"]) for e in events) == [
        ("Pod", "w-0", IGNORED_REASON, "Warning"), ("PodGroup", "g", IGNORED_REASON, "Warning")]
    by_kind = {e["involvedObject"]["kind"]: e["message"] for e in events}
    assert "lots" in by_kind["Pod"] and "spec.minMember" in by_kind["PodGroup"]
    assert (ignored(registry, "Pod"), ignored(registry, "PodGroup"), ignored(registry, "Node")) == (1, 1, 0)

    feed(state, good_pod)
    state.apply("DELETED", bad_group)
    loop.report_ignored()
    assert (ignored(registry, "Pod"), ignored(registry, "PodGroup")) == (0, 0)
    assert not state.ignored
