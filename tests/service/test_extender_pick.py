"""Filter's answer for a pod that passes without a plan (issue 19 item 2): the one offered node the conf's node order
puts first, as a session would place the pod, so kube-scheduler neither scores every node nor asks prioritize; every
offered node where that order needs more than the nodes' own numbers."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from extender.service import pick
from extender.service.core import Extender
from extender.service.wire import ExtenderArgs
from tests.service.extender_state import feed, fresh_pick, make_extender, volcano_pod
from tests.unit.extender.engine.builders import node, pod, podgroup, queue

pytestmark = pytest.mark.asyncio(loop_scope="session")

ROOT = Path(__file__).resolve().parents[2]
BINPACK = ROOT / "examples" / "scheduler-conf-binpack.yaml"
SHIPPED = ROOT / "manifests" / "scheduler" / "lapilli-scheduler.conf"
NAMES = ("volcano",)
CPU2 = {"cpu": "2", "memory": "2Gi"}


def _nodes(count: int, **extra: Any) -> list[dict[str, Any]]:
    return [node({"name": f"n{i}", "alloc": {"cpu": "8", "memory": "16Gi"}, **extra}) for i in range(count)]


def _bound(name: str, where: str, req: dict[str, str]) -> dict[str, Any]:
    return pod({"name": f"ml/{name}", "req": req, "node": where, "phase": "Running"})


async def _extender(docs: list[dict[str, Any]], conf: Path | None) -> Extender:
    extender = make_extender([queue({"name": "default"}), *docs], conf=conf, scheduler_names=NAMES)
    await extender.loop.run_once()
    return extender


def _picks(extender: Extender) -> dict[str, float]:
    counted = {s.labels["result"]: s.value for metric in extender.metrics.picks.collect() for s in metric.samples
               if s.name == "lapilli_extender_picks_total"}
    return {result: counted.get(result, 0.0) for result in ("picked", "passed")}


def _filter(extender: Extender, doc: dict[str, Any], offered: list[str]) -> list[str]:
    answer = extender.filter(ExtenderArgs(Pod=doc, Nodes=None, NodeNames=offered))
    assert not answer["Error"], answer
    return list(answer["NodeNames"] or [])


@pytest.mark.parametrize(("conf", "expected"), [(BINPACK, ["n1"]), (None, ["n0"]), (SHIPPED, ["n1"])])
async def test_a_plain_pod_gets_the_offered_node_the_confs_node_order_puts_first(conf, expected):
    # n1 is half used: binpack (the example conf, the shipped one) fills it first; Volcano's default conf
    # (nodeorder's LeastAllocated and BalancedAllocation) spreads, ties going to the lowest name as allocate's.
    extender = await _extender([*_nodes(3), _bound("running", "n1", {"cpu": "4", "memory": "8Gi"})], conf)
    assert _filter(extender, volcano_pod({"name": "ml/p", "req": CPU2}), ["n2", "n1", "n0"]) == expected


@pytest.mark.parametrize(("conf", "expected"), [(None, ["n0", "n1", "n0", "n1"]), (BINPACK, ["n0"] * 4)])
async def test_picks_between_sessions_count_the_room_they_took(conf, expected):
    extender = await _extender(_nodes(2), conf)
    picks = [_filter(extender, volcano_pod({"name": f"ml/p{i}", "req": CPU2}), ["n0", "n1"])[0] for i in range(4)]
    assert picks == expected
    assert _picks(extender) == {"picked": 4, "passed": 0}
    # The room is the verbs' only: the outcome the next session compares with is left as it was.
    latest = extender.loop.latest
    assert latest is not None and (latest.idle[:, latest.dims.index["cpu"]] == 8000).all()


async def test_a_pick_never_takes_room_a_plan_holds():
    # ml/g (two pods of 6 CPUs) is planned onto both nodes; a plain pod of 4 CPUs fits neither's room left, so
    # it passes with every offered node, as before (kube-scheduler's scores and prioritize decide).
    gang = [podgroup({"name": "ml/g", "min": 2, "phase": "Inqueue"}),
            *(volcano_pod({"name": f"ml/g-{i}", "group": "g", "req": {"cpu": "6"}}) for i in range(2))]
    extender = await _extender([*_nodes(2), *gang], BINPACK)
    assert extender.plan.gangs, "the gang was planned"
    assert _filter(extender, volcano_pod({"name": "ml/p", "req": {"cpu": "4"}}), ["n0", "n1"]) == ["n0", "n1"]
    assert _filter(extender, volcano_pod({"name": "ml/q", "req": {"cpu": "1"}}), ["n0", "n1"]) == ["n0"]


PREFERRED = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 1, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}]}}
ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}
SPREAD = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
           "labelSelector": {"matchLabels": {"app": "web"}}}]


@pytest.mark.parametrize("extra", [{"affinity": PREFERRED}, {"affinity": ANTI}, {"topologySpreadConstraints": SPREAD}],
                         ids=["preferred-node-affinity", "pod-anti-affinity", "spread"])
async def test_a_pod_whose_own_terms_score_nodes_gets_every_offered_node(extra):
    extender = await _extender(_nodes(3), BINPACK)
    assert _filter(extender, volcano_pod({"name": "ml/p", "req": CPU2, **extra}), ["n0", "n1", "n2"]) == [
        "n0", "n1", "n2"]
    assert _picks(extender) == {"picked": 0, "passed": 1}


async def test_what_in_the_cluster_scores_every_pod_rules_picks_out():
    termed = _bound("web", "n0", {"cpu": "1"})
    termed["spec"]["affinity"] = ANTI  # its terms score the pods they select (symmetry)
    extender = await _extender([*_nodes(3), termed], BINPACK)
    assert _filter(extender, volcano_pod({"name": "ml/p", "req": CPU2}), ["n0", "n1", "n2"]) == ["n0", "n1", "n2"]
    prefer_not = [{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]
    tainted = [*_nodes(2), node({"name": "n2", "alloc": {"cpu": "8", "memory": "16Gi"}, "taints": prefer_not})]
    extender = await _extender(tainted, BINPACK)
    assert _filter(extender, volcano_pod({"name": "ml/p", "req": CPU2}), ["n0", "n1"]) == ["n0", "n1"]


async def test_the_clusters_terms_are_followed_event_by_event_not_per_session():
    # No session runs in between: a plain pod's arrival does not ask for one.
    extender = await _extender(_nodes(3), BINPACK)
    every = ["n0", "n1", "n2"]
    assert len(_filter(extender, volcano_pod({"name": "ml/p0", "req": CPU2}), every)) == 1
    termed = _bound("web", "n0", {"cpu": "1"})
    termed["spec"]["affinity"] = ANTI
    feed(extender.state, termed)
    assert _filter(extender, volcano_pod({"name": "ml/p1", "req": CPU2}), every) == every
    extender.state.apply("DELETED", termed)
    assert len(_filter(extender, volcano_pod({"name": "ml/p2", "req": CPU2}), every)) == 1
    feed(extender.state, node({"name": "n2", "alloc": {"cpu": "8", "memory": "16Gi"},
                               "taints": [{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]}))
    assert _filter(extender, volcano_pod({"name": "ml/p3", "req": CPU2}), every) == every
    feed(extender.state, node({"name": "n2", "alloc": {"cpu": "8", "memory": "16Gi"}}))
    assert len(_filter(extender, volcano_pod({"name": "ml/p4", "req": CPU2}), every)) == 1


async def test_pods_of_other_schedulers_and_lone_offers_pass_as_they_are():
    extender = await _extender(_nodes(3), BINPACK)
    other = pod({"name": "ml/other", "req": CPU2})  # the default scheduler's pod, through a shared extender
    assert _filter(extender, other, ["n0", "n1", "n2"]) == ["n0", "n1", "n2"]
    assert _filter(extender, volcano_pod({"name": "ml/p", "req": CPU2}), ["n2"]) == ["n2"]
    assert _picks(extender) == {"picked": 0, "passed": 0}, "neither had a node to choose"


async def test_an_admitted_gang_of_one_is_picked_like_a_plain_pod():
    docs = [*_nodes(3), _bound("running", "n2", {"cpu": "4", "memory": "8Gi"}),
            podgroup({"name": "ml/one", "min": 1, "phase": "Running"})]
    extender = await _extender(docs, BINPACK)
    member = volcano_pod({"name": "ml/one-0", "group": "one", "req": CPU2})
    assert _filter(extender, member, ["n0", "n1", "n2"]) == ["n2"]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("conf", [None, SHIPPED], ids=["default-conf", "shipped-conf"])
async def test_the_pick_is_where_a_session_places_the_same_pod(seed, conf):
    """The pick against the session's own placement of the pod as a gang of one, on clusters of nodes of two
    sizes, part used, GPUs on some: filter's formulas are the engine's, over the room the session left."""
    rng = random.Random(seed)
    docs: list[dict[str, Any]] = []
    for i in range(8):
        alloc = {"cpu": rng.choice(["8", "16"]), "memory": rng.choice(["16Gi", "32Gi"])}
        if i % 3 == 0:
            alloc["nvidia.com/gpu"] = "4"
        docs.append(node({"name": f"n{i}", "alloc": alloc}))
        for j in range(rng.randrange(3)):
            req = {"cpu": str(rng.randrange(1, 4)), "memory": f"{rng.randrange(1, 6)}Gi"}
            if "nvidia.com/gpu" in alloc and rng.random() < 0.5:
                req["nvidia.com/gpu"] = "1"
            docs.append(_bound(f"run-{i}-{j}", f"n{i}", req))
    ask = {"cpu": str(rng.randrange(1, 4)), "memory": f"{rng.randrange(1, 4)}Gi"}
    if rng.random() < 0.5:
        ask["nvidia.com/gpu"] = "1"
    offered = [f"n{i}" for i in rng.sample(range(8), 8)]
    picked = _filter(await _extender(docs, conf), volcano_pod({"name": "ml/p", "req": ask}), offered)
    one = podgroup({"name": "ml/one", "min": 1, "phase": "Inqueue"})
    session = await _extender([*docs, one, volcano_pod({"name": "ml/one-0", "group": "one", "req": ask})], conf)
    assert picked == [session.plan.node_for("ml/one-0")]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("conf", [None, SHIPPED, BINPACK], ids=["default-conf", "shipped-conf", "binpack-conf"])
@pytest.mark.parametrize("kept", [pick.MAX_PICK_TABLES, 2], ids=["tables-kept", "tables-dropped"])
async def test_picks_kept_in_tables_match_picks_computed_afresh(seed, conf, kept, monkeypatch):
    """Filter keeps the order's scores per request between sessions and re-scores only the row a pick (or a
    re-plan's move, which also gives room back) changed: every answer over a run of picks of three request
    classes, offered in shuffled subsets, is the one computed afresh over the room at that moment; also when
    fewer tables are kept than classes asked (the oldest is dropped and built again when asked)."""
    monkeypatch.setattr(pick, "MAX_PICK_TABLES", kept)
    rng = random.Random(seed)
    docs: list[dict[str, Any]] = []
    for i in range(12):
        alloc = {"cpu": rng.choice(["8", "16"]), "memory": rng.choice(["16Gi", "32Gi"]), "nvidia.com/gpu": "4"}
        docs.append(node({"name": f"n{i}", "alloc": alloc}))
    extender = await _extender(docs, conf)
    latest = extender.loop.latest
    assert latest is not None
    asks = [{"cpu": "1", "memory": "1Gi"}, {"cpu": "2", "memory": "3Gi", "nvidia.com/gpu": "1"}, {"cpu": "3"}]
    names = [f"n{i}" for i in range(12)]
    picked = 0
    for step in range(60):
        ask = rng.choice(asks)
        doc = volcano_pod({"name": f"ml/p{step}", "req": ask})
        offered = rng.sample(names, rng.randrange(2, 13))
        request = extender._request(doc)
        expected = fresh_pick(extender, request, offered)
        assert _filter(extender, doc, offered) == ([expected] if expected is not None else offered), step
        picked += expected is not None
        if rng.random() < 0.2:  # a re-plan moves a pod: room taken on one node, given back on another
            took, gave = rng.sample(names, 2)
            extender._take(latest, request, took, gave)
    assert picked > 20, "the run exercised picks, not only full clusters"
