"""The extender's HTTP verbs on an aiohttp test server: Go's capitalised wire format, nulls, both node forms,
answers from the plan, and bad bodies turned into a 400 with a reason.

The cluster state is fed objects directly (no reflector runs); writes go to a recording stand-in for the one
write client, since this tier checks the verbs' contract, not the API server (that is tests/e2e).
"""

from __future__ import annotations

import asyncio

import pytest

from extender.service.core import Extender
from extender.service.http import make_app
from extender.service.wire import ExtenderArgs
from tests.service.extender_state import RecordingClient, make_extender, volcano_pod
from tests.unit.extender.engine.builders import node, pod, podgroup, queue

# Fixtures default to the session loop (pyproject), so the tests run on it too.
pytestmark = pytest.mark.asyncio(loop_scope="session")


def _objects() -> list[dict]:
    docs = [node({"name": f"n{i}", "alloc": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "1"}}) for i in range(3)]
    docs.append(queue({"name": "default"}))
    docs.append(podgroup({"name": "ml/fits", "min": 2, "phase": "Inqueue"}))
    docs.append(podgroup({"name": "ml/toobig", "min": 4, "phase": "Inqueue"}))
    docs.append(podgroup({"name": "ml/nowhere", "min": 2, "phase": "Inqueue"}))
    for i in range(2):
        docs.append(pod({"name": f"ml/nowhere-w-{i}", "group": "nowhere", "req": {"cpu": "1"},
                         "nodeSelector": {"zone": "mars"}}))
    for i in range(2):
        docs.append(volcano_pod({"name": f"ml/fits-w-{i}", "group": "fits", "req": {"cpu": "1", "nvidia.com/gpu": "1"}}))
    for i in range(4):
        docs.append(volcano_pod({"name": f"ml/toobig-w-{i}", "group": "toobig",
                                 "req": {"cpu": "1", "nvidia.com/gpu": "1"}}))
    return docs


@pytest.fixture
async def served(aiohttp_client):
    client = RecordingClient()
    extender = make_extender(_objects(), client)
    await extender.loop.run_once()
    http = await aiohttp_client(make_app(extender, lambda: True, lambda: extender.state.synced))
    return http, extender, client


def _args(pod_doc: dict, names: list[str] | None, nodes: list[str] | None = None) -> dict:
    node_list = None if nodes is None else {"items": [{"metadata": {"name": n}} for n in nodes]}
    return {"Pod": pod_doc, "Nodes": node_list, "NodeNames": names}


async def test_filter_answers_a_planned_member_with_its_node_alone(served):
    http, extender, _ = served
    member = pod({"name": "ml/fits-w-0", "group": "fits", "req": {"cpu": "1", "nvidia.com/gpu": "1"}})
    resp = await http.post("/extender/filter", json=_args(member, ["n0", "n1", "n2"]))
    assert resp.status == 200
    body = await resp.json()
    assert set(body) >= {"NodeNames", "FailedNodes", "Error"}
    assert body["NodeNames"] == [extender.plan.node_for("ml/fits-w-0")]
    assert body["Error"] == ""


async def test_filter_accepts_the_node_list_form_too(served):
    http, _, _ = served
    plain = pod({"name": "ml/solo", "req": {"cpu": "1"}})
    resp = await http.post("/extender/filter", json=_args(plain, None, nodes=["n0", "n1"]))
    assert (await resp.json())["NodeNames"] == ["n0", "n1"]


async def test_a_gang_that_cannot_fit_whole_fails_every_node_with_one_reason(served):
    http, _, _ = served
    member = pod({"name": "ml/toobig-w-0", "group": "toobig", "req": {"cpu": "1", "nvidia.com/gpu": "1"}})
    body = await (await http.post("/extender/filter", json=_args(member, ["n0", "n1", "n2"]))).json()
    assert body["NodeNames"] == []
    reasons = set(body["FailedNodes"].values())
    assert reasons == {"gang ml/toobig: 0/4 pods placeable"}
    # Short of GPUs: evicting pods could make room, so kube-scheduler may try preemption (Unschedulable).
    assert body["FailedAndUnresolvableNodes"] == {}


