"""Node selector terms and taint tolerations, as kube-scheduler's component-helpers evaluate them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _expression_matches(expr: Mapping[str, Any], value: str | None) -> bool:
    op = expr.get("operator")
    values = [str(v) for v in expr.get("values") or []]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def _term_matches(term: Mapping[str, Any], labels: Mapping[str, str], node_name: str) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term matches no node
    if not all(_expression_matches(e, labels.get(e.get("key", ""))) for e in expressions):
        return False
    return all(
        _expression_matches(f, node_name if f.get("key") == "metadata.name" else None) for f in fields
    )


def node_selector_terms_match(terms: Sequence[Mapping[str, Any]], labels: Mapping[str, str], node_name: str) -> bool:
    """Terms are ORed; expressions inside a term are ANDed."""
    return any(_term_matches(t, labels, node_name) for t in terms)


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    for tol in tolerations:
        effect = tol.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = tol.get("key") or ""
        operator = tol.get("operator") or "Equal"
        if not key:
            if operator == "Exists":
                return True
            continue
        if key != taint.get("key"):
            continue
        if operator == "Exists" or (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False
