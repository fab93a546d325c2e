"""vGPU sharing at the extender (issue 18): the verbs see each node's cards as taken by bound pods' assignments, the
plan and binds on their way; a bind carries its pod's cards on the Binding (Volcano's DeviceReservation), so the
device plugin and the simulated kubelet find them; two pods are never given one card's last room, also between
sessions and across a restart; unreadable register annotations and device configs are reported, never fatal."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from extender.service.http import make_app
from extender.service.loop import CARDS_REASON, IGNORED_REASON, ConfSource, SessionLoop
from extender.service.metrics import ExtenderMetrics
from extender.service.plan import Plan
from tests.service.extender_state import RecordingClient, cluster_state, feed, make_extender, volcano_pod
from tests.unit.extender.engine.builders import configmap, node, podgroup, queue

pytestmark = pytest.mark.asyncio(loop_scope="session")

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder},
            {name: deviceshare, arguments: {deviceshare.VGPUEnable: true, deviceshare.SchedulePolicy: binpack}}]
"""
TWENTY = {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "20480"}
SIXTY = {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "61440"}


def gpu_node(name: str, cards: int = 1) -> dict[str, Any]:
    register = "".join(f"{name}-gpu{c},10,81920,NVIDIA-A100-SXM4-80GB,true,hami-core:" for c in range(cards))
    return node({"name": name, "annotations": {"volcano.sh/node-vgpu-register": register},
                 "alloc": {"cpu": "32", "memory": "256Gi", "volcano.sh/vgpu-number": str(10 * cards),
                           "volcano.sh/vgpu-memory": str(81920 * cards), "volcano.sh/vgpu-cores": str(100 * cards)}})


def vgpu_pod(name: str, group: str, limits: dict[str, str], **extra: Any) -> dict[str, Any]:
    return volcano_pod({"name": name, "group": group, "limits": limits, **extra})


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    path = tmp_path / "conf.yaml"
    path.write_text(CONF)
    return path


def _args(pod_doc: dict, names: list[str]) -> dict:
    return {"Pod": pod_doc, "Nodes": None, "NodeNames": names}


def _bind_body(pod_doc: dict, node_name: str) -> dict:
    meta = pod_doc["metadata"]
    return {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node_name}


def _bound_with(client: RecordingClient) -> dict[str, dict[str, str]]:
    return {key: annotations for verb, key, annotations in client.bodies if verb == "bind"}


async def test_a_gang_binds_with_each_members_cards_on_its_binding(aiohttp_client, conf):
    members = [vgpu_pod(f"ml/g-w-{i}", "g", TWENTY) for i in range(4)]
    docs = [gpu_node("n0", cards=2), queue({"name": "default"}), podgroup({"name": "ml/g", "min": 4}), *members]
    client = RecordingClient()
    extender = make_extender(docs, client, conf)
    await extender.loop.run_once()
    http = await aiohttp_client(make_app(extender, lambda: True, lambda: True))
    for member in members:
        body = await (await http.post("/extender/filter", json=_args(member, ["n0"]))).json()
        assert body["NodeNames"] == ["n0"]
    replies = await asyncio.wait_for(asyncio.gather(
        *(http.post("/extender/gang/bind", json=_bind_body(m, "n0")) for m in members)), timeout=1.5)
    assert [await r.json() for r in replies] == [{"Error": ""}] * 4
    bound = _bound_with(client)
    assert {k: a["volcano.sh/vgpu-ids-new"] for k, a in bound.items()} == {
        f"ml/g-w-{i}": "n0-gpu0,NVIDIA,20480,0:" for i in range(4)}  # binpack: one card holds all four
    for written in bound.values():
        assert written["volcano.sh/devices-to-allocate"] == written["volcano.sh/vgpu-ids-new"]
        assert written["volcano.sh/vgpu-node"] == "n0"
        assert written["volcano.sh/bind-phase"] == "allocating"
        assert written["volcano.sh/vgpu-time"].isdigit() and written["volcano.sh/bind-time"].isdigit()


