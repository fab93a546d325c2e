"""Pod affinity invariants over random clusters (hypothesis): no committed plan breaks a required anti-affinity (the
new pod's own terms or a placed pod's, whoever came first) or a DoNotSchedule spread constraint, and a required
affinity holds once its first pod is placed.

The check is a direct, pod-by-pod reading of kube-scheduler's filters written here, independent of the engine's
vectorised counts: binds are replayed in the order the session made them (allocate commits them in placement order),
each against the pods placed before it.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.engine.conf import parse_conf
from extender.engine.run import registry, run_session
from extender.engine.snapshot import PodRecord, Snapshot, build_snapshot
from lapilli.podterms import HOSTNAME, AffinityTerm
from tests.unit.extender.engine.builders import documents

TIERS = [
    {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
    {"plugins": [{"name": "drf"}, {"name": "predicates"}, {"name": "proportion"}, {"name": "nodeorder"},
                 {"name": "binpack"}]},
]
KINDS = ["plain", "anti-host", "anti-zone", "spread-zone", "spread-host", "affinity-zone"]


def _term(app: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


def _terms(kind: str, app: str, draw: st.DrawFn) -> dict[str, Any]:
    if kind == "anti-host":
        return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term(app, HOSTNAME)]}}}
    if kind == "anti-zone":
        return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term(app, "zone")]}}}
    if kind == "affinity-zone":
        return {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term(app, "zone")]}}}
    if kind.startswith("spread"):
        constraint = {"maxSkew": draw(st.integers(1, 2)), "topologyKey": "zone" if kind == "spread-zone" else HOSTNAME,
                      "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": app}}}
        if draw(st.booleans()):
            constraint["minDomains"] = draw(st.integers(1, 4))
        return {"topologySpreadConstraints": [constraint]}
    return {}


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    nodes = []
    for i in range(draw(st.integers(2, 6))):
        labels = {HOSTNAME: f"n{i}"}
        if draw(st.integers(0, 4)):  # most nodes have a zone
            labels["zone"] = f"z{draw(st.integers(0, 2))}"
        nodes.append({"name": f"n{i}", "alloc": {"cpu": str(draw(st.sampled_from([2, 4, 8]))), "memory": "16Gi"},
                      "labels": labels})
    podgroups, pods = [], []
    apps = [f"a{i}" for i in range(draw(st.integers(1, 3)))]
    for g in range(draw(st.integers(1, 5))):
        size = draw(st.integers(1, 4))
        app = draw(st.sampled_from(apps))
        podgroups.append({"name": f"ns/g{g}", "queue": "q", "min": draw(st.integers(1, size)), "phase": "Inqueue"})
        terms = _terms(draw(st.sampled_from(KINDS)), app, draw)
        running = draw(st.booleans())
        for t in range(size):
            pod: dict[str, Any] = {"name": f"ns/g{g}-t-{t}", "group": f"g{g}", "req": {"cpu": "1"},
                                   "labels": {"app": app}, **terms}
            if running and draw(st.booleans()):
                pod.update(node=draw(st.sampled_from(nodes))["name"], phase="Running")
            pods.append(pod)
    return {"conf": {"actions": draw(st.sampled_from(["enqueue, allocate", "allocate"])), "tiers": TIERS},
            "nodes": nodes, "queues": [{"name": "q"}], "podgroups": podgroups, "pods": pods}


def _selects(term: AffinityTerm, pod: PodRecord) -> bool:
    return term.matches(pod.namespace, pod.labels, {})


def _same_domain(key: str, a: dict[str, str], b: dict[str, str]) -> bool:
    return key in a and key in b and a[key] == b[key]


def _violation(snap: Snapshot, pod: PodRecord, node: str, placed: list[tuple[PodRecord, str]]) -> str | None:
    """Which rule placing `pod` on `node` breaks, given the pods `placed` before it (None: none)."""
    labels = {n: dict(r.labels) for n, r in snap.nodes.items()}
    here = labels[node]
    terms = pod.terms
    for other, where in placed:
        there = labels[where]
        if terms is not None and any(_selects(t, other) and _same_domain(t.topology_key, here, there)
                                     for t in terms.anti_affinity):
            return f"{pod.name}'s anti-affinity selects {other.name} in its domain"
        if other.terms is not None and any(_selects(t, pod) and _same_domain(t.topology_key, here, there)
                                           for t in other.terms.anti_affinity):
            return f"{other.name}'s anti-affinity selects {pod.name} in its domain"
    if terms is not None and terms.affinity:
        if any(t.topology_key not in here for t in terms.affinity):
            return f"{node} lacks a topology key of {pod.name}'s affinity"
        # Domains (key, value) holding a pod that matches all of the terms; with none anywhere, a pod that matches
        # its own terms may start the group.
        counted = {(t.topology_key, labels[w][t.topology_key]) for o, w in placed
                   if all(_selects(t, o) for t in terms.affinity) for t in terms.affinity if t.topology_key in labels[w]}
        first = not counted and all(_selects(t, pod) for t in terms.affinity)
        if not first and any((t.topology_key, here[t.topology_key]) not in counted for t in terms.affinity):
            return f"{pod.name}'s affinity has no matching pod in its domain"
    for c in terms.hard_spread if terms is not None else ():
        domains: dict[str, int] = {}
        for node_labels in labels.values():
            if c.topology_key in node_labels:
                domains.setdefault(node_labels[c.topology_key], 0)
        for other, where in placed:
            value = labels[where].get(c.topology_key)
            if value is not None and other.namespace == pod.namespace and c.selector.matches(other.labels):
                domains[value] += 1
        least = 0 if len(domains) < c.min_domains else min(domains.values())
        if domains.get(here.get(c.topology_key, ""), 0) + 1 - least > c.max_skew:
            return f"{pod.name} on {node} skews {c.topology_key} beyond {c.max_skew}: {domains}"
    return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_no_committed_plan_breaks_required_pod_affinity_or_spread(scenario: dict[str, Any]) -> None:
    snap = build_snapshot(documents(scenario))
    result = run_session(snap, parse_conf(scenario["conf"], registry()))
    placed = [(pod, pod.node_name) for pod in snap.pods.values() if pod.node_name]
    for key, node in result.binds.items():
        pod = snap.pods[key]
        problem = _violation(snap, pod, node, [(p, n) for p, n in placed if n is not None])
        assert problem is None, (problem, result.binds)
        placed.append((pod, node))
