"""Network topology through the extender (issue 17): the cluster state reads HyperNodes, the session loop
(examples/scheduler-conf-network-topology.yaml) plans a hard tier-1 gang inside one leaf, and kube-scheduler's filter,
its re-plan and bind all keep every member inside that leaf: a member offered only nodes of another leaf is
refused, never moved there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from extender.service.core import Extender
from extender.service.wire import ExtenderArgs, ExtenderBindingArgs
from tests.service.extender_state import RecordingClient, make_extender, volcano_pod
from tests.unit.extender.engine.builders import hypernode, node, podgroup, queue

pytestmark = pytest.mark.asyncio(loop_scope="session")

CONF = Path(__file__).resolve().parents[2] / "examples" / "scheduler-conf-network-topology.yaml"
LEAVES = {"leaf-a": ["a1", "a2", "a3"], "leaf-b": ["b1", "b2", "b3"]}
MEMBERS = [f"ml/g-{i}" for i in range(4)]


def _objects(topology: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    docs = [node({"name": n, "alloc": {"cpu": "4", "memory": "16Gi"}}) for names in LEAVES.values() for n in names]
    docs += [hypernode({"name": leaf, "tier": 1, "nodes": names}) for leaf, names in LEAVES.items()]
    docs.append(hypernode({"name": "spine", "tier": 2, "hypernodes": list(LEAVES)}))
    docs.append(queue({"name": "default"}))
    pg: dict[str, Any] = {"name": "ml/g", "min": 4, "phase": "Inqueue"}
    if topology is not None:
        pg["networkTopology"] = topology
    docs.append(podgroup(pg))
    docs += [volcano_pod({"name": key, "group": "g", "req": {"cpu": "3", "memory": "1Gi"}}) for key in MEMBERS]
    return docs


async def _planned(topology: dict[str, Any] | None) -> Extender:
    extender = make_extender(_objects(topology), RecordingClient(), conf=CONF)
    await extender.loop.run_once()
    return extender


def _pod(key: str) -> dict[str, Any]:
    return next(d for d in _objects() if d["kind"] == "Pod" and f"ml/{d['metadata']['name']}" == key)


async def test_the_state_reads_hypernodes():
    extender = await _planned(None)
    assert sorted(extender.state.snapshot.hypernodes) == ["leaf-a", "leaf-b", "spine"]


async def test_a_hard_tier_1_gang_is_planned_inside_one_leaf_and_replans_stay_there():
    extender = await _planned({"mode": "hard", "highestTierAllowed": 1})
    # One 3-CPU member per 4-CPU node: 4 members, 3 nodes per leaf — a hard tier-1 gang cannot be placed whole.
    assert all(extender.plan.node_for(k) is None for k in MEMBERS)

    extender = make_extender([d for d in _objects({"mode": "hard", "highestTierAllowed": 2})], RecordingClient(),
                             conf=CONF)
    await extender.loop.run_once()
    planned = {k: extender.plan.node_for(k) for k in MEMBERS}
    assert None not in planned.values()
    gang = extender.plan.gangs["ml/g"]
    assert gang.domain == frozenset(n for names in LEAVES.values() for n in names)  # the spine


async def test_filter_and_bind_never_move_a_member_out_of_its_leaf():
    small = {"mode": "hard", "highestTierAllowed": 1}
    docs = _objects(small)
    docs = [d for d in docs if not (d["kind"] == "Pod" and d["metadata"]["name"] == "g-3")]
    for d in docs:
        if d["kind"] == "PodGroup":
            d["spec"]["minMember"] = 3
    extender = make_extender(docs, RecordingClient(), conf=CONF)
    await extender.loop.run_once()
    keys = MEMBERS[:3]
    planned = {k: extender.plan.node_for(k) for k in keys}
    leaf = next(leaf for leaf, names in LEAVES.items() if planned[keys[0]] in names)
    other = next(lf for lf in LEAVES if lf != leaf)
    assert all(n in LEAVES[leaf] for n in planned.values()), planned
    assert extender.plan.gangs["ml/g"].domain == frozenset(LEAVES[leaf])

    # kube-scheduler offers only the other leaf's nodes: no re-plan there, the member is refused
    refused = extender.filter(_args(keys[0], LEAVES[other]))
    assert not refused.get("NodeNames"), refused
    assert "no offered node fits" in str(refused), refused
    # and a bind to the other leaf is refused as not planned
    pod = _pod(keys[1])
    extender.state.apply("ADDED", pod)
    result = await extender.bind(_binding(pod, LEAVES[other][0]))
    assert "not admitted" in result.error, result.error


def _args(key: str, names: list[str]) -> ExtenderArgs:
    return ExtenderArgs(Pod=_pod(key), Nodes=None, NodeNames=names)


def _binding(pod: dict[str, Any], node_name: str) -> ExtenderBindingArgs:
    meta = pod["metadata"]
    return ExtenderBindingArgs(PodName=meta["name"], PodNamespace=meta["namespace"], PodUID=meta["uid"],
                               Node=node_name)
