"""HyperNode documents for the topology tests, in the shape of Volcano's `api.BuildHyperNode` / `MemberConfig`."""

from __future__ import annotations

from typing import Any

from lapilli.topology import HyperNodeRecord, read_hypernode


def hypernode(name: str, tier: int, *members: tuple[str, str, str], tier_name: str = "",
              labels: dict[str, Any] | None = None) -> dict[str, Any]:
    """`members`: (value, type, selector) with selector exact|regex|label (`value` is then a matchLabels dict's
    `key=value`, or the selector itself when `labels` is given)."""
    entries = []
    for value, kind, selector in members:
        if selector == "exact":
            sel: dict[str, Any] = {"exactMatch": {"name": value}}
        elif selector == "regex":
            sel = {"regexMatch": {"pattern": value}}
        else:
            sel = {"labelMatch": labels if labels is not None else {"matchLabels": dict([value.split("=", 1)])}}
        entries.append({"type": kind, "selector": sel})
    spec: dict[str, Any] = {"tier": tier, "members": entries}
    if tier_name:
        spec["tierName"] = tier_name
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": spec}


def record(doc: dict[str, Any]) -> HyperNodeRecord:
    rec, problems = read_hypernode(doc)
    assert rec is not None, problems
    return rec


def nodes(*names: str, labels: dict[str, dict[str, str]] | None = None) -> list[tuple[str, dict[str, str]]]:
    return [(n, (labels or {}).get(n, {})) for n in names]


N, H = "Node", "HyperNode"