async def test_single_pods_filter_by_card_room_and_a_bind_on_its_way_holds_its_cards(aiohttp_client, conf):
    busy = vgpu_pod("ml/busy", "busy", SIXTY, node="n1", phase="Running",
                    annotations={"volcano.sh/vgpu-ids-new": "n1-gpu0,NVIDIA,61440,0:", "volcano.sh/vgpu-node": "n1"})
    docs = [gpu_node("n0"), gpu_node("n1"), queue({"name": "default"}),
            podgroup({"name": "ml/busy", "min": 1, "phase": "Running"}), busy]
    client = RecordingClient()
    extender = make_extender(docs, client, conf)
    await extender.loop.run_once()
    # Two gangs of one arrive after the session: admitted, they pass filter without a plan, on card room alone.
    first, second = vgpu_pod("ml/a", "a", SIXTY), vgpu_pod("ml/b", "b", SIXTY)
    for doc in (podgroup({"name": "ml/a", "min": 1}), podgroup({"name": "ml/b", "min": 1}), first, second):
        feed(extender.state, doc)
    http = await aiohttp_client(make_app(extender, lambda: True, lambda: True))
    body = await (await http.post("/extender/filter", json=_args(first, ["n0", "n1"]))).json()
    assert body["NodeNames"] == ["n0"]  # n1's one card holds 60 GB of a running pod: its room is 20 GB
    assert "no vGPU card fits" in body["FailedNodes"]["n1"]
    body = await (await http.post("/extender/filter", json=_args(second, ["n0", "n1"]))).json()
    assert body["NodeNames"] == ["n0"]  # nothing holds n0's card yet
    assert (await (await http.post("/extender/gang/bind", json=_bind_body(first, "n0"))).json()) == {"Error": ""}
    # The watch has not shown ml/a bound yet: its bind's reservation keeps the second off the same card.
    body = await (await http.post("/extender/filter", json=_args(second, ["n0", "n1"]))).json()
    assert body["NodeNames"] == []
    refused = await (await http.post("/extender/gang/bind", json=_bind_body(second, "n0"))).json()
    assert "no vGPU card for pod ml/b" in refused["Error"]
    assert list(_bound_with(client)) == ["ml/a"]
    # Once the watch shows ml/a bound, its own annotation holds the card; the reservation is gone.
    bound = {**first, "spec": {**first["spec"], "nodeName": "n0"}, "metadata": {**first["metadata"], "annotations": {
        **first["metadata"]["annotations"], **_bound_with(client)["ml/a"]}}}
    feed(extender.state, bound)
    assert not extender.book.reserved
    extender.state.apply("DELETED", bound)  # and once it is gone, nothing holds the card
    assert extender.book.ledger("n0") is not None and extender.book.ledger("n0").summary()[0][:3] == (0, 81920, 0)


async def test_a_restarted_extender_sees_the_cards_bound_pods_hold(aiohttp_client, conf):
    bound = vgpu_pod("ml/old", "old", SIXTY, node="n0", phase="Running",
                     annotations={"volcano.sh/vgpu-ids-new": "n0-gpu0,NVIDIA,61440,0:", "volcano.sh/vgpu-node": "n0"})
    new = vgpu_pod("ml/new", "new", SIXTY)
    docs = [gpu_node("n0"), queue({"name": "default"}), podgroup({"name": "ml/old", "min": 1, "phase": "Running"}),
            podgroup({"name": "ml/new", "min": 1}), bound, new]
    extender = make_extender(docs, RecordingClient(), conf)  # a fresh service: nothing but the cluster
    await extender.loop.run_once()
    http = await aiohttp_client(make_app(extender, lambda: True, lambda: True))
    body = await (await http.post("/extender/filter", json=_args(new, ["n0"]))).json()
    assert body["NodeNames"] == []
    assert extender.plan.node_for("ml/new") is None


