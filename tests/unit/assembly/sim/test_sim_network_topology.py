"""The simulator's network: HyperNodes in a workload reach Lapilli's sessions, a Job's networkTopology its PodGroup,
and `sim.lapilli.io/tier-penalty` lengthens a gang by the tiers its pods span (assembly/sim/topology.py). A hard
tier-1 gang stays under one leaf under Lapilli with network-topology-aware, spreads without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from assembly.sim import LapilliScheduler, WorkloadError, load_workload, sim_conf, simulate
from assembly.sim.state import Cluster
from assembly.sim.topology import spans
from tests.unit.assembly.sim.test_sim import job, node

CONF = Path(__file__).resolve().parents[4] / "examples" / "scheduler-conf-network-topology.yaml"
WORKER = {"cpu": "8", "memory": "8Gi", "nvidia.com/gpu": "2"}


def hypernode(name: str, tier: int, kind: str, members: list[str]) -> dict[str, Any]:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members]}}


def cluster_docs() -> list[dict[str, Any]]:
    names = [f"n{i}" for i in range(6)]
    return [*(node(n) for n in names), hypernode("leaf-a", 1, "Node", names[:3]),
            hypernode("leaf-b", 1, "Node", names[3:]), hypernode("spine", 2, "HyperNode", ["leaf-a", "leaf-b"])]


def gang(name: str, pods: int, topology: dict[str, Any] | None, penalty: str = "0.25", **kw: Any) -> dict[str, Any]:
    doc = job(name, {"worker": (pods, WORKER)}, **kw)
    doc["metadata"]["annotations"]["sim.lapilli.io/tier-penalty"] = penalty
    if topology is not None:
        doc["spec"]["networkTopology"] = topology
    return doc


def test_spans_and_the_tier_penalty() -> None:
    work = load_workload([*cluster_docs(), gang("g", 3, None)])
    tree = Cluster.create(work).tree
    assert spans(tree, ["n0", "n1"]) == 0 and spans(tree, ["n0", "n4"]) == 1 and spans(tree, []) == 0
    sim_job = work.jobs[0]
    assert sim_job.run_time({}, 0) == 600 and sim_job.run_time({}, 1) == 750 and sim_job.run_time({}, 2) == 900


def test_a_node_outside_every_hypernode_meets_the_others_at_the_root() -> None:
    work = load_workload([*cluster_docs(), node("lone"), gang("g", 1, None)])
    assert spans(Cluster.create(work).tree, ["n0", "lone"]) == 2


@pytest.mark.parametrize(("penalty", "message"), [
    ("x", "is not a number"), ("-1", "must be ≥ 0"),
])
def test_a_bad_tier_penalty_is_refused(penalty: str, message: str) -> None:
    with pytest.raises(WorkloadError, match=message):
        load_workload([*cluster_docs(), gang("g", 1, None, penalty=penalty)])


def test_a_hard_tier_1_gang_stays_in_a_leaf_with_the_plugin_and_spreads_without() -> None:
    # `hold` takes n0 and n1 (a node holds one worker): leaf-a keeps one free node, leaf-b three; only leaf-b holds
    # the gang of 2 whole.
    docs = [*cluster_docs(), gang("hold", 2, None, duration=3600),
            gang("train", 2, {"mode": "hard", "highestTierAllowed": 1}, submit=60)]
    work = load_workload(docs)
    with_plugin = simulate(work, LapilliScheduler(sim_conf(CONF.read_text())))
    assert with_plugin.jobs["ml/train"].span == 0
    assert with_plugin.jobs["ml/train"].finished == 60 + 600
    assert with_plugin.jobs["ml/train"].to_json()["span"] == 0
    without = simulate(work, LapilliScheduler(sim_conf()))
    assert without.jobs["ml/train"].span == 1  # node order alone: n2 (leaf-a) and n3 (leaf-b)
    assert without.jobs["ml/train"].finished == 60 + 750


def test_without_hypernodes_there_is_no_span() -> None:
    result = simulate(load_workload([node("n1"), gang("g", 1, None)]), LapilliScheduler())
    assert result.jobs["ml/g"].span is None and "span" not in result.jobs["ml/g"].to_json()
