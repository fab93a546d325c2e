"""The network-topology-aware plugin, ported from Volcano's
`pkg/scheduler/plugins/network-topology-aware/network_topology_aware_test.go`.

Ported: TestNew (the invalid-arguments row differs by design: Lapilli refuses an argument it cannot read when the
conf loads, so `normal-pod.enable: "a"` is a ConfError; negative numbers fall back to their defaults as in Volcano),
TestReverseAndCapEvictionGradients, TestNetworkTopologyAwareNodeScore_Hard and _Soft (every row; the task's
`JobAllocatedHyperNode`, which the Go test reads from an annotation, is set on the task), TestBatchNodeOrderFn (every
row), TestHyperNodeOrderFn (both rows), TestHyperNodeGradientPreFiltering (every row, at 10 tier-1 HyperNodes of 10
nodes instead of 100: the filter looks at one HyperNode's numbers) and
TestHyperNodeGradientForSubJobFn_NoSubJobPolicyRespectsHardTopology. Left out: Test_initHyperNodeResourceCache and
Test_batchNodeOrderFnForNormalPods, which time the Go functions at scale (bench/topology.py covers the cost here).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from extender.engine.arguments import ConfError
from extender.engine.conf import parse_conf
from extender.engine.interface import PURPOSE_ALLOCATE, PURPOSE_EVICT
from extender.engine.plugins.network_topology import NetworkTopologyPlugin, parse_arguments, reverse_and_cap
from extender.engine.run import open_session
from extender.engine.session import Session
from extender.engine.snapshot import build_snapshot
from lapilli.topology import CLUSTER_TOP
from tests.unit.extender.engine.builders import documents, go_tiers, registry_with_fakes

EPS = 0.1
THREE_TIER = [
    {"name": "s0", "tier": 3, "hypernodes": ["s1", "s2"]},
    {"name": "s1", "tier": 2, "hypernodes": ["s3", "s4"]},
    {"name": "s2", "tier": 2, "hypernodes": ["s5", "s6"]},
    *({"name": f"s{i}", "tier": 1, "nodes": [f"s{i}-n1", f"s{i}-n2"]} for i in (3, 4, 5, 6)),
]


def session(arguments: dict[str, Any], hypernodes: list[dict[str, Any]], nodes: list[dict[str, Any]],
            podgroups: list[dict[str, Any]], pods: list[dict[str, Any]]) -> Session:
    plugin = {"name": "network-topology-aware", "enableNodeOrder": True, "enabledHyperNodeOrder": True,
              "enabledHyperNodeGradient": True, "arguments": arguments}
    conf = parse_conf(go_tiers({"actions": "allocate", "tiers": [{"plugins": [plugin]}]}), registry_with_fakes())
    scenario = {"nodes": nodes, "hypernodes": hypernodes, "queues": [{"name": "q1"}], "podgroups": podgroups,
                "pods": pods}
    return open_session(build_snapshot(documents(scenario)), conf)


def plugin_of(ssn: Session) -> NetworkTopologyPlugin:
    found = ssn.plugin("network-topology-aware")
    assert isinstance(found, NetworkTopologyPlugin)
    return found


def node_scores(ssn: Session, task_key: str, nodes: list[str], held: str = "") -> dict[str, float]:
    task = next(t for t in ssn.tasks.values() if t.key == task_key)
    task.job_hypernode = held
    idx = np.array([ssn.node_by_name[n].idx for n in nodes], dtype=np.intp)
    scores = plugin_of(ssn).node_scores(task, idx)
    return {} if scores is None else dict(zip(nodes, scores.tolist(), strict=True))


def close(actual: dict[str, float], expected: dict[str, float]) -> bool:
    return actual.keys() == expected.keys() and all(abs(actual[k] - v) <= EPS for k, v in expected.items())


# ---- TestNew ----------------------------------------------------------------------------------------------------
def test_new_defaults():
    args = parse_arguments({})
    assert (args.weight, dict(args.weights), args.normal_pod, args.fading, args.evict_max) == (
        1, {"cpu": 1, "memory": 1}, True, 0.8, 8)


def test_new_customized():
    args = parse_arguments({
        "weight": 2, "hypernode.binpack.cpu": 3, "hypernode.binpack.memory": 4,
        "hypernode.binpack.resources": "nvidia.com/gpu, example.com/foo",
        "hypernode.binpack.resources.nvidia.com/gpuxxx": 5, "hypernode.binpack.resources.example.com/foo": 6,
        "hypernode.binpack.normal-pod.enable": False, "hypernode.binpack.normal-pod.fading": 0,
    })
    assert args.weight == 2
    assert dict(args.weights) == {"cpu": 3, "memory": 4, "nvidia.com/gpu": 1, "example.com/foo": 6}
    assert (args.normal_pod, args.fading) == (False, 0)


def test_new_negative_numbers_fall_back_to_defaults():
    args = parse_arguments({
        "weight": -1, "hypernode.binpack.cpu": -1, "hypernode.binpack.memory": -1,
        "hypernode.binpack.resources": "nvidia.com/gpuxxx, example.com/foo",
        "hypernode.binpack.resources.nvidia.com/gpu": -1, "hypernode.binpack.resources.example.com/foo": -1,
        "hypernode.binpack.normal-pod.fading": -1, "hypernode.gradient.evict.max-hypernodes": -3,
    })
    assert args.weight == 1 and args.fading == 0.8 and args.evict_max == 8
    assert dict(args.weights) == {"cpu": 1, "memory": 1, "nvidia.com/gpuxxx": 1, "example.com/foo": 1}


def test_new_unreadable_argument_is_refused():
    with pytest.raises(ConfError, match=r'hypernode\.binpack\.normal-pod\.enable: "a" is not true or false'):
        parse_arguments({"hypernode.binpack.normal-pod.enable": "a"})


def test_reverse_and_cap_eviction_gradients():
    gradients = [["a", "b"], ["c", "d"]]
    assert reverse_and_cap(gradients, 3) == [["c", "d"], ["b"]]
    assert reverse_and_cap(gradients, 0) == gradients


# ---- TestNetworkTopologyAwareNodeScore_Hard / _Soft -------------------------------------------------------------
def eight_nodes(cpu: str = "2", memory: str = "4Gi") -> list[dict[str, Any]]:
    return [{"name": f"s{i}-n{j}", "alloc": {"cpu": cpu, "memory": memory}} for i in (3, 4, 5, 6) for j in (1, 2)]


def gang(mode: str, held_pods: list[tuple[str, str]], pending: str, min_member: int = 1) -> tuple[list, list]:
    pods = [{"name": f"c1/{name}", "group": "pg1", "role": "worker", "req": {"cpu": "2", "memory": "4G"},
             "node": node, "phase": "Running"} for name, node in held_pods]
    pods.append({"name": f"c1/{pending}", "group": "pg1", "role": "worker", "req": {"cpu": "2", "memory": "4G"}})
    podgroups = [{"name": "c1/pg1", "min": min_member, "queue": "q1",
                  "networkTopology": {"mode": mode, "highestTierAllowed": 0}}]
    return podgroups, pods


@pytest.mark.parametrize("mode", ["hard", "soft"])
@pytest.mark.parametrize(("held", "pods", "weight", "scored", "expected"), [
    ("", [], 1, ["s3-n1", "s4-n1", "s5-n1"], {"s3-n1": 0.0, "s4-n1": 0.0, "s5-n1": 0.0}),
    ("s3", [("p1", "s3-n1"), ("p2", "s3-n2")], 1, ["s3-n1", "s4-n1", "s5-n1"],
     {"s3-n1": 100.0, "s4-n1": 66.6, "s5-n1": 33.3}),
    ("s3", [("p1", "s3-n1"), ("p2", "s3-n2")], 2, ["s3-n1", "s4-n1", "s5-n1"],
     {"s3-n1": 200.0, "s4-n1": 133.3, "s5-n1": 66.6}),
    # ties at the best LCA tier are told apart by the share of the gang's tasks in each HyperNode
    ("s1", [("p1", "s3-n1"), ("p2", "s3-n2"), ("p3", "s4-n1")], 1, ["s3-n1", "s4-n1", "s5-n1"],
     {"s3-n1": 116.6, "s4-n1": 91.6, "s5-n1": 33.3}),
], ids=["first", "lca-tier", "weight-2", "task-share"])
def test_node_score_three_tiers(mode, held, pods, weight, scored, expected):
    podgroups, docs = gang(mode, pods, "p9")
    ssn = session({"weight": weight}, THREE_TIER, eight_nodes(), podgroups, docs)
    assert close(node_scores(ssn, "c1/p9", scored, held), expected)


@pytest.mark.parametrize("mode", ["hard", "soft"])
def test_node_score_two_tiers(mode):
    hypernodes = [{"name": "s0", "tier": 2, "hypernodes": ["s1", "s2"]},
                  {"name": "s1", "tier": 1, "nodes": ["s1-n1", "s1-n2"]},
                  {"name": "s2", "tier": 1, "nodes": ["s2-n1", "s2-n2"]}]
    nodes = [{"name": f"s{i}-n{j}", "alloc": {"cpu": "2", "memory": "4Gi"}} for i in (1, 2) for j in (1, 2)]
    podgroups, pods = gang(mode, [("p1", "s1-n1")], "p2")
    ssn = session({"weight": 1}, hypernodes, nodes, podgroups, pods)
    assert close(node_scores(ssn, "c1/p2", ["s1-n1", "s2-n1"], "s1"), {"s1-n1": 100.0, "s2-n1": 50.0})


@pytest.mark.parametrize("mode", ["hard", "soft"])
def test_node_score_one_tier(mode):
    hypernodes = [{"name": "s1", "tier": 1, "nodes": ["s1-n1", "s1-n2"]},
                  {"name": "s2", "tier": 1, "nodes": ["s2-n1", "s2-n2"]}]
    nodes = [{"name": f"s{i}-n{j}", "alloc": {"cpu": "2", "memory": "4Gi"}} for i in (1, 2) for j in (1, 2)]
    podgroups, pods = gang(mode, [("p1", "s1-n1")], "p2")
    ssn = session({"weight": 1}, hypernodes, nodes, podgroups, pods)
    # s1 and s2 meet only at the cluster-top root, the highest tier: 0
    assert close(node_scores(ssn, "c1/p2", ["s1-n1", "s2-n1"], "s1"), {"s1-n1": 100.0, "s2-n1": 0.0})


# ---- TestBatchNodeOrderFn ---------------------------------------------------------------------------------------
def batch_nodes(foo: bool = False, second_foo: bool = True) -> list[dict[str, Any]]:
    """The Go tests' eight nodes; with `foo`, example.com/foo on each (only on the first of each pair when
    `second_foo` is false, as TestHyperNodeOrderFn's customized row has it)."""
    shapes = {3: ("2", "4G", "8"), 4: ("4", "4G", "8"), 5: ("2", "8G", "16"), 6: ("4", "8G", "16")}
    out = []
    for i, (cpu, memory, extra) in shapes.items():
        for j in (1, 2):
            alloc = {"cpu": cpu, "memory": memory}
            if foo:
                alloc["example.com/foo"] = extra if j == 1 or second_foo else "0"
            out.append({"name": f"s{i}-n{j}", "alloc": alloc})
    return out


