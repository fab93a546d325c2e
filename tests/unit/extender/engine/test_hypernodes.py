"""Session preparation and sub-gangs (extender/engine/hypernodes.py), ported from Volcano:

* `pkg/scheduler/framework/session_test.go`: TestSession_adjustNetworkTopologySpec (no translation, translation,
  an unknown name left untranslated), TestConvertSoftToHardTopology (every row: job soft → hard at the root's tier,
  sub-groups bounded by the job's tier, hard left alone, no topology left alone),
  TestAdjustNetworkTopologySpec_SoftToHardConversion (every row) and _DoesNotMutatePodGroupSpec (the records are
  frozen: the session's copies change, the PodGroup record does not). TestConvertSoftToHardTopology_NilPodGroup has
  no counterpart (a job here always has its PodGroup). TestGetPodGroupPhase is not about topology.
* `pkg/scheduler/api/sub_job_info_test.go`: TestNewSubJobInfo, IsHardTopologyMode / IsSoftTopologyMode,
  TestConvertToHardTopology, TestGetSubJobMatchValues_* (basic, boundary, error rows), getPodSubJobID, IsReady and
  IsPipelined (the status mixes). TestSubJobInfo_getTaskHighestPriority is left out: a sub-gang's priority is not
  read by anything Lapilli orders by.
* `pkg/scheduler/api/job_info_test.go`: TestHasTopologyHardConstrain (`needs_hypernodes`),
  TestSetPodGroupDeepCopiesNetworkTopology (as above).
"""

from __future__ import annotations

from typing import Any

import pytest

from extender.engine.actions.hyperallocate import has_topology, needs_hypernodes
from extender.engine.hypernodes import match_values, prepare, session_topology, subjob_id
from extender.engine.model import TaskStatus, TopologySpec
from extender.engine.run import open_session, parse_scheduler_conf
from extender.engine.session import Session
from extender.engine.snapshot import SubGroupPolicy, build_snapshot
from lapilli.nodematch import LabelSelector
from tests.unit.extender.engine.builders import documents

TREE = [
    {"name": "leaf", "tier": 1, "tierName": "volcano.sh/hypernode", "nodes": ["n1"]},
    {"name": "cluster", "tier": 2, "tierName": "volcano.sh/hypercluster", "hypernodes": ["leaf"]},
    {"name": "top", "tier": 3, "hypernodes": ["cluster"]},
]  # the cluster-top root is at tier 4


def open_with(podgroup: dict[str, Any], pods: list[dict[str, Any]] | None = None) -> Session:
    scenario = {"nodes": [{"name": "n1", "alloc": {"cpu": "8"}}], "hypernodes": TREE, "queues": [{"name": "default"}],
                "podgroups": [{"name": "ns/pg", "min": 1, **podgroup}],
                "pods": pods if pods is not None else [{"name": "ns/p0", "group": "pg", "role": "a"}]}
    return open_session(build_snapshot(documents(scenario)), parse_scheduler_conf(None))


def policy(name: str, topology: dict[str, Any] | None = None, keys: tuple[str, ...] = ("volcano.sh/task-spec",),
           **extra: Any) -> dict[str, Any]:
    out = {"name": name, "matchLabelKeys": list(keys), **extra}
    if topology is not None:
        out["networkTopology"] = topology
    return out


