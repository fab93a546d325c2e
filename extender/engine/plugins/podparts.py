"""The pod-terms parts of the predicates and nodeorder plugins, opened with a session.

Volcano's predicates plugin runs kube-scheduler's InterPodAffinity and PodTopologySpread filters, its nodeorder
plugin their scores; each plugin here holds the matching parts (`interpodaffinity`, `podtopologyspread`) over one
`podindex.PodCounts` of its own. Opening them registers what every pod's terms count, counts the pods already on
nodes, subscribes the counts to the session's placements, and marks the pending pods the parts concern `dynamic`
(filters) or `rescored` (scores) — everyone else keeps the fast per-class path. A session where no pod has terms
opens nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from extender.engine.interface import EventHandler, Index, Mask, Scores, SessionView
from extender.engine.model import Node, Task, TaskStatus
from extender.engine.plugins.interpodaffinity import AffinityFilter, AffinityScorer
from extender.engine.plugins.podtopologyspread import SpreadFilter, SpreadScorer
from extender.engine.podindex import Domains, PodCounts, session_pods


class Part(Protocol):
    def register(self, pods: Iterable[Task]) -> None: ...

    def concerns(self, task: Task) -> bool: ...


class FilterPart(Part, Protocol):
    def dynamic_mask(self, task: Task, idx: Index) -> Mask | None: ...

    def unresolvable_mask(self, task: Task, idx: Index) -> Mask | None: ...

    def explain(self, task: Task, node: Node) -> list[str]: ...


class ScorerPart(Part, Protocol):
    def normalized(self, task: Task, idx: Index) -> Scores | None: ...


def _open(ssn: SessionView, counts: PodCounts, parts: list[Part], scores: bool) -> bool:
    """Open `parts` over `counts`; the pending pods they concern are marked `rescored` (`scores`) or `dynamic`."""
    if not parts:
        return False
    pods = list(session_pods(ssn.jobs, ssn.nodes))
    for part in parts:
        part.register(pods)
    if not counts:
        return False
    for node in ssn.nodes:
        for task in node.tasks.values():
            counts.add(task, node.name)
    for pod in pods:
        # A pod with no terms of its own that nothing selects concerns no part (the common case, decided once).
        if pod.status is not TaskStatus.PENDING or not counts.matters(pod):
            continue
        for part in parts:
            if part.concerns(pod):
                if scores:
                    pod.rescored = True
                else:
                    pod.dynamic = True
                break
    ssn.add_event_handler(EventHandler(allocate=counts.placed, deallocate=counts.remove))
    return True


def open_filters(ssn: SessionView, affinity: bool, spread: bool) -> list[FilterPart]:
    """The InterPodAffinity and PodTopologySpread filters that apply this session (none when no pod has terms)."""
    if not ssn.pod_terms:
        return []  # what `_open` finds, without a pass over every pod: no part registers a count
    domains = Domains(ssn.nodes)
    counts = PodCounts(ssn.nodes, domains)
    parts: list[FilterPart] = []
    if affinity:
        parts.append(AffinityFilter(ssn.nodes, domains, counts))
    if spread:
        parts.append(SpreadFilter(ssn.nodes, domains, counts))
    return parts if _open(ssn, counts, list(parts), scores=False) else []


def open_scorers(ssn: SessionView, affinity_weight: float, spread_weight: float) -> list[ScorerPart]:
    """The InterPodAffinity and PodTopologySpread scores that apply this session (none when no pod has terms)."""
    if not ssn.pod_terms:
        return []  # as in `open_filters`
    domains = Domains(ssn.nodes)
    counts = PodCounts(ssn.nodes, domains)
    parts: list[ScorerPart] = []
    if affinity_weight:
        parts.append(AffinityScorer(ssn.nodes, domains, counts, affinity_weight))
    if spread_weight:
        parts.append(SpreadScorer(ssn.nodes, domains, counts, spread_weight))
    return parts if _open(ssn, counts, list(parts), scores=True) else []


__all__ = ["FilterPart", "ScorerPart", "open_filters", "open_scorers"]
