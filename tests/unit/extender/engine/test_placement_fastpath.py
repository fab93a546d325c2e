"""The placement fast path agrees with the straightforward vectorised computation, on random small clusters.

After random placements, pipelines, evictions and undos, for every task: its fit error is the per-node histogram computed
plainly; for every pending task: the class cache (refreshed row by
row over Python floats) equals masks and scores computed afresh over all nodes with numpy; `choose` picks the node
that the masks-then-argmax computation picks (tasks with pod affinity, spread or host ports included: their picks
are the class's with the dynamic predicates' refusals taken out); and the scorers' per-column formulas equal the matrix form they were
rewritten from (kube-scheduler's LeastAllocated / MostAllocated / BalancedAllocation, Volcano's binpack).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.engine.conf import parse_conf
from extender.engine.model import Task, TaskStatus
from extender.engine.placement import NO_NODE
from extender.engine.plugins.binpack import BinpackScorer
from extender.engine.plugins.nodeorder import NodeOrderScorer
from extender.engine.rowmath import SCALAR, VECTOR, ScalarRow, VectorRows
from extender.engine.run import open_session, registry
from extender.engine.session import Session
from extender.engine.snapshot import build_snapshot
from lapilli.resources.vector import less_equal_rows
from tests.unit.extender.engine.builders import documents
from tests.unit.extender.engine.reference import reference_fit_error

REQUESTS = [
    {"cpu": "1", "memory": "1Gi"},
    {"cpu": "2", "memory": "3Gi", "nvidia.com/gpu": "1"},
    {"cpu": "500m", "memory": "0"},
    {"cpu": "3", "memory": "512Mi", "nvidia.com/gpu": "2"},
    {"cpu": "1500m", "memory": "2Gi", "example.com/foo": "1"},
]
TEMPLATES: list[dict[str, Any]] = [
    {},
    {"nodeSelector": {"zone": "a"}},
    {"tolerations": [{"key": "k", "operator": "Exists"}]},
    {"ports": [80]},
    {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}},
    ]}}},
    # Pod terms: their tasks are dynamic (predicates) or rescored (scores), and pick through the masks.
    {"labels": {"app": "w"}, "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "w"}}, "topologyKey": "zone"}]}}},
    {"labels": {"app": "s"}, "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "s"}}}]},
    {"labels": {"app": "w"}, "affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 3, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "s"}}, "topologyKey": "zone"}}]}}},
]


@st.composite
def clusters(draw: st.DrawFn) -> dict[str, Any]:
    nodes = []
    for i in range(draw(st.integers(1, 7))):
        alloc = {
            "cpu": str(draw(st.sampled_from([1, 2, 4, 8]))),
            "memory": f"{draw(st.sampled_from([0, 1, 4, 8]))}Gi",
            "pods": str(draw(st.sampled_from([2, 4, 110]))),
        }
        if draw(st.booleans()):
            alloc["nvidia.com/gpu"] = str(draw(st.sampled_from([0, 1, 4])))
        if draw(st.booleans()):
            alloc["example.com/foo"] = str(draw(st.sampled_from([1, 3])))
        node: dict[str, Any] = {"name": f"n{i}", "alloc": alloc, "labels": {"zone": draw(st.sampled_from("ab"))}}
        taint = draw(st.sampled_from([None, "NoSchedule", "PreferNoSchedule"]))
        if taint:
            node["taints"] = [{"key": "k", "value": "v", "effect": taint}]
        nodes.append(node)
    pods = []
    for i in range(draw(st.integers(1, 14))):
        pod: dict[str, Any] = {"name": f"ns/job-t-{i}", "group": "job", "req": draw(st.sampled_from(REQUESTS))}
        pod.update(draw(st.sampled_from(TEMPLATES)))
        pods.append(pod)
    nodeorder = {
        "leastrequested.weight": draw(st.sampled_from([0, 1, 2])),
        "mostrequested.weight": draw(st.sampled_from([0, 1])),
        "balancedresource.weight": draw(st.sampled_from([0, 1, 3])),
        "nodeaffinity.weight": draw(st.sampled_from([0, 2])),
        "tainttoleration.weight": draw(st.sampled_from([0, 3])),
    }
    binpack = {
        "binpack.weight": draw(st.sampled_from([0, 1, 7])),
        "binpack.cpu": draw(st.sampled_from([1, 3])),
        "binpack.memory": draw(st.sampled_from([1, 2])),
        "binpack.resources": "nvidia.com/gpu, example.com/foo",
        "binpack.resources.nvidia.com/gpu": draw(st.sampled_from([1, 5])),
    }
    plugins = [{"name": "gang"}, {"name": "predicates"}, {"name": "nodeorder", "arguments": nodeorder}]
    if draw(st.booleans()):
        plugins.append({"name": "binpack", "arguments": binpack})
    return {
        "conf": {"actions": "allocate", "tiers": [{"plugins": plugins}]},
        "nodes": nodes,
        "queues": [{"name": "q"}],
        "podgroups": [{"name": "ns/job", "queue": "q", "min": 1}],
        "pods": pods,
    }


def _fresh(ssn: Session, task: Task) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(fit idle, fit future, row-local score, feasible) over every node, computed from scratch."""
    arrays = ssn.arrays
    idle = arrays.allocatable - arrays.used
    future = idle + arrays.releasing - arrays.pipelined
    score = np.zeros(len(ssn.nodes))
    for scorer in ssn.node_orders.all():
        score += scorer.row_score(task, VECTOR, VectorRows(arrays, None))
    idx = np.arange(len(ssn.nodes))
    feasible = less_equal_rows(task.resreq, future)
    for pred in ssn.predicates.all():
        feasible &= pred.static_mask(task, idx)
        dynamic = pred.dynamic_mask(task, idx)
        if dynamic is not None:
            feasible &= dynamic
    return less_equal_rows(task.resreq, idle), less_equal_rows(task.resreq, future), score, feasible