async def test_a_gang_no_node_could_ever_take_is_unresolvable(served):
    http, _, _ = served
    member = pod({"name": "ml/nowhere-w-0", "group": "nowhere", "req": {"cpu": "1"}, "nodeSelector": {"zone": "mars"}})
    body = await (await http.post("/extender/filter", json=_args(member, ["n0", "n1"]))).json()
    assert set(body["FailedNodes"].values()) == {"gang ml/nowhere: 0/2 pods placeable"}
    # Every node fails the node selector, which no eviction changes: UnschedulableAndUnresolvable.
    assert body["FailedAndUnresolvableNodes"] == body["FailedNodes"]


async def _extender_over(docs: list[dict]) -> Extender:
    """The verbs over `docs` after one session."""
    extender = make_extender(docs)
    await extender.loop.run_once()
    return extender


def _totals(body: list[dict], offered: list[str]) -> dict[str, int]:
    """What kube-scheduler adds per offered node: the answered score, 0 for a node left out."""
    scores = {h["Host"]: h["Score"] for h in body}
    assert set(scores) <= set(offered)
    assert all(0 <= s <= 10 for s in scores.values())
    return {n: scores.get(n, 0) for n in offered}


async def test_prioritize_ranks_the_planned_node_first(served):
    http, extender, _ = served
    member = pod({"name": "ml/fits-w-1", "group": "fits", "req": {"cpu": "1", "nvidia.com/gpu": "1"}})
    offered = ["n0", "n1", "n2"]
    body = await (await http.post("/extender/prioritize", json=_args(member, offered))).json()
    totals = _totals(body, offered)
    planned = extender.plan.node_for("ml/fits-w-1")
    assert all(totals[planned] > s for n, s in totals.items() if n != planned)


async def test_prioritize_packs_gpus_and_leaves_out_the_nodes_it_cannot_tell_apart():
    """Sparse answers rank nodes as the full binpack scores would: most GPUs in use first."""
    used = {"n0": 0, "n1": 6, "n2": 3, "n3": 0, "n4": 6}
    docs = [node({"name": n, "alloc": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "8"}}) for n in used]
    docs.append(queue({"name": "default"}))
    for n, gpus in used.items():
        for i in range(gpus):
            docs.append(pod({"name": f"ml/{n}-{i}", "node": n, "phase": "Running",
                             "req": {"cpu": "1", "nvidia.com/gpu": "1"}}))
    extender = await _extender_over(docs)
    single = pod({"name": "ml/solo", "req": {"cpu": "1", "nvidia.com/gpu": "1"}})
    offered = list(used)
    body = extender.prioritize(ExtenderArgs.model_validate(_args(single, offered)))
    assert {h["Host"] for h in body} == {"n1", "n2", "n4"}  # n0 and n3 sit at the lowest score
    totals = _totals(body, offered)
    assert totals["n1"] == totals["n4"] > totals["n2"] > totals["n0"] == totals["n3"] == 0
    # Offered nodes only: a node kube-scheduler filtered out is not answered.
    body = extender.prioritize(ExtenderArgs.model_validate(_args(single, ["n0", "n2"])))
    assert [h["Host"] for h in body] == ["n2"]


async def test_bind_parks_until_the_gang_is_whole_then_binds_both(served):
    import asyncio

    http, extender, client = served
    nodes = [extender.plan.node_for(f"ml/fits-w-{i}") for i in range(2)]
    first = asyncio.create_task(http.post("/extender/gang/bind", json={
        "PodName": "fits-w-0", "PodNamespace": "ml", "PodUID": "ml-fits-w-0", "Node": nodes[0]}))
    await asyncio.sleep(0.1)
    assert not first.done() and not [c for c in client.calls if c[0] == "bind"]
    second = await http.post("/extender/gang/bind", json={
        "PodName": "fits-w-1", "PodNamespace": "ml", "PodUID": "ml-fits-w-1", "Node": nodes[1]})
    assert (await second.json()) == {"Error": ""}
    assert (await (await first).json()) == {"Error": ""}
    assert sorted(c[1] for c in client.calls if c[0] == "bind") == [("ml", "fits-w-0", nodes[0]),
                                                                   ("ml", "fits-w-1", nodes[1])]