@pytest.mark.parametrize(("job", "sub", "want_job", "want_sub"), [
    # adjustNetworkTopologySpec: highestTierAllowed kept, names translated, an unknown name left as it is
    ({"mode": "hard", "highestTierAllowed": 2}, {"mode": "hard", "highestTierAllowed": 1},
     TopologySpec("hard", 2), TopologySpec("hard", 1)),
    ({"mode": "hard", "highestTierName": "volcano.sh/hypercluster"}, {"mode": "hard", "highestTierName": "volcano.sh/hypernode"},
     TopologySpec("hard", 2), TopologySpec("hard", 1)),
    ({"mode": "hard", "highestTierName": "volcano.sh/hypercluster-test"},
     {"mode": "hard", "highestTierName": "volcano.sh/hypernode-test"},
     TopologySpec("hard", None, "volcano.sh/hypercluster-test"), TopologySpec("hard", None, "volcano.sh/hypernode-test")),
    # convertSoftToHardTopology: soft → hard at the root's tier; a soft sub-group is bounded by the job's tier
    ({"mode": "soft"}, None, TopologySpec("hard", 4), None),
    ({"mode": "soft"}, {"mode": "soft"}, TopologySpec("hard", 4), TopologySpec("hard", 4)),
    ({"mode": "hard", "highestTierAllowed": 2}, {"mode": "soft"}, TopologySpec("hard", 2), TopologySpec("hard", 2)),
    ({"mode": "hard", "highestTierAllowed": 3}, {"mode": "soft"}, TopologySpec("hard", 3), TopologySpec("hard", 3)),
    (None, {"mode": "soft"}, None, TopologySpec("hard", 4)),
    (None, {"mode": "hard", "highestTierAllowed": 1}, None, TopologySpec("hard", 1)),
    # SoftToHardConversion: translated then converted (the root's tier wins); hard only translated
    ({"mode": "soft", "highestTierName": "volcano.sh/hypercluster"}, None, TopologySpec("hard", 4), None),
    ({"mode": "hard", "highestTierName": "volcano.sh/hypernode"}, None, TopologySpec("hard", 1), None),
])
def test_adjust_network_topology_spec(job, sub, want_job, want_sub):
    pg: dict[str, Any] = {"subGroupPolicy": [policy("p", sub)]}
    if job is not None:
        pg["networkTopology"] = job
    ssn = open_with(pg)
    got = ssn.jobs["ns/pg"]
    assert got.subjobs is not None
    assert got.topology == want_job
    assert got.subjobs["ns/pg/p-a"].topology == want_sub


def test_preparation_leaves_the_podgroup_record_alone():
    pg = {"networkTopology": {"mode": "soft", "highestTierName": "volcano.sh/hypercluster"}}
    scenario = {"nodes": [{"name": "n1", "alloc": {"cpu": "8"}}], "hypernodes": TREE, "queues": [{"name": "default"}],
                "podgroups": [{"name": "ns/pg", "min": 1, **pg}], "pods": [{"name": "ns/p0", "group": "pg"}]}
    snap = build_snapshot(documents(scenario))
    ssn = open_session(snap, parse_scheduler_conf(None))
    assert ssn.jobs["ns/pg"].topology == TopologySpec("hard", 4)
    assert snap.podgroups["ns/pg"].network_topology == TopologySpec("soft", None, "volcano.sh/hypercluster")


# ---- sub-gangs --------------------------------------------------------------------------------------------------
def test_new_subjob_fields():
    pods = [{"name": "ns/w-0", "group": "pg", "labels": {"volcano.sh/task-spec": "w", "volcano.sh/partition-id": "3"}}]
    ssn = open_with({"min": 1, "subGroupPolicy": [policy("w", {"mode": "hard", "highestTierAllowed": 1},
                                                           keys=("volcano.sh/partition-id",), subGroupSize=4)]}, pods)
    job = ssn.jobs["ns/pg"]
    assert job.subjobs is not None
    sub = job.subjobs["ns/pg/w-3"]
    assert (sub.gid, sub.min_available, sub.match_index, sub.topology) == ("ns/pg/w", 4, 3, TopologySpec("hard", 1))
    assert sub.hard_tier() == 1


def test_default_subjob_without_policy_is_the_job():
    ssn = open_with({"min": 2, "networkTopology": {"mode": "hard", "highestTierAllowed": 1}},
                    [{"name": f"ns/p{i}", "group": "pg"} for i in range(3)])
    job = ssn.jobs["ns/pg"]
    assert job.subjobs is not None and list(job.subjobs) == ["ns/pg"]
    assert job.subjobs["ns/pg"].min_available == 2 and len(job.subjobs["ns/pg"].tasks) == 3
    assert needs_hypernodes(job) and has_topology(job)


def test_no_topology_no_policy_no_subjobs():
    ssn = open_with({})
    job = ssn.jobs["ns/pg"]
    assert job.subjobs is None and not needs_hypernodes(job) and not has_topology(job)


