"""A planned pod the service has bound stays assumed on its node for the sessions until their own copy of the
cluster shows it there (`Plan.assumed`, `SETTLING_S`). The session process hears of a bind after the service does;
a session that stopped assuming the pod at once saw its room free, planned another gang into it, and kube-scheduler
(which has the pod there) did not offer that node: filter re-planned 0.06-0.16 of the gang pods of a 3,000-pod
burst (bench/README). A pod bound with no plan (filter picked its node) is held the same way (`Plan.bound`)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from extender.service.plan import SETTLING_S, Plan
from lapilli.devices.assign import PodDevices
from tests.service.extender_state import RecordingClient, feed, make_extender, volcano_pod
from tests.unit.extender.engine.builders import node, podgroup, queue

ASYNC = pytest.mark.asyncio(loop_scope="session")

GPU = {"cpu": "1", "nvidia.com/gpu": "1"}


def _gang(name: str, size: int, on: str | None = None) -> list[dict[str, Any]]:
    pods = [volcano_pod({"name": f"ml/{name}-{i}", "group": name, "req": GPU, **({"node": on} if on else {})})
            for i in range(size)]
    return [podgroup({"name": f"ml/{name}", "min": size, "phase": "Inqueue"}), *pods]


def _cluster(gpus: int) -> list[dict[str, Any]]:
    return [node({"name": "n0", "alloc": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": str(gpus)}}),
            queue({"name": "default"})]


@ASYNC
async def test_a_gang_bound_before_the_sessions_copy_shows_it_keeps_its_room():
    extender = make_extender([*_cluster(4), *_gang("a", 4)])
    loop = extender.loop
    outcome = await loop.run_once()
    assert outcome is not None and extender.plan.gangs["ml/a"].nodes == {f"ml/a-{i}": "n0" for i in range(4)}
    for i in range(4):  # bound; the state the sessions read has not heard of it yet
        assert await extender.bind_now("ml", f"a-{i}", "n0", f"ml-a-{i}") == ""
    assert extender.plan.gangs == {}, "the verbs no longer answer from a plan for bound pods"
    for doc in _gang("b", 4):
        feed(extender.state, doc)
    outcome = await loop.run_once()
    assert outcome is not None and "ml/a" not in outcome.new_plans, "gang a is where it was bound, not planned again"
    assert "ml/b" not in outcome.new_plans, "n0's four GPUs are gang a's"
    assert outcome.reasons["ml/b"].message.endswith("pods placeable")


@ASYNC
async def test_a_single_pod_bound_with_no_plan_keeps_its_room_too():
    """Filter picks a node for a pod of one member and the service binds it with no plan: the sessions' copy hears
    of that bind as late as of a gang's, and must not give the room to a gang meanwhile (the filter of that gang's
    members would then find its planned node not offered, and move them)."""
    single = [podgroup({"name": "ml/s", "min": 1, "phase": "Inqueue"}),
              volcano_pod({"name": "ml/s-0", "group": "s", "req": {"cpu": "1", "nvidia.com/gpu": "2"}})]
    extender = make_extender([*_cluster(4), *single])
    await extender.loop.run_once()
    extender.plan.drop("ml/s")  # as a pod filter picked a node for, unplanned
    assert await extender.bind_now("ml", "s-0", "n0", "ml-s-0") == ""
    assert extender.plan.assumed()[0] == {"ml/s-0": "n0"}
    for doc in _gang("b", 4):
        feed(extender.state, doc)
    outcome = await extender.loop.run_once()
    assert outcome is not None and "ml/b" not in outcome.new_plans, "two of n0's four GPUs are the single pod's"
    feed(extender.state, volcano_pod({"name": "ml/s-0", "group": "s", "req": {"cpu": "1", "nvidia.com/gpu": "2"},
                                      "node": "n0"}))
    for doc in _gang("c", 2):
        feed(extender.state, doc)
    outcome = await extender.loop.run_once()
    assert outcome is not None and outcome.new_plans["ml/c"].nodes == {"ml/c-0": "n0", "ml/c-1": "n0"}, (
        "once the copy shows it bound, the pod is counted once: the other two GPUs are free")


@ASYNC
async def test_a_bound_pod_the_sessions_copy_shows_counts_once():
    extender = make_extender([*_cluster(8), *_gang("a", 4)])
    loop = extender.loop
    await loop.run_once()
    for i in range(4):
        assert await extender.bind_now("ml", f"a-{i}", "n0", f"ml-a-{i}") == ""
        feed(extender.state, volcano_pod({"name": f"ml/a-{i}", "group": "a", "req": GPU, "node": "n0"}))
    assert set(extender.plan.assumed()[0]) == {f"ml/a-{i}" for i in range(4)}, "still assumed for a while"
    for doc in _gang("b", 4):
        feed(extender.state, doc)
    outcome = await loop.run_once()
    assert outcome is not None and outcome.new_plans["ml/b"].nodes == {f"ml/b-{i}": "n0" for i in range(4)}, (
        "the other four GPUs are free: a bound pod is not counted again where it is assumed")


@ASYNC
async def test_a_gang_the_sessions_copy_shows_bound_is_not_one_on_its_way_through_bind():
    """Its status is written as for any bound gang (Running, and an eviction's condition), not held back as for a
    gang kube-scheduler is still walking through bind, though the plan still lists its pods for other copies."""
    fresh = podgroup({"name": "ml/a", "min": 2})
    fresh["status"] = {}
    client = RecordingClient()
    extender = make_extender([*_cluster(4), fresh, *_gang("a", 2)[1:]], client)
    await extender.loop.run_once()
    for i in range(2):
        assert await extender.bind_now("ml", f"a-{i}", "n0", f"ml-a-{i}") == ""
        feed(extender.state, volcano_pod({"name": f"ml/a-{i}", "group": "a", "req": GPU, "node": "n0"}))
    assert set(extender.plan.assumed()[0]) == {"ml/a-0", "ml/a-1"}
    await extender.loop.run_once()
    writes = [body["status"] for verb, kind, body in client.bodies if verb == "patch_status" and kind == "PodGroup"]
    assert [w["phase"] for w in writes] == ["Running"]


def test_assumed_until_settled_then_gone_and_never_for_a_pod_that_went_away():
    plan = Plan(ttl_s=60)
    cards: PodDevices = ((),)
    now = time.monotonic()
    plan.add("ml/a", 2, {"ml/a-0": "n0", "ml/a-1": "n1"}, now, devices={"ml/a-0": cards})
    before = plan.assumed()
    assert plan.assumed() is before, "an unchanged plan is the same objects (the session process skips resending)"
    plan.forget_pod("ml/a-0", "n0", now)
    plan.forget_pod("ml/a-1")  # ended or deleted: it holds no room
    assert plan.node_for("ml/a-0") is None and plan.gangs == {}
    assert plan.assumed() == ({"ml/a-0": "n0"}, {"ml/a-0": cards})
    assert plan.placements() == {} and plan.devices_on("n0") == [], "the verbs' view has no bound pods"
    plan.forget_pod("ml/a-0")  # deleted while settling: a pod made again under its name is a new one
    assert plan.assumed() == ({}, {})
    plan.add("ml/b", 1, {"ml/b-0": "n0"}, now)
    plan.forget_pod("ml/b-0", "n1", now)
    plan.expire(now + SETTLING_S / 2)
    assert plan.assumed()[0] == {"ml/b-0": "n1"}, "where it was bound, not where it was planned"
    plan.expire(now + SETTLING_S + 1)
    assert plan.assumed() == ({}, {})
    verbs_view = plan.placements()
    plan.bound("ml/c-0", "n2", now, cards)  # bound with no plan: assumed the same, with its cards
    assert plan.gangs == {} and plan.assumed() == ({"ml/c-0": "n2"}, {"ml/c-0": cards})
    assert plan.placements() is verbs_view, "the plan did not change: the verbs' cached view of it stays"
    plan.forget_pod("ml/c-0", "n2", now)  # the watch hears of that bind: nothing changes
    assert plan.assumed() == ({"ml/c-0": "n2"}, {"ml/c-0": cards})
    plan.forget_pod("ml/c-0")
    assert plan.assumed() == ({}, {})