async def test_preempt_keeps_no_victims_for_a_gang_member(served):
    http, _, _ = served
    member = pod({"name": "ml/toobig-w-0", "group": "toobig"})
    body = {"Pod": member, "NodeNameToVictims": None,
            "NodeNameToMetaVictims": {"n0": {"Pods": [{"UID": "x"}], "NumPDBViolations": 0}}}
    assert await (await http.post("/extender/preempt", json=body)).json() == {"NodeNameToMetaVictims": {}}


@pytest.mark.parametrize(
    ("body", "expect"),
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"NodeNames": ["n0"]}', "Pod"),
        (b'{"Pod": {}, "NodeNames": "n0"}', "NodeNames"),
    ],
)
async def test_bad_bodies_get_a_400_with_a_reason(served, body, expect):
    http, _, _ = served
    resp = await http.post("/extender/filter", data=body, headers={"Content-Type": "application/json"})
    assert resp.status == 400
    assert expect in (await resp.json())["Error"]


async def test_wrong_content_type_is_refused(served):
    http, _, _ = served
    resp = await http.post("/extender/filter", data=b"{}", headers={"Content-Type": "text/plain"})
    assert resp.status == 415 and "application/json" in (await resp.json())["Error"]


async def test_not_synced_means_an_error_not_a_guess(served):
    http, extender, _ = served
    extender.state.reflectors[0].synced.clear()
    member = pod({"name": "ml/fits-w-0", "group": "fits"})
    body = await (await http.post("/extender/filter", json=_args(member, ["n0"]))).json()
    assert "not synced" in body["Error"]


async def test_a_filter_asked_before_the_first_session_of_a_term_waits_for_its_plan(aiohttp_client):
    """After a start or a takeover, kube-scheduler's call waits for the plan on its way instead of being turned away
    (which sets the pod aside with a back-off); without the hold the member is refused 'waiting for a session'."""
    extender = make_extender(_objects(), RecordingClient())
    http = await aiohttp_client(make_app(extender, lambda: True, lambda: extender.state.synced))
    member = pod({"name": "ml/fits-w-0", "group": "fits", "req": {"cpu": "1", "nvidia.com/gpu": "1"}})
    asked = asyncio.create_task(http.post("/extender/filter", json=_args(member, ["n0", "n1", "n2"])))
    await asyncio.sleep(0.3)
    assert not asked.done()  # held: no plan yet, one is on its way
    await extender.loop.run_once()
    body = await (await asked).json()
    assert body["NodeNames"] == [extender.plan.node_for("ml/fits-w-0")] and not body["Error"]


async def test_a_volcano_pod_without_a_podgroup_passes_only_after_its_queue_checks():
    gpu = {"cpu": "1", "nvidia.com/gpu": "1"}
    docs = [node({"name": f"n{i}", "alloc": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "2"}}) for i in range(2)]
    docs += [queue({"name": "default"}), queue({"name": "shut", "state": "Closed"}),
             queue({"name": "tiny", "capability": {"nvidia.com/gpu": "1"}})]
    docs.append(podgroup({"name": "ml/used", "min": 1, "queue": "tiny", "phase": "Running"}))
    docs.append(pod({"name": "ml/used-0", "group": "used", "node": "n0", "phase": "Running", "req": gpu}))
    extender = await _extender_over(docs)

    def filtered(name: str, queue_name: str | None, scheduler: str = "volcano") -> dict:
        notes = {"scheduling.volcano.sh/queue-name": queue_name} if queue_name else {}
        doc = pod({"name": f"ml/{name}", "annotations": notes, "req": gpu})
        doc["spec"]["schedulerName"] = scheduler
        return dict(extender.filter(ExtenderArgs.model_validate(_args(doc, ["n0", "n1"]))))

    # It passes, to the node a session would give it (`pick`): n1, emptier than n0 by ml/used-0.
    assert filtered("in-default", None)["NodeNames"] == ["n1"]
    shut = filtered("in-shut", "shut")
    assert shut["NodeNames"] == []
    assert set(shut["FailedNodes"].values()) == {"pod ml/in-shut: queue shut is Closed"}
    assert shut["FailedAndUnresolvableNodes"] == shut["FailedNodes"]
    full = filtered("in-tiny", "tiny")
    assert set(full["FailedNodes"].values()) == {"pod ml/in-tiny: queue tiny is at its nvidia.com/gpu capability"}
    assert set(filtered("lost", "nope")["FailedNodes"].values()) == {"pod ml/lost: queue nope does not exist"}
    # Another scheduler's pod is not Volcano's business, whatever its annotations say.
    assert filtered("other", "shut", scheduler="default-scheduler")["NodeNames"] == ["n0", "n1"]