ALL = [f"s{i}-n{j}" for i in (3, 4, 5, 6) for j in (1, 2)]
CUSTOM = {"weight": 10, "hypernode.binpack.cpu": 1, "hypernode.binpack.memory": 4,
          "hypernode.binpack.resources": "nvidia.com/gpu, example.com/foo",
          "hypernode.binpack.resources.nvidia.com/gpu": 2, "hypernode.binpack.resources.example.com/foo": 3,
          "hypernode.binpack.normal-pod.enable": True, "hypernode.binpack.normal-pod.fading": 0}


def normal_pod(extra: dict[str, str] | None = None, running: list[str] = ()) -> tuple[list, list]:
    req = {"cpu": "2", "memory": "4G", **(extra or {})}
    pods = [{"name": "ns1/p1", "group": "pg1", "req": req}]
    pods += [{"name": f"ns1/r-{n}", "group": "pg1", "req": req, "node": n, "phase": "Running"} for n in running]
    return [{"name": "ns1/pg1", "min": 1, "queue": "q1"}], pods


def test_batch_normal_pod_binpack_disabled():
    podgroups, pods = normal_pod()
    ssn = session({"hypernode.binpack.normal-pod.enable": False}, THREE_TIER, batch_nodes(), podgroups, pods)
    assert node_scores(ssn, "ns1/p1", ALL) == {}


