"""PodTopologySpread: `DoNotSchedule` constraints as a filter, `ScheduleAnyway` ones as a score — kube-scheduler's
`pkg/scheduler/framework/plugins/podtopologyspread` (1.30+, per-constraint counts), which Volcano's predicates and
nodeorder plugins call.

A constraint counts the pods its selector matches in the namespace of the pod P it belongs to (terminating pods
excluded) over the *eligible* nodes: those with every topology key of P's constraints of that kind, and — per
constraint — matching P's node selector and required node affinity (`nodeAffinityPolicy: Honor`, the default) and
tolerated by P (`nodeTaintsPolicy: Honor`; the default Ignore counts tainted nodes too).

Filter, for a node N, constraint by constraint: N lacks the key — "node(s) didn't match pod topology spread
constraints (missing required label)" (no eviction fixes it); else the pods in N's domain, plus one if P matches
the selector, minus the fewest in any eligible domain (0 while there are fewer eligible domains than
`minDomains`) must not exceed `maxSkew` — "node(s) didn't match pod topology spread constraints".

Score over the candidate nodes: candidates lacking a key are ignored (score 0); for the others, per constraint,
`count × ln(domains + 2) + maxSkew − 1`, where count is the pods in the node's domain over eligible nodes (on the
node itself for `kubernetes.io/hostname`) and domains the number of the constraint's domains among the candidates
(the candidates themselves for hostname); rounded, then `100 × (max + min − s) / max` in integers (100 for every
node when max is 0), times the nodeorder plugin's `podtopologyspread.weight`. Pods without constraints get no
cluster-default constraints here: Lapilli does not watch the Services and workloads kube-scheduler derives them from.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from extender.engine.interface import Index, Mask, Scores
from extender.engine.model import Node, Task
from extender.engine.plugins.coded import CodedFilter, Rule
from extender.engine.podindex import Domains, KeyDomains, PodCounts, SpreadMatch
from lapilli.podterms import HOSTNAME, SpreadConstraint

REASON_SPREAD: Final = "node(s) didn't match pod topology spread constraints"
REASON_MISSING_LABEL: Final = f"{REASON_SPREAD} (missing required label)"
REASONS: Final = ("", REASON_MISSING_LABEL, REASON_SPREAD)
MAX_NODE_SCORE: Final = 100
NO_DOMAIN_MIN: Final = 2**31 - 1  # kube-scheduler's critical path before any domain is seen


@dataclass(frozen=True, slots=True)
class _Constraint:
    spec: SpreadConstraint
    domains: KeyDomains
    counter: int  # pods it counts, per node


@dataclass(frozen=True, slots=True)
class _Eligible:
    nodes: Mask  # the nodes a constraint counts over
    ids: npt.NDArray[np.intp]  # their domains
    present: Mask  # per domain (then False for "no label"): whether one of the nodes is in it
    domains: int  # how many domains have one


class _Constraints:
    """The constraints of one kind (hard or soft) of each pod template, with their counters, and the nodes each
    pod's inclusion policies admit."""

    def __init__(self, nodes: Sequence[Node], domains: Domains, counts: PodCounts, hard: bool) -> None:
        self.nodes, self.domains, self.counts, self.hard = nodes, domains, counts, hard
        self._plans: dict[tuple[int, str], tuple[_Constraint, ...]] = {}  # (id(terms), namespace) -> constraints
        self._policy: dict[tuple[str, bool, bool], Mask] = {}
        self._keyed: dict[int, Mask] = {}
        self._eligible: dict[tuple[int, int, str], _Eligible] = {}

    def register(self, pods: Iterable[Task]) -> None:
        for pod in pods:
            terms = pod.terms
            if terms is None or (id(terms), pod.namespace) in self._plans:
                continue
            specs = terms.hard_spread if self.hard else terms.soft_spread
            if specs:
                self._plans[(id(terms), pod.namespace)] = tuple(
                    _Constraint(c, self.domains.of(c.topology_key),
                                self.counts.register(SpreadMatch(pod.namespace, c.selector), None, terminating=False))
                    for c in specs)

    def of(self, task: Task) -> tuple[_Constraint, ...]:
        if task.terms is None:
            return ()
        return self._plans.get((id(task.terms), task.namespace), ())

    def all_keys(self, constraints: tuple[_Constraint, ...]) -> Mask:
        """Nodes with every topology key of the constraints (kept per template: read only)."""
        mask = self._keyed.get(id(constraints))
        if mask is None:
            mask = np.ones(len(self.nodes), dtype=bool)
            for c in constraints:
                mask &= c.domains.has
            self._keyed[id(constraints)] = mask
        return mask

    def policy(self, task: Task, spec: SpreadConstraint) -> Mask:
        """Nodes the constraint's inclusion policies admit for the task (its node affinity, its tolerations)."""
        if not spec.honor_affinity and not spec.honor_taints:
            return np.ones(len(self.nodes), dtype=bool)
        key = (task.predicate_key, spec.honor_affinity, spec.honor_taints)
        mask = self._policy.get(key)
        if mask is None:
            placement = task.placement
            mask = self._policy[key] = np.fromiter(
                ((not spec.honor_affinity or placement.matches_node(n.labels, n.name))
                 and (not spec.honor_taints or not placement.untolerated(n.taints)) for n in self.nodes),
                dtype=bool, count=len(self.nodes))
        return mask

    def eligible(self, task: Task, constraints: tuple[_Constraint, ...], c: _Constraint) -> _Eligible:
        """The nodes the constraint counts over for the task (every key of `constraints`, its policies), kept per
        template: what is placed changes the counts, not the nodes."""
        key = (id(constraints), id(c), task.predicate_key)
        found = self._eligible.get(key)
        if found is None:
            nodes = self.all_keys(constraints) & self.policy(task, c.spec)
            ids = c.domains.ids[nodes]
            present = np.bincount(ids, minlength=c.domains.count + 1) > 0
            present[c.domains.count] = False
            found = self._eligible[key] = _Eligible(nodes, ids, present, int(present.sum()))
        return found

    def domain_counts(self, c: _Constraint, eligible: _Eligible) -> npt.NDArray[np.int64]:
        """Per domain (then 0 for "no label"): the pods the constraint counts over its eligible nodes."""
        counts = np.bincount(eligible.ids, weights=self.counts.counts(c.counter)[eligible.nodes],
                             minlength=c.domains.count + 1).astype(np.int64)
        counts[c.domains.count] = 0
        return counts


