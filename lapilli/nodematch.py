"""Which nodes a pod may go to by its labels and taints, as kube-scheduler's component-helpers decide it.

Counterparts: `k8s.io/component-helpers/scheduling/corev1` (`MatchNodeSelectorTerms`, `ToleratesTaint`,
`FindMatchingUntoleratedTaint`) and `nodeaffinity.GetRequiredNodeAffinity`. Pods and nodes arrive as raw JSON;
`PodPlacement.of` and `taints_of` read them once into typed values (anything of the wrong shape reads as absent:
the API server has validated real objects, and hand-written snapshots must not crash a scheduler), and everything
after that works on the values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

NO_SCHEDULE: Final = "NoSchedule"
NO_EXECUTE: Final = "NoExecute"
PREFER_NO_SCHEDULE: Final = "PreferNoSchedule"


# Defensive readers of raw JSON (shared with lapilli.podterms): the wrong shape reads as absent.
def as_map(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def as_list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def as_text(value: object) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str

    @classmethod
    def of(cls, raw: object) -> Taint:
        taint = as_map(raw)
        return cls(as_text(taint.get("key")), as_text(taint.get("value")), as_text(taint.get("effect")))

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


UNSCHEDULABLE_TAINT: Final = Taint("node.kubernetes.io/unschedulable", "", NO_SCHEDULE)
"""What a cordoned node (`spec.unschedulable`) counts as, for the pods that tolerate it."""


def taints_of(node_spec: Mapping[str, object]) -> tuple[Taint, ...]:
    return tuple(Taint.of(t) for t in as_list(node_spec.get("taints")))


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str  # "Equal" or "Exists"
    value: str
    effect: str  # "" tolerates every effect

    @classmethod
    def of(cls, raw: object) -> Toleration:
        tol = as_map(raw)
        return cls(as_text(tol.get("key")), as_text(tol.get("operator")) or "Equal", as_text(tol.get("value")),
                   as_text(tol.get("effect")))

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        return self.key == taint.key and (self.operator == "Exists" or self.value == taint.value)


def tolerated(tolerations: Sequence[Toleration], taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


@dataclass(frozen=True, slots=True)
class Requirement:
    """One `matchExpressions` or `matchFields` entry."""

    key: str
    operator: str
    values: tuple[str, ...]

    @classmethod
    def of(cls, raw: object) -> Requirement:
        req = as_map(raw)
        values = tuple(as_text(v) for v in as_list(req.get("values")))
        return cls(as_text(req.get("key")), as_text(req.get("operator")), values)

    def matches(self, value: str | None) -> bool:
        op = self.operator
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if op in ("Gt", "Lt") and value is not None and len(self.values) == 1:
            try:
                have, bound = int(value), int(self.values[0])
            except ValueError:
                return False
            return have > bound if op == "Gt" else have < bound
        return False


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    """A `nodeSelectorTerm`: its expressions (on labels) and fields (on `metadata.name`) are ANDed."""

    expressions: tuple[Requirement, ...]
    fields: tuple[Requirement, ...]

    @classmethod
    def of(cls, raw: object) -> SelectorTerm:
        term = as_map(raw)
        return cls(tuple(Requirement.of(e) for e in as_list(term.get("matchExpressions"))),
                   tuple(Requirement.of(f) for f in as_list(term.get("matchFields"))))

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        if not self.expressions and not self.fields:
            return False  # an empty term matches no node
        return all(e.matches(labels.get(e.key)) for e in self.expressions) and all(
            f.matches(node_name if f.key == "metadata.name" else None) for f in self.fields)


def terms_match(terms: Sequence[SelectorTerm], labels: Mapping[str, str], node_name: str) -> bool:
    """Terms are ORed."""
    return any(t.matches(labels, node_name) for t in terms)


# The operators a `metav1.LabelSelector` admits (node selector terms also have Gt and Lt).
SELECTOR_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A `metav1.LabelSelector` (`matchLabels` and `matchExpressions`, ANDed), as `LabelSelectorAsSelector` reads
    it: `of` raises ValueError naming what is wrong (an unknown operator, In/NotIn without values, Exists or
    DoesNotExist with values) and `matches` follows `labels.Selector.Matches`, so an empty selector matches every
    label set (callers that read "empty" as "nothing", as HyperNode members do, ask `empty` first)."""

    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[Requirement, ...] = ()

    @classmethod
    def of(cls, raw: object) -> LabelSelector:
        body = as_map(raw)
        if raw is not None and not isinstance(raw, Mapping):
            raise ValueError(f"expected an object, got {type(raw).__name__}")
        labels = tuple(sorted((str(k), as_text(v)) for k, v in as_map(body.get("matchLabels")).items()))
        expressions = tuple(Requirement.of(e) for e in as_list(body.get("matchExpressions")))
        for i, req in enumerate(expressions):
            where = f"matchExpressions[{i}]"
            if req.operator not in SELECTOR_OPERATORS:
                raise ValueError(f"{where}.operator: {req.operator!r} is not a valid label selector operator")
            if req.operator in ("In", "NotIn") and not req.values:
                raise ValueError(f"{where}.values: must be non-empty for the {req.operator} operator")
            if req.operator in ("Exists", "DoesNotExist") and req.values:
                raise ValueError(f"{where}.values: must be empty for the {req.operator} operator")
        return cls(labels, expressions)

    def empty(self) -> bool:
        return not self.match_labels and not self.expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            e.matches(labels.get(e.key)) for e in self.expressions)


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    weight: int
    term: SelectorTerm


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """What of a pod spec decides its nodes by label and taint."""

    node_selector: Mapping[str, str]
    required: tuple[SelectorTerm, ...] | None  # None: no required node affinity (every node passes)
    preferred: tuple[PreferredTerm, ...]
    tolerations: tuple[Toleration, ...]

    @classmethod
    def of(cls, spec: Mapping[str, object]) -> PodPlacement:
        node_affinity = as_map(as_map(spec.get("affinity")).get("nodeAffinity"))
        required_raw = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        required = (None if required_raw is None else
                    tuple(SelectorTerm.of(t) for t in as_list(as_map(required_raw).get("nodeSelectorTerms"))))
        preferred = tuple(
            PreferredTerm(_weight(as_map(p).get("weight")), SelectorTerm.of(as_map(p).get("preference")))
            for p in as_list(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"))
        )
        selector = {str(k): as_text(v) for k, v in as_map(spec.get("nodeSelector")).items()}
        return cls(selector, required, preferred, tuple(Toleration.of(t) for t in as_list(spec.get("tolerations"))))

    def matches_node(self, labels: Mapping[str, str], node_name: str) -> bool:
        """The node selector and the required node affinity."""
        if any(labels.get(k) != v for k, v in self.node_selector.items()):
            return False
        return self.required is None or terms_match(self.required, labels, node_name)

    def untolerated(self, taints: Sequence[Taint]) -> list[Taint]:
        """The NoSchedule and NoExecute taints the pod does not tolerate."""
        return [t for t in taints if t.effect in (NO_SCHEDULE, NO_EXECUTE) and not tolerated(self.tolerations, t)]

    def tolerates_unschedulable(self) -> bool:
        return tolerated(self.tolerations, UNSCHEDULABLE_TAINT)

    def preferred_weight(self, labels: Mapping[str, str], node_name: str) -> float:
        """Σ weight of the preferred terms the node matches (NodeAffinity's raw score)."""
        return float(sum(p.weight for p in self.preferred if p.term.matches(labels, node_name)))

    def prefer_no_schedule_count(self, taints: Sequence[Taint]) -> float:
        """PreferNoSchedule taints not tolerated (TaintToleration's raw score); only tolerations with no effect or
        PreferNoSchedule count, as kube-scheduler filters them."""
        tolerations = [t for t in self.tolerations if t.effect in ("", PREFER_NO_SCHEDULE)]
        return float(sum(1 for t in taints if t.effect == PREFER_NO_SCHEDULE and not tolerated(tolerations, t)))


def _weight(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


EVERYWHERE: Final = PodPlacement({}, None, (), ())
"""A pod with no selector, affinity or tolerations."""
