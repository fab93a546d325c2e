"""Where a pod wants to be relative to other pods: its inter-pod (anti-)affinity terms and topology spread
constraints, read once from the pod spec into typed values.

Counterparts: apimachinery's `metav1.LabelSelectorAsSelector` (a nil selector matches nothing, an empty one
everything), kube-scheduler's `framework.AffinityTerm` (no `namespaces` and no `namespaceSelector` means the pod's
own namespace; a nil namespace selector matches no namespace, an empty one every namespace), kube-apiserver's
`matchLabelKeys` / `mismatchLabelKeys` merge (each key the pod has becomes `key In (value)` / `key NotIn (value)` in
the term's selector, as the API server writes it at creation from 1.31) and podtopologyspread's
`filterTopologySpreadConstraints` (`matchLabelKeys` merged the same way; `minDomains` 1, `nodeAffinityPolicy`
Honor and `nodeTaintsPolicy` Ignore when unset). Merging again what the API server already merged adds the same
requirement twice, which changes nothing.

Pods arrive as raw JSON; `PodTerms.of` reads them (anything of the wrong shape reads as absent, as in
`lapilli.nodematch`, whose `LabelSelector` they use; a selector the API server would have refused matches nothing),
and everything after that works on the values. Equal
terms are equal values, so the engine counts the pods one term matches once for every pod that carries it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from lapilli.nodematch import LabelSelector, Requirement, as_list, as_map, as_text

HOSTNAME: Final = "kubernetes.io/hostname"
DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"
HONOR: Final = "Honor"
IGNORE: Final = "Ignore"


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


@dataclass(frozen=True, slots=True)
class PodSelector:
    """A pod label selector as affinity terms and spread constraints hold it: a `nodematch.LabelSelector`, or the
    nil selector (`selector` None), which matches no labels; one the API server would refuse (an unknown operator,
    In without values) reads as nil."""

    selector: LabelSelector | None = None

    @classmethod
    def of(cls, raw: object) -> PodSelector:
        if not isinstance(raw, Mapping):
            return NOTHING
        try:
            return cls(LabelSelector.of(raw))
        except ValueError:
            return NOTHING

    @property
    def empty(self) -> bool:
        """Matches everything (kube's `Selector.Empty()`)."""
        return self.selector is not None and self.selector.empty()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return self.selector is not None and self.selector.matches(labels)

    def with_label_keys(self, labels: Mapping[str, str], match: Sequence[str], mismatch: Sequence[str] = ()
                        ) -> PodSelector:
        """`matchLabelKeys` (`key In (value)`) and `mismatchLabelKeys` (`key NotIn (value)`) for the keys the pod
        has; the nil selector stays nil."""
        if self.selector is None:
            return self
        extra = [Requirement(k, "In", (labels[k],)) for k in match if k in labels]
        extra += [Requirement(k, "NotIn", (labels[k],)) for k in mismatch if k in labels]
        if not extra:
            return self
        return PodSelector(LabelSelector(self.selector.match_labels, self.selector.expressions + tuple(extra)))

    def anchor(self) -> tuple[str, frozenset[str]] | None:
        """A key and the values a matching label set must have for it (a `matchLabels` entry, else the first `In`
        requirement), so that an index can find the selectors a pod may match from its labels; None when nothing
        pins a value."""
        if self.selector is None:
            return None
        if self.selector.match_labels:
            key, value = self.selector.match_labels[0]
            return key, frozenset({value})
        for r in self.selector.expressions:
            if r.operator == "In":
                return r.key, frozenset(r.values)
        return None


NOTHING: Final = PodSelector()


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A `PodAffinityTerm`, its namespaces defaulted and label keys merged for the pod that carries it."""

    selector: PodSelector
    namespaces: frozenset[str]
    namespace_selector: PodSelector  # NOTHING when unset
    topology_key: str

    @classmethod
    def of(cls, raw: object, namespace: str, labels: Mapping[str, str]) -> AffinityTerm:
        term = as_map(raw)
        namespaces = frozenset(as_text(n) for n in as_list(term.get("namespaces")))
        ns_raw = term.get("namespaceSelector")
        if not namespaces and ns_raw is None:
            namespaces = frozenset({namespace})
        selector = PodSelector.of(term.get("labelSelector")).with_label_keys(
            labels, [as_text(k) for k in as_list(term.get("matchLabelKeys"))],
            [as_text(k) for k in as_list(term.get("mismatchLabelKeys"))])
        return cls(selector, namespaces, PodSelector.of(ns_raw), as_text(term.get("topologyKey")))

    def matches(self, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str]) -> bool:
        """A pod in `namespace` (whose labels are `namespace_labels`) with `labels` is one this term selects."""
        in_scope = namespace in self.namespaces or self.namespace_selector.matches(namespace_labels)
        return in_scope and self.selector.matches(labels)


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    weight: int
    term: AffinityTerm


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A `topologySpreadConstraint`, defaults applied and `matchLabelKeys` merged. Pods count for it in the
    namespace of the pod that carries it."""

    max_skew: int
    topology_key: str
    hard: bool  # whenUnsatisfiable: DoNotSchedule (a filter) rather than ScheduleAnyway (a score)
    selector: PodSelector
    min_domains: int = 1
    honor_affinity: bool = True  # nodeAffinityPolicy: Honor
    honor_taints: bool = False  # nodeTaintsPolicy: Honor

    @classmethod
    def of(cls, raw: object, labels: Mapping[str, str]) -> SpreadConstraint | None:
        c = as_map(raw)
        when = as_text(c.get("whenUnsatisfiable"))
        if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            return None
        selector = PodSelector.of(c.get("labelSelector")).with_label_keys(
            labels, [as_text(k) for k in as_list(c.get("matchLabelKeys"))])
        return cls(max(_int(c.get("maxSkew"), 1), 1), as_text(c.get("topologyKey")), when == DO_NOT_SCHEDULE,
                   selector, max(_int(c.get("minDomains"), 1), 1), as_text(c.get("nodeAffinityPolicy")) != IGNORE,
                   as_text(c.get("nodeTaintsPolicy")) == HONOR)


@dataclass(frozen=True, slots=True)
class PodTerms:
    """What of a pod spec decides its place relative to other pods."""

    affinity: tuple[AffinityTerm, ...] = ()  # required
    anti_affinity: tuple[AffinityTerm, ...] = ()  # required
    preferred_affinity: tuple[WeightedTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()

    @classmethod
    def of(cls, spec: Mapping[str, object], namespace: str, labels: Mapping[str, str]) -> PodTerms | None:
        """The pod's terms, None when it has none (the common case: checked without parsing anything)."""
        affinity = as_map(spec.get("affinity"))
        pod_affinity, anti = as_map(affinity.get("podAffinity")), as_map(affinity.get("podAntiAffinity"))
        spread_raw = as_list(spec.get("topologySpreadConstraints"))
        if not pod_affinity and not anti and not spread_raw:
            return None
        raw = json.dumps([pod_affinity, anti, spread_raw], sort_keys=True, default=str)
        # The labels are read only for matchLabelKeys / mismatchLabelKeys: a gang's members share one parse.
        key = f"{namespace}/{raw}" + (json.dumps(labels, sort_keys=True) if "LabelKeys" in raw else "")
        terms = _CACHE.get(key)
        if terms is None:
            if len(_CACHE) >= 4096:
                _CACHE.clear()
            terms = _CACHE[key] = cls._parse(pod_affinity, anti, spread_raw, namespace, labels)
        return terms

    @classmethod
    def _parse(cls, pod_affinity: Mapping[str, object], anti: Mapping[str, object], spread_raw: list[object],
               namespace: str, labels: Mapping[str, str]) -> PodTerms | None:
        def required(section: Mapping[str, object]) -> tuple[AffinityTerm, ...]:
            raw = as_list(section.get("requiredDuringSchedulingIgnoredDuringExecution"))
            return tuple(AffinityTerm.of(t, namespace, labels) for t in raw)

        def preferred(section: Mapping[str, object]) -> tuple[WeightedTerm, ...]:
            raw = as_list(section.get("preferredDuringSchedulingIgnoredDuringExecution"))
            return tuple(WeightedTerm(_int(as_map(w).get("weight"), 0),
                                      AffinityTerm.of(as_map(w).get("podAffinityTerm"), namespace, labels))
                         for w in raw)

        spread = tuple(c for c in (SpreadConstraint.of(r, labels) for r in spread_raw) if c is not None)
        terms = cls(required(pod_affinity), required(anti), preferred(pod_affinity), preferred(anti), spread)
        return terms if terms != EMPTY else None

    @property
    def hard_spread(self) -> tuple[SpreadConstraint, ...]:
        return tuple(c for c in self.spread if c.hard)

    @property
    def soft_spread(self) -> tuple[SpreadConstraint, ...]:
        return tuple(c for c in self.spread if not c.hard)


EMPTY: Final = PodTerms()
# Parsed terms by template (the key holds everything the parse reads).
_CACHE: dict[str, PodTerms | None] = {}


__all__ = ["EMPTY", "HOSTNAME", "NOTHING", "AffinityTerm", "PodSelector", "PodTerms", "SpreadConstraint",
           "WeightedTerm"]