def _reference_choice(ssn: Session, task: Task) -> tuple[str, bool] | None:
    fit_idle, _, score, feasible = _fresh(ssn, task)
    for candidates, idle in ((feasible & fit_idle, True), (feasible, False)):
        idx = np.flatnonzero(candidates)
        if len(idx):
            total = score[idx]
            for scorer in ssn.node_orders.all():
                extra = scorer.normalized(task, idx)
                if extra is not None:
                    total = total + extra
            return ssn.nodes[int(idx[int(np.argmax(total))])].name, idle
    return None


def _matrix_scores(ssn: Session, task: Task) -> np.ndarray:
    """The scorers as matrix expressions over [node, resource] (how upstream writes them)."""
    arrays, total = ssn.arrays, np.zeros(len(ssn.nodes))
    for scorer in ssn.node_orders.all():
        if isinstance(scorer, NodeOrderScorer):
            cols, want = zip(*scorer._columns(task), strict=True)
            capacity = arrays.allocatable[:, cols]
            requested = arrays.used[:, cols] + np.array(want)
            usable = (capacity > 0) & (requested <= capacity)
            safe = np.where(capacity > 0, capacity, 1.0)
            least = np.where(usable, np.floor((capacity - requested) * 100 / safe), 0.0)
            most = np.where(usable, np.floor(requested * 100 / safe), 0.0)
            fractions = np.where(capacity > 0, np.minimum(requested / safe, 1.0), 1.0)
            total += scorer.args.least * np.floor(least[:, :2].sum(axis=1) / 2) if scorer.args.least else 0.0
            total += scorer.args.most * np.floor(most[:, :2].sum(axis=1) / 2) if scorer.args.most else 0.0
            if scorer.args.balanced:
                total += scorer.args.balanced * np.floor((1.0 - fractions.std(axis=1)) * 100)
        elif isinstance(scorer, BinpackScorer) and scorer._class(task) is not None:
            terms, factor = scorer._class(task)  # type: ignore[misc]
            cols, request, weights = (list(x) for x in zip(*terms, strict=True))
            alloc = arrays.allocatable[:, cols]
            after = arrays.used[:, cols] + np.array(request)
            fits = np.all((alloc == 0) | (after <= alloc), axis=1)
            ratio = after / np.where(alloc > 0, alloc, np.inf)
            total += np.where(fits, (ratio * np.array(weights)).sum(axis=1) * factor, 0.0)
    return total


