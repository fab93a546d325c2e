"""allocate's HyperNode search (extender/engine/actions/hyperallocate.py) against an exhaustive one.

Volcano dry-runs every HyperNode of a gradient and keeps the best by score. Lapilli tries the candidates in order of
the best score each could reach and stops once none left can beat the best found; these tests check that the shortcut
decides exactly as trying every candidate does (ties to the lowest name in both), on random trees, busy nodes, gangs
partly running and hard, soft and flat gangs, and that it is a shortcut: a gang too large for any leaf takes one dry
run in the spine it lands in, not one per spine.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from extender.engine.actions import hyperallocate
from extender.engine.actions.hyperallocate import HyperAllocator, JobSheet
from extender.engine.run import parse_scheduler_conf, run_session
from extender.engine.snapshot import build_snapshot
from tests.unit.extender.engine.builders import documents

CONF = parse_scheduler_conf("""
actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}, {name: binpack},
            {name: network-topology-aware}]
""")

TOPOLOGIES: list[dict[str, Any] | None] = [
    {"mode": "hard", "highestTierAllowed": 1}, {"mode": "hard", "highestTierAllowed": 2}, {"mode": "soft"}, None]


def scenario(rng: random.Random) -> dict[str, Any]:
    """A random tree (spines of leaves of nodes, sometimes a tier-3 top, sometimes a node under none), random
    running pods and 1-5 pending gangs, one of them perhaps partly running."""
    nodes: list[dict[str, Any]] = []
    hypernodes: list[dict[str, Any]] = []
    spines = []
    for s in range(rng.randint(1, 3)):
        leaves = []
        for leaf in range(rng.randint(1, 3)):
            names = [f"n{s}{leaf}{i}" for i in range(rng.randint(1, 3))]
            nodes += [{"name": n, "alloc": {"cpu": str(rng.choice([4, 8])), "memory": "32Gi"}} for n in names]
            leaves.append(f"leaf-{s}{leaf}")
            hypernodes.append({"name": leaves[-1], "tier": 1, "nodes": names})
        spines.append(f"spine-{s}")
        hypernodes.append({"name": spines[-1], "tier": 2, "hypernodes": leaves})
    if rng.random() < 0.5:
        hypernodes.append({"name": "top", "tier": 3, "hypernodes": spines})
    if rng.random() < 0.3:
        nodes.append({"name": "loose", "alloc": {"cpu": "8", "memory": "32Gi"}})
    pods: list[dict[str, Any]] = []
    podgroups: list[dict[str, Any]] = []
    for i, n in enumerate(nodes):  # running load
        if rng.random() < 0.6:
            podgroups.append({"name": f"ns/busy{i}", "min": 1, "phase": "Running"})
            pods.append({"name": f"ns/busy{i}-0", "group": f"busy{i}", "node": n["name"], "phase": "Running",
                         "req": {"cpu": str(rng.randint(1, 3)), "memory": "1Gi"}})
    for g in range(rng.randint(1, 5)):
        size, cpu = rng.randint(1, 6), rng.randint(1, 4)
        topology = rng.choice(TOPOLOGIES)
        running = rng.randint(0, size - 1) if g == 0 and size > 1 else 0
        group: dict[str, Any] = {"name": f"ns/g{g}", "min": rng.randint(1, size),
                                 "phase": "Running" if running else "Inqueue"}
        if topology is not None:
            group["networkTopology"] = topology
        podgroups.append(group)
        for i in range(size):
            spec: dict[str, Any] = {"name": f"ns/g{g}-{i}", "group": f"g{g}", "req": {"cpu": str(cpu), "memory": "1Gi"}}
            if i < running:
                spec.update(node=rng.choice(nodes)["name"], phase="Running")
            pods.append(spec)
    return {"nodes": nodes, "hypernodes": hypernodes, "podgroups": podgroups, "pods": pods,
            "queues": [{"name": "default"}]}


def exhaustive(self: HyperAllocator, job: Any, sheet: JobSheet, candidates: Any) -> tuple[list[int], list[float]]:
    """Every candidate with an unbeatable bound, in name order: each is dry-run and the best kept (Volcano)."""
    names = self.ssn.topology.index.names
    order = sorted(candidates.tolist(), key=lambda at: names[at])
    return order, [float("inf")] * len(order)


@pytest.mark.parametrize("seed", range(300))
def test_the_bounded_search_decides_as_trying_every_candidate(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    snap = build_snapshot(documents(scenario(random.Random(seed))))
    bounded = run_session(snap, CONF)
    monkeypatch.setattr(HyperAllocator, "_job_bounds", exhaustive)
    every = run_session(snap, CONF)
    assert bounded.binds == every.binds
    assert bounded.pipelined == every.pipelined
    assert {k: v.hypernode for k, v in bounded.podgroups.items()} == {k: v.hypernode for k, v in every.podgroups.items()}


def test_a_gang_no_leaf_holds_takes_one_dry_run(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes, hypernodes, spines = [], [], []
    for s in range(4):
        leaves = []
        for leaf in range(2):
            names = [f"n{s}{leaf}{i}" for i in range(2)]
            nodes += [{"name": n, "alloc": {"cpu": "8", "memory": "32Gi"}} for n in names]
            leaves.append(f"leaf-{s}{leaf}")
            hypernodes.append({"name": leaves[-1], "tier": 1, "nodes": names})
        spines.append(f"spine-{s}")
        hypernodes.append({"name": spines[-1], "tier": 2, "hypernodes": leaves})
    pods = [{"name": f"ns/g-{i}", "group": "g", "req": {"cpu": "8", "memory": "1Gi"}} for i in range(3)]
    snap = build_snapshot(documents({
        "nodes": nodes, "hypernodes": hypernodes, "pods": pods, "queues": [{"name": "default"}],
        "podgroups": [{"name": "ns/g", "min": 3, "networkTopology": {"mode": "hard", "highestTierAllowed": 2}}]}))
    tried: list[str] = []
    real = HyperAllocator._try_job_in

    def counted(self: HyperAllocator, job: Any, sheet: JobSheet, hypernode: str, failed: Any) -> Any:
        tried.append(hypernode)
        return real(self, job, sheet, hypernode, failed)

    monkeypatch.setattr(hyperallocate.HyperAllocator, "_try_job_in", counted)
    result = run_session(snap, CONF)
    assert len(result.binds) == 3
    assert {node[:2] for node in result.binds.values()} == {"n0"}  # all under spine-0 (the lowest name of equals)
    assert tried == ["spine-0"]