async def test_a_pending_gang_of_one_waits_on_its_podgroups_min_resources_not_its_pods_request():
    # Spark's driver PodGroup: minMember 1, minResources for the driver and the executors it will ask for.
    docs = [node({"name": f"n{i}", "alloc": {"cpu": "16", "memory": "64Gi"}}) for i in range(2)]
    docs += [queue({"name": "default"}), queue({"name": "spark", "capability": {"cpu": "8", "memory": "32Gi"}})]
    docs.append(podgroup({"name": "ml/first", "min": 1, "queue": "spark", "phase": "Running",
                          "minResources": {"cpu": "3", "memory": "3Gi"}}))
    docs += [pod({"name": f"ml/first-{i}", "group": "first", "node": "n0", "phase": "Running",
                  "req": {"cpu": "1", "memory": "1Gi"}}) for i in range(3)]
    docs.append(podgroup({"name": "ml/second", "min": 1, "queue": "spark", "phase": "Pending",
                          "minResources": {"cpu": "6", "memory": "6Gi"}}))
    extender = await _extender_over(docs)
    driver = volcano_pod({"name": "ml/second-driver", "group": "second", "req": {"cpu": "1", "memory": "1Gi"}})
    body = dict(extender.filter(ExtenderArgs.model_validate(_args(driver, ["n0", "n1"]))))
    # 3 cpu used + 6 reserved > 8, though 3 + the driver's 1 would fit: enqueue, not the pod, decides.
    assert body["NodeNames"] == [] and set(body["FailedNodes"]) == {"n0", "n1"}, body


async def test_filter_replan_moves_room_in_its_own_view_and_leaves_the_session_result_alone(served):
    _, extender, _ = served
    latest = extender.loop.latest
    planned = {extender.plan.node_for(f"ml/fits-w-{i}") for i in range(2)}
    free = next(n for n in ("n0", "n1", "n2") if n not in planned)
    before = latest.idle.copy()
    first = volcano_pod({"name": "ml/fits-w-0", "group": "fits", "req": {"cpu": "1", "nvidia.com/gpu": "1"}})
    assert extender.filter(ExtenderArgs.model_validate(_args(first, [free])))["NodeNames"] == [free]
    assert extender.plan.node_for("ml/fits-w-0") == free
    assert (latest.idle == before).all(), "the session's result, which other verbs and comparisons read, is unchanged"
    second = volcano_pod({"name": "ml/fits-w-1", "group": "fits", "req": {"cpu": "1", "nvidia.com/gpu": "1"}})
    refused = extender.filter(ExtenderArgs.model_validate(_args(second, [free])))
    assert refused["NodeNames"] == [], "the GPU the first move took is counted: no second pod moves onto it"


@pytest.mark.parametrize("reclaimable", [False, True])
async def test_preempt_takes_no_victim_from_a_queue_that_may_not_be_reclaimed(aiohttp_client, reclaimable):
    """A pod of queue default preempting pods of another queue is reclaim: Volcano never reclaims from a queue with
    `reclaimable: false`, however far over its deserved share that queue is (here 4 GPUs against 2 deserved)."""
    gpu = {"cpu": "1", "nvidia.com/gpu": "1"}
    docs = [node({"name": "n0", "alloc": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "4"}}),
            queue({"name": "default"}), queue({"name": "lab", "reclaimable": reclaimable}),
            podgroup({"name": "ml/held", "min": 1, "queue": "lab", "phase": "Running"}),
            podgroup({"name": "ml/wants", "min": 4, "queue": "default", "phase": "Inqueue"})]
    docs += [volcano_pod({"name": f"ml/held-w-{i}", "group": "held", "req": gpu, "node": "n0", "phase": "Running"})
             for i in range(4)]
    docs += [volcano_pod({"name": f"ml/wants-w-{i}", "group": "wants", "req": gpu}) for i in range(4)]
    extender = make_extender(docs, RecordingClient())
    await extender.loop.run_once()
    assert extender.loop.latest is not None and extender.loop.latest.queues["lab"].share > 1.0
    http = await aiohttp_client(make_app(extender, lambda: True, lambda: extender.state.synced))
    asking = volcano_pod({"name": "ml/solo", "req": gpu})
    victims = {"n0": {"Pods": [{"UID": "ml-held-w-0"}], "NumPDBViolations": 0}}
    body = await (await http.post("/extender/preempt", json={"Pod": asking, "NodeNameToMetaVictims": victims})).json()
    assert body == ({"NodeNameToMetaVictims": {"n0": {"Pods": [{"UID": "ml-held-w-0"}], "NumPDBViolations": 0}}}
                    if reclaimable else {"NodeNameToMetaVictims": {}})


