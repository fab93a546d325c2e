"""Engine invariants over random clusters (hypothesis), whatever the actions and plugins decide:

* a node is never over-allocated: what was on it plus what the session binds there fits its allocatable;
* a gang is all-or-nothing after commit: a PodGroup gets new binds only if they bring it to minMember;
* Σ deserved ≤ cluster: proportion never hands out more than the nodes have;
* the same snapshot gives the same decisions, whatever order its documents came in.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.engine.conf import parse_conf
from extender.engine.results import Decisions
from extender.engine.run import registry, run_session
from extender.engine.snapshot import Snapshot, build_snapshot
from lapilli.resources.vector import TOLERANCE
from tests.unit.extender.engine.builders import documents

REQUESTS = [
    {"cpu": "1", "memory": "1Gi"},
    {"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "1"},
    {"cpu": "500m", "memory": "512Mi"},
    {"cpu": "3", "memory": "1Gi", "nvidia.com/gpu": "2"},
]
TIERS = [
    {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
    {"plugins": [{"name": "overcommit"}, {"name": "drf"}, {"name": "predicates"}, {"name": "proportion"},
                 {"name": "nodeorder"}, {"name": "binpack"}]},
]
ACTIONS = ["enqueue, allocate, backfill", "enqueue, allocate, preempt, reclaim, backfill", "allocate", "reclaim, allocate"]


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    nodes = []
    for i in range(draw(st.integers(1, 5))):
        alloc = {"cpu": str(draw(st.sampled_from([2, 4, 8]))), "memory": f"{draw(st.sampled_from([2, 8]))}Gi"}
        if draw(st.booleans()):
            alloc["nvidia.com/gpu"] = str(draw(st.sampled_from([1, 2, 4])))
        nodes.append({"name": f"n{i}", "alloc": alloc})
    queues = [{"name": f"q{i}", "weight": draw(st.integers(1, 4))} for i in range(draw(st.integers(1, 3)))]
    podgroups, pods = [], []
    room = {n["name"]: _units(n["alloc"]) for n in nodes}
    for g in range(draw(st.integers(1, 5))):
        size = draw(st.integers(1, 4))
        group = {"name": f"ns/g{g}", "queue": draw(st.sampled_from(queues))["name"],
                 "min": draw(st.integers(1, size)), "phase": draw(st.sampled_from(["Pending", "Inqueue", "Running"]))}
        podgroups.append(group)
        request = draw(st.sampled_from(REQUESTS))
        priority = draw(st.sampled_from([0, 10, 100]))
        for t in range(size):
            pod: dict[str, Any] = {"name": f"ns/g{g}-t-{t}", "group": f"g{g}", "req": request, "priority": priority}
            target = draw(st.sampled_from([None, *room]))
            # A running pod only where it fits, so the snapshot itself is not over-allocated.
            if target is not None and _fits(_units(request), room[target]):
                room[target] = {k: v - _units(request).get(k, 0) for k, v in room[target].items()}
                pod.update(node=target, phase="Running")
            pods.append(pod)
    return {"conf": {"actions": draw(st.sampled_from(ACTIONS)), "tiers": TIERS},
            "nodes": nodes, "queues": queues, "podgroups": podgroups, "pods": pods}


def _units(resources: dict[str, str]) -> dict[str, float]:
    from lapilli.resources.units import to_units

    return {k: to_units(k, v) for k, v in resources.items()}


def _fits(request: dict[str, float], room: dict[str, float]) -> bool:
    return all(v <= room.get(k, 0) for k, v in request.items())


def _run(scenario: dict[str, Any], reverse: bool = False) -> tuple[Snapshot, Decisions]:
    docs = documents(scenario)
    snap = build_snapshot(list(reversed(docs)) if reverse else docs)
    return snap, run_session(snap, parse_conf(scenario["conf"], registry()))


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(scenarios())
def test_a_node_is_never_over_allocated(scenario: dict[str, Any]) -> None:
    snap, result = _run(scenario)
    for name, node in snap.nodes.items():
        on_node = [p for p in snap.pods.values() if p.node_name == name and p.phase in ("Running", "Pending")]
        on_node += [snap.pods[key] for key, target in result.binds.items() if target == name]
        for resource, capacity in node.allocatable.items():
            used = sum(p.request.get(resource, 0.0) for p in on_node)
            assert used < capacity + TOLERANCE, (name, resource, used, capacity)


@SETTINGS
@given(scenarios())
def test_a_gang_binds_all_or_nothing(scenario: dict[str, Any]) -> None:
    snap, result = _run(scenario)
    for key, group in snap.podgroups.items():
        members = {k: p for k, p in snap.pods.items() if f"{p.namespace}/{p.group}" == key}
        bound = sum(1 for k in members if k in result.binds)
        if bound:
            placed = sum(1 for p in members.values() if p.node_name and p.phase in ("Running", "Pending", "Succeeded"))
            assert placed + bound >= group.min_member, (key, placed, bound, group.min_member)


@SETTINGS
@given(scenarios())
def test_deserved_never_exceeds_the_cluster(scenario: dict[str, Any]) -> None:
    _, result = _run(scenario)
    assert result.nodes is not None
    total = result.nodes.allocatable.sum(axis=0)
    deserved = [q.deserved for q in result.queues.values() if q.deserved is not None]
    if deserved:
        assert np.all(np.sum(deserved, axis=0) <= total + TOLERANCE), (np.sum(deserved, axis=0), total)


@SETTINGS
@given(scenarios())
def test_the_same_snapshot_gives_the_same_decisions(scenario: dict[str, Any]) -> None:
    _, first = _run(scenario)
    _, again = _run(scenario)
    _, shuffled = _run(scenario, reverse=True)  # the documents in another order: the same cluster
    assert first.to_json() == again.to_json() == shuffled.to_json()
    assert list(first.binds.items()) == list(again.binds.items())  # the order of binds too
    assert first.evictions == again.evictions