@pytest.mark.parametrize(("job_topology", "sub_topology", "hard"), [
    (None, None, True),  # a policy alone goes through the HyperNode path (ContainsSubJobPolicy)
    ({"mode": "hard", "highestTierAllowed": 1}, None, True),
    ({"mode": "soft"}, None, True),  # soft became hard up to the root
    ({"mode": "hard", "highestTierName": "unknown"}, None, True),  # ContainsSubJobPolicy
])
def test_has_topology_hard_constrain(job_topology, sub_topology, hard):
    pg: dict[str, Any] = {"subGroupPolicy": [policy("p", sub_topology)]}
    if job_topology is not None:
        pg["networkTopology"] = job_topology
    assert needs_hypernodes(open_with(pg).jobs["ns/pg"]) is hard


def test_unknown_tier_name_without_policy_is_placed_flat():
    job = open_with({"networkTopology": {"mode": "hard", "highestTierName": "unknown"}}).jobs["ns/pg"]
    assert has_topology(job) and not needs_hypernodes(job)


def selector(raw: dict[str, Any] | None) -> LabelSelector | None:
    return None if raw is None else LabelSelector.of(raw)


@pytest.mark.parametrize(("sel", "keys", "labels", "want"), [
    ({"matchLabels": {"app": "x"}}, ("volcano.sh/partition-id",), {"app": "x", "volcano.sh/partition-id": "1"}, ["1"]),
    (None, ("k",), {"k": "v"}, ["v"]),
    ({"matchLabels": {"app": "x"}}, (), {"app": "x"}, []),
    ({}, ("k",), {"k": "v"}, ["v"]),  # an empty selector matches every pod
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["x", "y"]}]}, ("k",), {"app": "y", "k": "1"},
     ["1"]),
    (None, ("a", "b"), {"a": "1", "b": ""}, None),  # an empty value does not match
    ({"matchLabels": {"app": "x"}}, ("k",), {"app": "z", "k": "1"}, None),
    (None, ("k",), {"other": "1"}, None),
    (None, ("k",), {}, None),
])
def test_subjob_match_values(sel, keys, labels, want):
    pol = SubGroupPolicy("p", 1, 0, selector(sel), keys, None)
    assert match_values(pol, labels) == want


def test_subjob_match_values_broken_selector():
    pol = SubGroupPolicy("p", 1, 0, None, ("k",), None, broken="labelSelector.matchExpressions[0].operator: bad")
    assert match_values(pol, {"k": "v"}) is None


def test_subjob_id():
    assert subjob_id("ns/job", "policy", ["a", "b"]) == "ns/job/policy-a-b"
    assert subjob_id("ns/job", "policy", ["1"]) == "ns/job/policy-1"
    long_id = subjob_id("ns/job", "policy", ["x" * 200])
    assert long_id.startswith("ns/job/policy-") and len(long_id) < 40


@pytest.mark.parametrize(("phases", "size", "ready", "pipelined"), [
    (["Pipelined", "Pipelined"], 2, False, True),
    (["Running", "Pipelined"], 2, False, True),
    (["BestEffort", "Pipelined"], 2, False, True),
    (["Running", "BestEffort", "Pipelined"], 3, False, True),
    (["Pending", "Pipelined"], 2, False, False),
    (["Failed", "Pipelined"], 2, False, False),
    (["BestEffort", "BestEffort"], 2, True, True),
    (["Running", "Succeeded"], 2, True, True),
])
def test_subjob_ready_and_pipelined(phases, size, ready, pipelined):
    pods = []
    for i, phase in enumerate(phases):
        spec: dict[str, Any] = {"name": f"ns/p{i}", "group": "pg", "labels": {"g": "1"}, "req": {"cpu": "1"}}
        if phase == "BestEffort":
            spec["req"] = {}
        elif phase in ("Running", "Succeeded", "Failed"):
            spec.update(phase=phase, node="n1")
        pods.append(spec)
    ssn = open_with({"min": 1, "subGroupPolicy": [policy("p", keys=("g",), subGroupSize=size)]}, pods)
    job = ssn.jobs["ns/pg"]
    assert job.subjobs is not None
    sub = job.subjobs["ns/pg/p-1"]
    for i, phase in enumerate(phases):
        if phase == "Pipelined":  # what allocate's pipeline makes of a pending task
            job.set_status(next(t for t in sub.tasks.values() if t.name == f"p{i}"), TaskStatus.PIPELINED)
    assert (sub.is_ready(), sub.is_pipelined()) == (ready, pipelined)


def test_topology_of_an_empty_tree():
    topo = session_topology([], [])
    assert topo.ready and not topo.has_hypernodes and topo.tree.root.tier == 1
    prepare([], topo, {})