class SpreadFilter(CodedFilter):
    """The DoNotSchedule constraints as a `Predicate` part."""

    reasons = REASONS
    unresolvable = frozenset({1})  # no eviction gives the node the key

    def __init__(self, nodes: Sequence[Node], domains: Domains, counts: PodCounts) -> None:
        super().__init__(counts, len(nodes))
        self.constraints = _Constraints(nodes, domains, counts, hard=True)

    def register(self, pods: Iterable[Task]) -> None:
        self.constraints.register(pods)

    def concerns(self, task: Task) -> bool:
        return bool(self.constraints.of(task))

    def rules(self, task: Task) -> list[Rule]:
        constraints = self.constraints.of(task)
        rules: list[Rule] = []
        for c in constraints:
            eligible = self.constraints.eligible(task, constraints, c)
            counts = self.constraints.domain_counts(c, eligible)
            least = int(counts[eligible.present].min()) if eligible.domains else NO_DOMAIN_MIN
            if eligible.domains < c.spec.min_domains:
                least = 0
            itself = int(c.spec.selector.matches(task.labels))
            rules.append((1, ~c.domains.has))
            rules.append((2, c.domains.from_domains(counts) + itself - least > c.spec.max_skew))
        return rules


class SpreadScorer:
    """The ScheduleAnyway constraints as a `Scorer` part: it contributes through `normalized` for the tasks it
    marked rescored."""

    def __init__(self, nodes: Sequence[Node], domains: Domains, counts: PodCounts, weight: float) -> None:
        self.constraints = _Constraints(nodes, domains, counts, hard=False)
        self.counts = counts
        self.weight = weight

    def register(self, pods: Iterable[Task]) -> None:
        self.constraints.register(pods)

    def concerns(self, task: Task) -> bool:
        return bool(self.constraints.of(task))

    def raw(self, task: Task, idx: Index) -> tuple[npt.NDArray[np.int64], Mask]:
        """kube-scheduler's Score of the candidates `idx` before normalisation, and which of them are ignored."""
        constraints = self.constraints.of(task)
        keyed = self.constraints.all_keys(constraints)
        ignored = ~keyed[idx]
        kept = np.zeros(len(keyed), dtype=bool)
        kept[idx[~ignored]] = True
        total = np.zeros(len(idx))
        for c in constraints:
            node_counts = self.counts.counts(c.counter)
            if c.spec.topology_key == HOSTNAME:
                size, count = int(kept.sum()), node_counts[idx]
            else:
                size = int(c.domains.present(kept).sum())
                eligible = self.constraints.eligible(task, constraints, c)
                count = c.domains.from_domains(self.constraints.domain_counts(c, eligible))[idx]
            score = count * np.log(size + 2) + (c.spec.max_skew - 1)
            total += np.where(c.domains.has[idx], score, 0.0)
        return np.floor(total + 0.5).astype(np.int64), ignored

    def normalized(self, task: Task, idx: Index) -> Scores | None:
        if not self.weight or not self.concerns(task):
            return None
        raw, ignored = self.raw(task, idx)
        scored = raw[~ignored]
        if not len(scored):
            return np.zeros(len(idx))
        low, high = int(scored.min()), max(int(scored.max()), 0)
        if high == 0:
            result = np.full(len(idx), MAX_NODE_SCORE, dtype=np.int64)
        else:
            result = MAX_NODE_SCORE * (high + low - raw) // high
        return self.weight * np.where(ignored, 0, result).astype(np.float64)


__all__ = ["REASON_MISSING_LABEL", "REASON_SPREAD", "SpreadFilter", "SpreadScorer"]
