"""InterPodAffinity: required pod affinity / anti-affinity as a filter, preferred terms as a score — kube-scheduler's
`pkg/scheduler/framework/plugins/interpodaffinity` (1.29+), which Volcano's predicates and nodeorder plugins call.

Filter, for a pod P and a node N (the first failure names the node, in kube-scheduler's words):
* affinity: N has every term's topology key, and for each term some pod matching *all* of P's terms sits in N's
  domain of that key — unless no such pod is counted anywhere and P matches all its own terms (the first pod of a
  group that attracts itself). "node(s) didn't match pod affinity rules"
* anti-affinity: for no term of P does a pod the term selects sit in N's domain (a node without the key passes).
  "node(s) didn't match pod anti-affinity rules"
* existing pods' anti-affinity (symmetry): no placed pod whose required anti-affinity term selects P sits in N's
  domain of that term's key. "node(s) didn't satisfy existing pods anti-affinity rules"

Score (normalised over the candidate nodes): Σ weight × pods in N's domain for P's preferred affinity terms, minus
the same for its preferred anti-affinity terms, plus, for placed pods whose terms select P, `hardPodAffinityWeight`
(kube-scheduler's default 1; Volcano passes 0) per required affinity term and the weight of each preferred affinity
(minus each preferred anti-affinity) term, in their domain; then `100 × (s − min) / (max − min)` truncated (0 for
every node when all are equal), times the nodeorder plugin's `podaffinity.weight`.

Pods count where they sit in the session (`podindex`): gang siblings planned a moment ago included, so a gang
with "one worker per node" is planned one per node. The pods the terms concern are marked `dynamic` (filter) or
`rescored` (score) when the session opens; every other pod keeps its class's fast path.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from extender.engine.interface import Index, Mask, Scores
from extender.engine.model import Node, Task
from extender.engine.plugins.coded import CodedFilter, Rule
from extender.engine.podindex import AllTerms, Domains, KeyDomains, PodCounts, TermMatch
from lapilli.podterms import AffinityTerm, PodTerms, WeightedTerm

REASON_AFFINITY: Final = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY: Final = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING: Final = "node(s) didn't satisfy existing pods anti-affinity rules"
REASONS: Final = ("", REASON_AFFINITY, REASON_ANTI_AFFINITY, REASON_EXISTING)
HARD_POD_AFFINITY_WEIGHT: Final = 1  # kube-scheduler's InterPodAffinityArgs default
MAX_NODE_SCORE: Final = 100.0
ANTI: Final = "required-anti-affinity"


@dataclass(frozen=True, slots=True)
class _Required:
    affinity: tuple[tuple[KeyDomains, int], ...]  # per term: its key's domains, the counter of pods matching all
    anti: tuple[tuple[KeyDomains, int], ...]  # per term: its key's domains, the counter of pods it selects


def _anti_terms(terms: PodTerms) -> Iterable[Hashable]:
    return terms.anti_affinity


E = TypeVar("E")


class _Carried(Generic[E]):
    """Entries for the terms placed pods carry, by the matcher that selects the pods each term is about: what a pod
    meets in other pods' terms (asked once per pod)."""

    def __init__(self, counts: PodCounts) -> None:
        self.counts = counts
        self._by_matcher: dict[int, list[E]] = {}
        self._selecting: dict[str, tuple[E, ...]] = {}  # uid -> the entries of the terms that select it

    def add(self, matcher: TermMatch, entry: E) -> None:
        self._by_matcher.setdefault(self.counts.select(matcher), []).append(entry)

    def selecting(self, task: Task) -> tuple[E, ...]:
        """The entries of the carried terms that select `task`."""
        found = self._selecting.get(task.uid)
        if found is None:
            selected, by_matcher = self.counts.selected(task), self._by_matcher
            found = self._selecting[task.uid] = tuple(
                e for m in selected if m in by_matcher for e in by_matcher[m]) if selected else ()
        return found


class AffinityFilter(CodedFilter):
    """The filter as a `Predicate` part (only `dynamic_mask` and `explain` constrain anything)."""

    reasons = REASONS
    unresolvable = frozenset({1})  # no eviction brings a pod the affinity needs

    def __init__(self, nodes: Sequence[Node], domains: Domains, counts: PodCounts) -> None:
        super().__init__(counts, len(nodes))
        self.nodes, self.domains = nodes, domains
        self._own: dict[int, _Required] = {}  # id(PodTerms) -> its counters
        self._existing: _Carried[int] = _Carried(counts)  # counters of the carriers of required anti-affinity terms
        counts.carry(ANTI, _anti_terms)

    def register(self, pods: Iterable[Task]) -> None:
        """Count what every pod's required terms need (call before the counts start)."""
        for pod in pods:
            terms = pod.terms
            if terms is None or (not terms.affinity and not terms.anti_affinity) or id(terms) in self._own:
                continue
            together = AllTerms(terms.affinity)
            self._own[id(terms)] = _Required(
                tuple((self.domains.of(t.topology_key), self.counts.register(together, t.topology_key))
                      for t in terms.affinity),
                tuple((self.domains.of(t.topology_key), self.counts.register(TermMatch(t), t.topology_key))
                      for t in terms.anti_affinity))
            for term in terms.anti_affinity:
                if self.counts.carrier(ANTI, term) is None:
                    counter = self.counts.register_carried(ANTI, term, term.topology_key)
                    self._existing.add(TermMatch(term), counter)

    def concerns(self, task: Task) -> bool:
        return (task.terms is not None and id(task.terms) in self._own) or bool(self._existing.selecting(task))

    def rules(self, task: Task) -> list[Rule]:
        rules: list[Rule] = []
        own = self._own.get(id(task.terms)) if task.terms is not None else None
        if own is not None:
            if own.affinity:
                rules.append((1, ~self._affinity_ok(task, own)))
            rules.extend((2, domains.per_node(self.counts.counts(counter)) > 0) for domains, counter in own.anti)
        for counter in self._existing.selecting(task):
            rules.append((3, self.counts.domains_of(counter).per_node(self.counts.counts(counter)) > 0))
        return rules

    def _affinity_ok(self, task: Task, own: _Required) -> Mask:
        labelled = np.ones(len(self.nodes), dtype=bool)
        present = labelled.copy()
        anywhere = False
        for domains, counter in own.affinity:
            counts = self.counts.counts(counter)
            labelled &= domains.has
            present &= domains.per_node(counts) > 0
            anywhere = anywhere or bool(counts.any())
        assert task.terms is not None
        if not anywhere and all(t.matches(task.namespace, task.labels, task.namespace_labels)
                                for t in task.terms.affinity):
            return labelled
        return labelled & present