def test_batch_normal_pod_default_arguments():
    podgroups, pods = normal_pod()
    ssn = session({}, THREE_TIER, batch_nodes(), podgroups, pods)
    expected = {"s3-n1": 25.8, "s3-n2": 25.8, "s4-n1": 21.6, "s4-n2": 21.6, "s5-n1": 19.9, "s5-n2": 19.9,
                "s6-n1": 15.7, "s6-n2": 15.7}
    assert close(node_scores(ssn, "ns1/p1", ALL), expected)


def test_batch_normal_pod_customized_arguments():
    podgroups, pods = normal_pod({"example.com/foo": "8"})
    ssn = session(CUSTOM, THREE_TIER, batch_nodes(foo=True), podgroups, pods)
    expected = {"s3-n1": 500.0, "s3-n2": 500.0, "s4-n1": 468.75, "s4-n2": 468.75, "s5-n1": 281.3, "s5-n2": 281.3,
                "s6-n1": 250.0, "s6-n2": 250.0}
    assert close(node_scores(ssn, "ns1/p1", ALL), expected)


def test_batch_normal_pod_on_busy_nodes():
    podgroups, pods = normal_pod({"example.com/foo": "8"}, running=["s3-n1", "s3-n2"])
    ssn = session(CUSTOM, THREE_TIER, batch_nodes(foo=True), podgroups, pods)
    expected = {"s3-n1": 0.0, "s3-n2": 0.0, "s4-n1": 468.8, "s4-n2": 468.8, "s5-n1": 281.3, "s5-n2": 281.3,
                "s6-n1": 250.0, "s6-n2": 250.0}
    assert close(node_scores(ssn, "ns1/p1", ALL), expected)