def _one_per_node(name: str) -> dict:
    return volcano_pod({"name": name, "group": "ddp", "req": {"cpu": "1"}, "labels": {"app": "ddp"},
                        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                            {"labelSelector": {"matchLabels": {"app": "ddp"}},
                             "topologyKey": "kubernetes.io/hostname"}]}}})


async def test_filter_replan_keeps_a_gangs_anti_affinity_against_its_planned_siblings():
    """A worker of a one-per-node gang whose planned node is not offered moves to an offered node its planned
    sibling does not hold, though binpack would prefer the sibling's (fuller) node; offered only the sibling's node,
    it does not move and the gang is re-planned. Each attempt is counted on /metrics."""
    docs = [node({"name": f"n{i}", "alloc": {"cpu": "8", "memory": "16Gi"},
                  "labels": {"kubernetes.io/hostname": f"n{i}"}}) for i in range(3)]
    docs += [queue({"name": "default"}), podgroup({"name": "ml/ddp", "min": 2, "phase": "Inqueue"})]
    docs += [_one_per_node(f"ml/ddp-w-{i}") for i in range(2)]
    extender = await _extender_over(docs)
    first, sibling = extender.plan.node_for("ml/ddp-w-0"), extender.plan.node_for("ml/ddp-w-1")
    assert first and sibling and first != sibling
    free = next(n for n in ("n0", "n1", "n2") if n not in (first, sibling))
    moved = extender.filter(ExtenderArgs.model_validate(_args(_one_per_node("ml/ddp-w-0"), [sibling, free])))
    assert moved["NodeNames"] == [free], moved
    assert extender.plan.node_for("ml/ddp-w-0") == free
    refused = extender.filter(ExtenderArgs.model_validate(_args(_one_per_node("ml/ddp-w-1"), [free])))
    assert refused["NodeNames"] == [] and extender.plan.node_for("ml/ddp-w-1") is None, refused
    counts = {s.labels["result"]: s.value for m in extender.metrics.replans.collect() for s in m.samples
              if s.name.endswith("_total")}
    assert counts == {"moved": 1.0, "failed": 1.0}


def _zone_spread(name: str) -> dict:
    return volcano_pod({"name": name, "group": "web", "req": {"cpu": "1"}, "labels": {"app": "web"},
                        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                                       "whenUnsatisfiable": "DoNotSchedule",
                                                       "labelSelector": {"matchLabels": {"app": "web"}}}]})


async def test_a_spread_member_kube_scheduler_meets_out_of_the_plans_order_moves_by_its_view():
    """kube-scheduler checks a spread gang's members one by one in its own order: the second member may come first
    and be refused its planned zone... The plan (its sibling planned in the other zone) leaves it nowhere else, so it
    moves by what kube-scheduler has seen (nothing bound or parked yet), which ends even whatever the order."""
    docs = [node({"name": f"n{i}", "alloc": {"cpu": "8", "memory": "16Gi"}, "labels": {"zone": f"z{i}"}})
            for i in range(2)]
    docs += [queue({"name": "default"}), podgroup({"name": "ml/web", "min": 2, "phase": "Inqueue"})]
    docs += [_zone_spread(f"ml/web-w-{i}") for i in range(2)]
    extender = await _extender_over(docs)
    first, second = extender.plan.node_for("ml/web-w-0"), extender.plan.node_for("ml/web-w-1")
    assert {first, second} == {"n0", "n1"}
    moved = extender.filter(ExtenderArgs.model_validate(_args(_zone_spread("ml/web-w-1"), [first])))
    assert moved["NodeNames"] == [first], moved