def _check(ssn: Session) -> None:
    for task in ssn.tasks.values():
        assert ssn.fit_error(task) == reference_fit_error(ssn, task), "asked of every task, twice (the memo)"
        assert ssn.fit_error(task) == reference_fit_error(ssn, task)
        if task.status is not TaskStatus.PENDING:
            continue
        entry = ssn.placement.entry(task)
        fit_idle, fit_future, score, feasible = _fresh(ssn, task)
        assert np.array_equal(entry.fit_idle, fit_idle)
        assert np.array_equal(entry.fit_future, fit_future)
        assert np.array_equal(entry.score, score)
        assert np.array_equal(entry.score, _matrix_scores(ssn, task))
        if not task.dynamic:  # a dynamic task's picks are the class's, masked at choose time (checked below)
            assert np.array_equal(entry.pick_future != NO_NODE, feasible)
        for node in ssn.nodes:
            row = ScalarRow.of(ssn.arrays, node.idx)
            for scorer in ssn.node_orders.all():
                vector = scorer.row_score(task, VECTOR, VectorRows(ssn.arrays, np.array([node.idx])))
                assert np.array_equal(np.broadcast_to(vector, 1), [scorer.row_score(task, SCALAR, row)])
        choice = ssn.choose(task)
        assert (None if choice is None else (choice[0].name, choice[1])) == _reference_choice(ssn, task)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters(), data=st.data())
def test_fast_path_matches_vectorised_computation(cluster: dict[str, Any], data: st.DataObject) -> None:
    ssn = open_session(build_snapshot(documents(cluster)), parse_conf(cluster["conf"], registry()))
    tasks = sorted(ssn.tasks.values(), key=lambda t: t.uid)
    # Refresh changed rows over Python floats (the default) or in one numpy pass.
    ssn.placement.scalar_refresh_max = data.draw(st.sampled_from([24, 0]))
    _check(ssn)
    for _ in range(data.draw(st.integers(0, 12))):
        task = data.draw(st.sampled_from(tasks))
        if task.status is TaskStatus.PENDING:
            node = data.draw(st.sampled_from(ssn.nodes))
            status = data.draw(st.sampled_from([TaskStatus.ALLOCATED, TaskStatus.PIPELINED]))
            ssn._place(task, node, status)
        elif task.status is TaskStatus.ALLOCATED and data.draw(st.booleans()):
            ssn._set_status(task, TaskStatus.RUNNING)
            ssn._release(task)  # evicted: its room is released, not yet free
        elif task.status in (TaskStatus.ALLOCATED, TaskStatus.PIPELINED):
            ssn._unplace(task)
        _check(ssn)


def test_fit_error_of_gangs_that_fit_nowhere_asks_no_node_that_no_predicate_refuses(monkeypatch: Any) -> None:
    """Thousands of gangs that fit nowhere used to cost a walk over every node and every predicate each (30 s of CPU
    for 5,000 gangs on 1,000 nodes): the predicates are asked only about the nodes their masks refuse, and the
    identical members of gangs that found nowhere in an unchanged cluster share one answer."""
    nodes = [{"name": f"n{i}", "alloc": {"cpu": "1"}, "labels": {"zone": "a" if i < 3 else "b"}} for i in range(20)]
    pods = [{"name": f"ns/g{g}-{t}", "group": f"g{g}", "req": {"cpu": "2"}} for g in range(10) for t in range(2)]
    pods += [{"name": "ns/z-0", "group": "z", "req": {"cpu": "2"}, "nodeSelector": {"zone": "a"}}]
    cluster = {"nodes": nodes, "queues": [{"name": "q"}], "pods": pods,
               "podgroups": [{"name": f"ns/g{g}", "queue": "q", "min": 2} for g in range(10)]
               + [{"name": "ns/z", "queue": "q", "min": 1}]}
    conf = {"actions": "allocate", "tiers": [{"plugins": [{"name": "gang"}, {"name": "predicates"}]}]}
    ssn = open_session(build_snapshot(documents(cluster)), parse_conf(conf, registry()))
    asked: list[str] = []
    for pred in ssn.predicates.all():
        explain = pred.explain
        monkeypatch.setattr(pred, "explain", lambda task, node, explain=explain: asked.append(node.name) or
                            explain(task, node))
    errors = {t.uid: ssn.fit_error(t) for t in sorted(ssn.tasks.values(), key=lambda t: t.uid)}
    assert errors["ns-g0-0"].message == "0/20 nodes are unavailable: 20 Insufficient cpu."
    assert errors["ns-z-0"].message == ("0/20 nodes are unavailable: 17 node(s) didn't match Pod's node "
                                        "affinity/selector, 20 Insufficient cpu.")
    assert sorted(asked) == sorted(f"n{i}" for i in range(3, 20)), "only the 17 nodes the selector refuses, once"