def test_batch_pods_with_network_topology():
    podgroups = [{"name": "ns1/pg1", "min": 2, "queue": "q1", "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
                  "subGroupPolicy": [{"name": "task1", "matchLabelKeys": ["volcano.sh/task-spec"],
                                      "networkTopology": {"mode": "hard", "highestTierAllowed": 2}}]}]
    pods = [{"name": "ns1/p1", "group": "pg1", "role": "worker", "req": {"cpu": "2", "memory": "4G"}},
            {"name": "ns1/p2", "group": "pg1", "role": "worker", "req": {"cpu": "2", "memory": "4G"},
             "node": "s4-n1", "phase": "Running"}]
    ssn = session({}, THREE_TIER, batch_nodes(), podgroups, pods)
    expected = {"s3-n1": 66.7, "s3-n2": 66.7, "s4-n1": 116.7, "s4-n2": 116.7, "s5-n1": 33.3, "s5-n2": 33.3,
                "s6-n1": 33.3, "s6-n2": 33.3}
    assert close(node_scores(ssn, "ns1/p1", ALL, held="s1"), expected)


# ---- TestHyperNodeOrderFn ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("arguments", "extra", "expected"), [
    ({}, {}, {"s0": 25.0, "s1": 58.3, "s2": 45.8, "s3": 0.0, "s4": 100.0, "s5": 0.0, "s6": 75.0, CLUSTER_TOP: 25.0}),
    ({**CUSTOM, "hypernode.binpack.cpu": 3}, {"example.com/foo": "8"},
     {"s0": 266.7, "s1": 700.0, "s2": 450.0, "s3": 0.0, "s4": 0.0, "s5": 0.0, "s6": 800.0, CLUSTER_TOP: 266.7}),
], ids=["default", "customized"])
def test_hypernode_order(arguments, extra, expected):
    podgroups = [{"name": "ns1/pg1", "min": 2, "queue": "q1", "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
                  "subGroupPolicy": [{"name": "task1", "matchLabelKeys": ["volcano.sh/task-spec"]}]}]
    pods = [{"name": f"ns1/p{i}", "group": "pg1", "role": "worker", "req": {"cpu": "4", "memory": "4G", **extra}}
            for i in (1, 2)]
    ssn = session(arguments, THREE_TIER, batch_nodes(foo=bool(extra), second_foo=False), podgroups, pods)
    job = ssn.jobs["ns1/pg1"]
    assert job.subjobs is not None
    sub = next(s for s in job.subjobs.values() if s.uid != job.uid)
    assert close(ssn.hypernode_scores(sub, list(expected)), expected)


# ---- TestHyperNodeGradientPreFiltering --------------------------------------------------------------------------
GIB = 1024 ** 3


