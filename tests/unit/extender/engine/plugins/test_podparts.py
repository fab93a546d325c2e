"""The pod-terms parts of the predicates and nodeorder plugins inside a session: which pods they mark dynamic (the
rest keep the per-class fast path), and how their counts follow the Statement's allocate, discard and evict."""

from __future__ import annotations

from typing import Any

from extender.engine.model import Task
from extender.engine.session import Session
from extender.engine.statement import Statement
from lapilli.podterms import HOSTNAME
from tests.unit.extender.engine.builders import opened, run

CONF = {"actions": "allocate", "tiers": [{"plugins": [{"name": "gang"}, {"name": "predicates"}, {"name": "nodeorder"}]}]}
ANTI = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "w"}}, "topologyKey": HOSTNAME}]}}}
SPREAD = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                         "labelSelector": {"matchLabels": {"app": "s"}}}]}


def _scenario(pods: list[dict[str, Any]]) -> dict[str, Any]:
    nodes = [{"name": f"n{i}", "alloc": {"cpu": "8"}, "labels": {HOSTNAME: f"n{i}", "zone": f"z{i % 2}"}}
             for i in range(4)]
    return {"conf": CONF, "nodes": nodes, "queues": [{"name": "default"}],
            "podgroups": [{"name": "ns/w", "min": 1}, {"name": "ns/plain", "min": 1}, {"name": "ns/s", "min": 1}],
            "pods": pods}


def _task(ssn: Session, key: str) -> Task:
    return next(t for t in ssn.tasks.values() if t.key == key)


def _allowed(ssn: Session, task: Task) -> list[str]:
    return [n.name for n in ssn.nodes if ssn.predicate_node(task, n)]


def test_only_pods_the_terms_concern_leave_the_fast_path() -> None:
    ssn = opened(_scenario([
        {"name": "ns/w-0", "group": "w", "req": {"cpu": "1"}, "labels": {"app": "w"}, **ANTI},
        {"name": "ns/plain-0", "group": "plain", "req": {"cpu": "1"}, "labels": {"app": "other"}},
        {"name": "ns/plain-1", "group": "plain", "req": {"cpu": "1"}, "labels": {"app": "w"}},  # an anti term selects it
    ]))
    assert _task(ssn, "ns/w-0").dynamic
    assert not _task(ssn, "ns/plain-0").dynamic
    assert _task(ssn, "ns/plain-1").dynamic


def test_a_session_without_terms_opens_no_parts() -> None:
    ssn = opened(_scenario([{"name": "ns/plain-0", "group": "plain", "req": {"cpu": "1"}}]))
    predicates, nodeorder = ssn.plugin("predicates"), ssn.plugin("nodeorder")
    assert predicates is not None and predicates.filters.parts == []  # type: ignore[attr-defined]
    assert nodeorder is not None and nodeorder.scorer.parts == []  # type: ignore[attr-defined]


def test_counts_follow_allocate_and_discard() -> None:
    ssn = opened(_scenario([
        {"name": f"ns/w-{i}", "group": "w", "req": {"cpu": "1"}, "labels": {"app": "w"}, **ANTI} for i in range(2)]))
    first, second = _task(ssn, "ns/w-0"), _task(ssn, "ns/w-1")
    stmt = Statement(ssn)
    stmt.allocate(first, ssn.node_by_name["n1"])
    assert _allowed(ssn, second) == ["n0", "n2", "n3"]
    stmt.discard()
    assert _allowed(ssn, second) == ["n0", "n1", "n2", "n3"]


def test_an_evicted_pod_still_repels_but_no_longer_counts_for_spread() -> None:
    ssn = opened(_scenario([
        {"name": "ns/w-0", "group": "w", "req": {"cpu": "1"}, "labels": {"app": "w"}, **ANTI, "node": "n0",
         "phase": "Running"},
        {"name": "ns/w-1", "group": "w", "req": {"cpu": "1"}, "labels": {"app": "w"}, **ANTI},
        {"name": "ns/s-0", "group": "s", "req": {"cpu": "1"}, "labels": {"app": "s"}, "node": "n0", "phase": "Running"},
        {"name": "ns/s-1", "group": "s", "req": {"cpu": "1"}, "labels": {"app": "s"}, **SPREAD},
    ]))
    worker, spread = _task(ssn, "ns/w-1"), _task(ssn, "ns/s-1")
    assert _allowed(ssn, worker) == ["n1", "n2", "n3"]
    assert _allowed(ssn, spread) == ["n1", "n3"]  # zone z0 (n0, n2) holds the one matching pod
    stmt = Statement(ssn)
    stmt.evict(_task(ssn, "ns/w-0"))
    stmt.evict(_task(ssn, "ns/s-0"))
    # Terminating, as kube-scheduler sees it until it is gone: still there for anti-affinity, gone for spread.
    assert _allowed(ssn, worker) == ["n1", "n2", "n3"]
    assert _allowed(ssn, spread) == ["n0", "n1", "n2", "n3"]
    stmt.discard()
    assert _allowed(ssn, spread) == ["n1", "n3"]


def test_a_gang_with_one_worker_per_node_is_planned_one_per_node() -> None:
    scenario = _scenario([
        {"name": f"ns/w-{i}", "group": "w", "req": {"cpu": "1"}, "labels": {"app": "w"}, **ANTI} for i in range(4)])
    scenario["podgroups"][0]["min"] = 4
    assert sorted(run(scenario).binds.values()) == ["n0", "n1", "n2", "n3"]
