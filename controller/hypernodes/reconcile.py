"""Bringing the discovered HyperNodes in step with what the labels describe, as an ordered plan (pure).

Counterpart: `reconcileTopology` in `pkg/controllers/hypernode/hypernode_controller.go`: create what is new, update
what changed, delete the discovered ones no label describes any more, touching only HyperNodes labelled
`volcano.sh/network-topology-source: label`. Unlike Volcano, an unchanged HyperNode is not written (Volcano
rewrites every one, status included, on every pass), and members are dropped before any are added: the admission
webhook refuses a HyperNode claiming a member another still holds, so a node or leaf moving between two domains is
first taken out of the old one (`shrinks`), then put into the new one (`updates`, `creates`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.hypernodes.labels import is_discovered
from lapilli.meta import Obj, labels_of, name_of


@dataclass(frozen=True, slots=True)
class Plan:
    """The writes, in the order to make them."""

    deletes: tuple[Obj, ...] = ()
    shrinks: tuple[tuple[Obj, list[dict[str, Any]]], ...] = ()
    """(current object, the members it keeps): members it loses that another HyperNode gains."""
    updates: tuple[tuple[Obj, Mapping[str, Any]], ...] = ()
    """(current object, the desired object)."""
    creates: tuple[Mapping[str, Any], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.deletes or self.shrinks or self.updates or self.creates)


def _members(obj: Obj) -> list[Any]:
    return list((obj.get("spec") or {}).get("members") or [])


def differs(current: Obj, desired: Mapping[str, Any]) -> bool:
    """Whether `current` needs a write to become `desired`: its spec differs, or a label discovery sets is missing
    or different (labels someone else added are left alone)."""
    spec, want = current.get("spec") or {}, desired["spec"]
    if (spec.get("tier"), spec.get("tierName") or "", _members(current)) != (
            want["tier"], want["tierName"], want["members"]):
        return True
    have = labels_of(current)
    return any(have.get(k) != v for k, v in desired["metadata"]["labels"].items())


def plan(current: Iterable[Obj], desired: Mapping[str, Mapping[str, Any]]) -> Plan:
    """What to write so the discovered HyperNodes among `current` become `desired` (by name)."""
    mine = {name_of(h): h for h in current if is_discovered(h)}
    deletes = tuple(h for name, h in sorted(mine.items()) if name not in desired)
    shrinks, updates, creates = [], [], []
    for name, want in sorted(desired.items()):
        have = mine.get(name)
        if have is None:
            creates.append(want)
            continue
        if not differs(have, want):
            continue
        kept = [m for m in _members(have) if m in want["spec"]["members"]]
        if kept and len(kept) < len(_members(have)):
            shrinks.append((have, kept))
        updates.append((have, want))
    return Plan(deletes, tuple(shrinks), tuple(updates), tuple(creates))
