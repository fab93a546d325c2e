"""Engine invariants over random clusters (hypothesis), whatever the actions and plugins decide:

* a node is never over-allocated: what was on it plus what the session binds there fits its allocatable;
* a gang is all-or-nothing after commit: a PodGroup gets new binds only if they bring it to minMember;
* Σ deserved ≤ cluster: proportion never hands out more than the nodes have;
* the same snapshot gives the same decisions, whatever order its documents came in;
* gang-aware eviction (gangpreempt, gangreclaim) never leaves a gang it evicts from with 1..minMember−1 members,
  nor, for a gang with sub-gangs (subGroupPolicy), with fewer whole sub-gangs than its minSubGroups if it had them.
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
GANG_ACTIONS = ["enqueue, allocate, gangpreempt, gangreclaim, backfill", "gangpreempt", "gangreclaim",
                "allocate, gangreclaim, gangpreempt"]


@st.composite
def scenarios(draw: st.DrawFn, actions: list[str] = ACTIONS) -> dict[str, Any]:
    nodes = []
    for i in range(draw(st.integers(1, 5))):
        alloc = {"cpu": str(draw(st.sampled_from([2, 4, 8]))), "memory": f"{draw(st.sampled_from([2, 8]))}Gi"}
        if draw(st.booleans()):
            alloc["nvidia.com/gpu"] = str(draw(st.sampled_from([1, 2, 4])))
        nodes.append({"name": f"n{i}", "alloc": alloc})
    queues = [{"name": f"q{i}", "weight": draw(st.integers(1, 4)), "reclaimable": draw(st.booleans())}
              for i in range(draw(st.integers(1, 3)))]
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
    return {"conf": {"actions": draw(st.sampled_from(actions)), "tiers": TIERS},
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


@st.composite
def contended(draw: st.DrawFn) -> dict[str, Any]:
    """Full GPU nodes held by running gangs (some with members above their minimum, some pods not preemptable),
    and higher-priority gangs waiting, in one or more queues: where gang-aware eviction has work to do."""
    gpu = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}
    nodes = [{"name": f"n{i}", "alloc": {"cpu": "64", "memory": "64Gi", "nvidia.com/gpu": str(draw(st.integers(2, 6)))}}
             for i in range(draw(st.integers(1, 4)))]
    queues = [{"name": f"q{i}", "reclaimable": draw(st.booleans())} for i in range(draw(st.integers(1, 3)))]
    free = [(n["name"], int(n["alloc"]["nvidia.com/gpu"])) for n in nodes]
    slots = [name for name, count in free for _ in range(count)]
    order = draw(st.permutations(slots))
    podgroups, pods, g = [], [], 0
    while order:
        size = min(draw(st.integers(1, 4)), len(order))
        queue = draw(st.sampled_from(queues))["name"]
        podgroups.append({"name": f"ns/run{g}", "queue": queue, "min": draw(st.integers(1, size)), "phase": "Running",
                          "priorityClassName": draw(st.sampled_from(["low", "mid"]))})
        parts = size >= 2 and draw(st.booleans())  # sub-gangs of two (`part` t // 2), some of which it needs
        if parts:
            podgroups[-1]["subGroupPolicy"] = [{"name": "p", "subGroupSize": SUB_GANG, "matchLabelKeys": ["part"],
                                                "minSubGroups": draw(st.integers(1, size // SUB_GANG))}]
        for t in range(size):
            pod = {"name": f"ns/run{g}-w-{t}", "group": f"run{g}", "req": gpu, "node": order.pop(), "phase": "Running",
                   "priorityClassName": podgroups[-1]["priorityClassName"], "created": f"2026-01-01T00:{g:02d}:00Z",
                   "labels": {"part": str(t // SUB_GANG)} if parts else {}}
            if draw(st.integers(0, 9)) == 0:
                pod["labels"]["volcano.sh/preemptable"] = "false"
            pods.append(pod)
        g += 1
    for w in range(draw(st.integers(1, 2))):
        size = draw(st.integers(1, 6))
        podgroups.append({"name": f"ns/want{w}", "queue": draw(st.sampled_from(queues))["name"],
                          "min": draw(st.integers(1, size)), "phase": "Inqueue", "priorityClassName": "high"})
        pods += [{"name": f"ns/want{w}-w-{t}", "group": f"want{w}", "req": gpu, "priorityClassName": "high"}
                 for t in range(size)]
    return {"conf": {"actions": draw(st.sampled_from(GANG_ACTIONS)), "tiers": TIERS},
            "priorityClasses": [{"name": "low", "value": 10}, {"name": "mid", "value": 50}, {"name": "high", "value": 100}],
            "nodes": nodes, "queues": queues, "podgroups": podgroups, "pods": pods}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(scenarios(actions=GANG_ACTIONS), contended()))
def test_gang_aware_eviction_never_leaves_a_gang_in_part(scenario: dict[str, Any]) -> None:
    snap, result = _run(scenario)
    evicted = set(result.evictions)
    for key, group in snap.podgroups.items():
        members = [k for k, p in snap.pods.items() if f"{p.namespace}/{p.group}" == key]
        lost = sum(1 for k in members if k in evicted)
        if not lost or group.min_member <= 1:
            continue
        holding = [k for k in members if snap.pods[k].node_name and snap.pods[k].phase in ("Running", "Pending")]
        after = len(holding) - lost + sum(1 for k in members if k in result.binds)
        assert after == 0 or after >= group.min_member, (key, holding, lost, after, group.min_member)
        for policy in group.sub_groups:  # each sub-gang whole (SUB_GANG members) before, and after unless all went
            before = _whole_parts(snap, holding)
            kept = _whole_parts(snap, [k for k in holding if k not in evicted])
            if after and before >= policy.min_groups:
                assert kept >= policy.min_groups, (key, before, kept, policy.min_groups, sorted(evicted))


SUB_GANG = 2


def _whole_parts(snap: Snapshot, pods: list[str]) -> int:
    counts: dict[str, int] = {}
    for key in pods:
        part = snap.pods[key].labels.get("part", "")
        counts[part] = counts.get(part, 0) + 1
    return sum(1 for n in counts.values() if n >= SUB_GANG)