@pytest.mark.parametrize(("subjob", "purpose", "need", "idle", "future", "kept"), [
    (False, PURPOSE_ALLOCATE, (20, 40), (30, 60), (35, 70), True),
    (False, PURPOSE_ALLOCATE, (20, 40), (30, 60), (15, 30), True),
    (False, PURPOSE_ALLOCATE, (20, 40), (15, 30), (30, 60), True),
    (False, PURPOSE_ALLOCATE, (20, 40), (15, 30), (15, 30), False),
    (True, PURPOSE_ALLOCATE, (10, 20), (20, 40), (25, 50), True),
    (True, PURPOSE_ALLOCATE, (10, 20), (20, 40), (5, 10), True),
    (True, PURPOSE_ALLOCATE, (10, 20), (5, 10), (20, 40), True),
    (True, PURPOSE_ALLOCATE, (10, 20), (5, 10), (5, 10), False),
    (False, PURPOSE_EVICT, (20, 40), (15, 30), (15, 30), True),  # eviction looks at allocatable (40 cpu here)
    (False, PURPOSE_EVICT, (50, 100), (15, 30), (15, 30), False),
], ids=["job-both", "job-idle", "job-future", "job-neither", "sub-both", "sub-idle", "sub-future", "sub-neither",
        "evict-allocatable", "evict-too-big"])
def test_gradient_pre_filtering(subjob, purpose, need, idle, future, kept):
    hypernodes = [{"name": "hn-2-0", "tier": 2, "hypernodes": [f"hn-1-{i}" for i in range(10)]}]
    hypernodes += [{"name": f"hn-1-{i}", "tier": 1, "nodes": [f"node-{i * 10 + j}" for j in range(10)]}
                   for i in range(10)]
    nodes = [{"name": f"node-{i}", "alloc": {"cpu": "4", "memory": "8Gi"}} for i in range(100)]
    # The Go test builds its plugin without the eviction cap; the cap is the default's 8 otherwise.
    ssn = session({"hypernode.gradient.evict.max-hypernodes": 100}, hypernodes, nodes, [], [])
    plugin = plugin_of(ssn)
    scales = plugin.scales
    assert scales is not None
    i = ssn.topology.index.index["hn-1-0"]
    cpu, mem = ssn.dims.index["cpu"], ssn.dims.index["memory"]
    scales.idle[i, [cpu, mem]] = [idle[0] * 1000, idle[1] * GIB]
    scales.future_idle[i, [cpu, mem]] = [future[0] * 1000, future[1] * GIB]
    want = ssn.dims.zeros()
    want[[cpu, mem]] = [need[0] * 1000, need[1] * GIB]
    tier = 1 if subjob else 2
    gradients = plugin._gradients("hn-2-0", tier, "", want, purpose)
    assert ("hn-1-0" in [n for g in gradients for n in g]) is kept
    tiers = [ssn.topology.tier_of(g[0]) for g in gradients]
    assert tiers == (sorted(tiers, reverse=True) if purpose == PURPOSE_EVICT else sorted(tiers))


def test_subjob_gradient_without_policy_respects_the_hard_tier():
    """A job without sub-group policies has one sub-gang carrying the job's hard topology: its gradients stop at
    the job's tier (TestHyperNodeGradientForSubJobFn_NoSubJobPolicyRespectsHardTopology)."""
    hypernodes = [{"name": "a", "tier": 1, "nodes": ["node-a-1", "node-a-2"]},
                  {"name": "d", "tier": 1, "nodes": ["node-d-1"]},
                  {"name": "top", "tier": 2, "hypernodes": ["a", "d"]}]
    nodes = [{"name": n, "alloc": {"cpu": "8"}} for n in ("node-a-1", "node-a-2", "node-d-1")]
    podgroups = [{"name": "ns/pg", "min": 2, "queue": "q1", "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}]
    pods = [{"name": f"ns/p{i}", "group": "pg", "req": {"cpu": "4"}} for i in (1, 2)]
    ssn = session({}, hypernodes, nodes, podgroups, pods)
    job = ssn.jobs["ns/pg"]
    assert job.subjobs is not None
    sub = job.subjobs[job.uid]
    assert sub.hard_tier() == 1
    assert ssn.hypernode_gradients_for_subjob(sub, CLUSTER_TOP, PURPOSE_ALLOCATE) == [["a", "d"]]