# ---- score -------------------------------------------------------------------------------------------------------
HARD: Final = "required-affinity"
PREFERRED: Final = "preferred-affinity"
PREFERRED_ANTI: Final = "preferred-anti-affinity"


def _hard_terms(terms: PodTerms) -> Iterable[Hashable]:
    return terms.affinity


def _preferred(terms: PodTerms) -> Iterable[Hashable]:
    return terms.preferred_affinity


def _preferred_anti(terms: PodTerms) -> Iterable[Hashable]:
    return terms.preferred_anti_affinity


class AffinityScorer:
    """The score as a `Scorer` part: it contributes through `normalized` for the tasks it marked rescored."""

    def __init__(self, nodes: Sequence[Node], domains: Domains, counts: PodCounts, weight: float,
                 hard_weight: int = HARD_POD_AFFINITY_WEIGHT) -> None:
        self.nodes, self.domains, self.counts, self.weight = nodes, domains, counts, weight
        self.hard_weight = hard_weight
        self._own: dict[int, tuple[tuple[KeyDomains, int, int], ...]] = {}  # id(terms) -> (domains, counter, ±w)
        self._carried: _Carried[tuple[int, int]] = _Carried(counts)  # (counter of a carried term's carriers, ±w)
        counts.carry(HARD, _hard_terms)
        counts.carry(PREFERRED, _preferred)
        counts.carry(PREFERRED_ANTI, _preferred_anti)

    def register(self, pods: Iterable[Task]) -> None:
        for pod in pods:
            terms = pod.terms
            if terms is None:
                continue
            if id(terms) not in self._own and (terms.preferred_affinity or terms.preferred_anti_affinity):
                self._own[id(terms)] = tuple(
                    (self.domains.of(w.term.topology_key), self.counts.register(TermMatch(w.term),
                                                                                w.term.topology_key), sign * w.weight)
                    for sign, weighted in ((1, terms.preferred_affinity), (-1, terms.preferred_anti_affinity))
                    for w in weighted)
            if self.hard_weight > 0:
                for term in terms.affinity:
                    self._carry(HARD, term, term, self.hard_weight)
            for w in terms.preferred_affinity:
                self._carry(PREFERRED, w, w.term, w.weight)
            for w in terms.preferred_anti_affinity:
                self._carry(PREFERRED_ANTI, w, w.term, -w.weight)

    def _carry(self, kind: str, ident: AffinityTerm | WeightedTerm, term: AffinityTerm, weight: int) -> None:
        if self.counts.carrier(kind, ident) is not None:
            return
        counter = self.counts.register_carried(kind, ident, term.topology_key)
        self._carried.add(TermMatch(term), (counter, weight))

    def concerns(self, task: Task) -> bool:
        return (task.terms is not None and id(task.terms) in self._own) or bool(self._carried.selecting(task))

    def raw(self, task: Task) -> npt.NDArray[np.int64]:
        """kube-scheduler's Score per node, before normalisation."""
        total = np.zeros(len(self.nodes), dtype=np.int64)
        own = self._own.get(id(task.terms), ()) if task.terms is not None else ()
        for domains, counter, weight in own:
            total += weight * domains.per_node(self.counts.counts(counter))
        for counter, weight in self._carried.selecting(task):
            total += weight * self.counts.domains_of(counter).per_node(self.counts.counts(counter))
        return total

    def normalized(self, task: Task, idx: Index) -> Scores | None:
        if not self.weight or not self.concerns(task):
            return None
        scores = self.raw(task)[idx].astype(np.float64)
        if not len(idx) or scores.max() <= scores.min():
            return np.zeros(len(idx))
        low, high = scores.min(), scores.max()
        return self.weight * np.trunc(MAX_NODE_SCORE * ((scores - low) / (high - low)))


__all__ = ["HARD_POD_AFFINITY_WEIGHT", "REASON_AFFINITY", "REASON_ANTI_AFFINITY", "REASON_EXISTING",
           "AffinityFilter", "AffinityScorer"]