async def test_re_plan_gives_a_moved_member_cards_on_its_new_node(aiohttp_client, conf):
    members = [vgpu_pod(f"ml/g-w-{i}", "g", SIXTY) for i in range(2)]
    docs = [gpu_node("n0"), gpu_node("n1"), gpu_node("n2"), queue({"name": "default"}),
            podgroup({"name": "ml/g", "min": 2}), *members]
    client = RecordingClient()
    extender = make_extender(docs, client, conf)
    await extender.loop.run_once()
    planned = {m["metadata"]["name"]: extender.plan.node_for(f"ml/{m['metadata']['name']}") for m in members}
    assert sorted(planned.values()) == ["n0", "n1"]  # one 60 GB pod a card
    http = await aiohttp_client(make_app(extender, lambda: True, lambda: True))
    mover = members[0]
    taken = planned["g-w-1"]
    body = await (await http.post("/extender/filter", json=_args(mover, [taken, "n2"]))).json()
    assert body["NodeNames"] == ["n2"]  # the sibling's card on `taken` has no room left: only n2
    assert extender.plan.devices_for("ml/g-w-0")[0][0].uuid == "n2-gpu0"
    replies = await asyncio.wait_for(asyncio.gather(
        http.post("/extender/gang/bind", json=_bind_body(mover, "n2")),
        http.post("/extender/gang/bind", json=_bind_body(members[1], taken))), timeout=1.5)
    assert [await r.json() for r in replies] == [{"Error": ""}] * 2
    assert _bound_with(client)["ml/g-w-0"]["volcano.sh/vgpu-ids-new"] == "n2-gpu0,NVIDIA,61440,0:"


async def test_unreadable_register_annotation_and_device_config_are_reported_not_fatal(conf):
    broken = gpu_node("bad")
    broken["metadata"]["annotations"]["volcano.sh/node-vgpu-register"] = "GPU-x,ten,81920,NVIDIA,true,hami-core:"
    bad_config = configmap({"name": "kube-system/volcano-vgpu-device-config",
                            "data": {"device-config.yaml": "nvidia: {deviceSplitCount: many}"}})
    docs = [broken, gpu_node("good"), queue({"name": "default"}), podgroup({"name": "ml/a", "min": 1}),
            vgpu_pod("ml/a", "a", TWENTY)]
    state = cluster_state(docs)
    state.apply("ADDED", bad_config)  # as the ConfigMap reflector would hand it on
    client, registry = RecordingClient(), CollectorRegistry()
    loop = SessionLoop(state, Plan(ttl_s=60), client, ConfSource(conf),
                       ExtenderMetrics(registry, parked=lambda: 0, restarts=state.restarts))
    assert loop.term()
    outcome = await loop.run_once()
    await loop.recorder.flush()
    assert outcome is not None and outcome.new_plans["ml/a"].nodes == {"ml/a": "good"}
    events = {(e["involvedObject"]["kind"], e["involvedObject"]["name"]): e
              for verb, kind, e in client.bodies if verb == "create" and kind == "Event"}
    register = events[("Node", "bad")]
    assert register["reason"] == CARDS_REASON and "split 'ten'" in register["message"]
    assert events[("ConfigMap", "volcano-vgpu-device-config")]["reason"] == IGNORED_REASON
    assert registry.get_sample_value("lapilli_extender_ignored_objects", {"kind": "Node devices"}) == 1
    fixed = gpu_node("bad")
    feed(state, fixed)
    loop.report_ignored()
    assert registry.get_sample_value("lapilli_extender_ignored_objects", {"kind": "Node devices"}) == 0


async def test_a_planned_members_cards_are_not_given_to_a_pod_that_passes_without_a_plan(aiohttp_client, conf):
    members = [vgpu_pod(f"ml/g-w-{i}", "g", SIXTY) for i in range(2)]
    docs = [gpu_node("n0"), gpu_node("n1"), queue({"name": "default"}), podgroup({"name": "ml/g", "min": 2}),
            *members]
    extender = make_extender(docs, RecordingClient(), conf)
    await extender.loop.run_once()
    assert sorted(extender.plan.placements().values()) == ["n0", "n1"]  # planned, not bound
    late = vgpu_pod("ml/late", "late", SIXTY)
    for doc in (podgroup({"name": "ml/late", "min": 1}), late):
        feed(extender.state, doc)
    http = await aiohttp_client(make_app(extender, lambda: True, lambda: True))
    body = await (await http.post("/extender/filter", json=_args(late, ["n0", "n1"]))).json()
    assert body["NodeNames"] == [] and set(body["FailedNodes"]) == {"n0", "n1"}
    extender.plan.drop("ml/g")  # the plan gone (its permit timed out): the cards are free again
    body = await (await http.post("/extender/filter", json=_args(late, ["n0", "n1"]))).json()
    assert body["NodeNames"] == ["n0", "n1"]
