"""What admission needs to refuse a HyperNode, as readable sentences (the webhook phrases the denial around them).

Counterparts: Volcano's HyperNode webhook (`admit_hypernode.go`: at least one member, the regex compiles), the CRD's
CEL rules and the optional ValidatingAdmissionPolicy (`hypernodes-validating.yaml`: exactly one selector, an
exactMatch name, labelMatch only on Node members), and the two conflicts Volcano's scheduler cache meets only once
the object is stored (`hyper_node_info.go`: a cycle, a HyperNode claimed by a second parent), checked here against
the HyperNodes already there so they are refused up front. A Node listed by name in two HyperNodes of one tier is
refused too: the tier would no longer partition the nodes, and the scheduler's per-tier view picks one of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

from lapilli.meta import Obj, section
from lapilli.topology.records import HyperNodeRecord, MemberType

# Kubernetes' qualified name (the CEL rule's `format.qualifiedName()`), name part only: what exactMatch names are.
_QUALIFIED: Final = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_SELECTORS: Final = ("exactMatch", "regexMatch", "labelMatch")


def member_problems(doc: Obj) -> list[str]:
    """The object's own problems (no other HyperNode needed), each `field: what is wrong`, in member order."""
    spec = section(doc, "spec")
    members = spec.get("members")
    if not isinstance(members, list) or not members:
        return ["spec.members: member must have at least one member"]
    problems: list[str] = []
    for i, raw in enumerate(members):
        where = f"spec.members[{i}]"
        member = raw if isinstance(raw, Mapping) else {}
        kind = member.get("type")
        if kind not in (MemberType.NODE, MemberType.HYPERNODE):
            problems.append(f"{where}.type: must be Node or HyperNode, got {kind!r}")
        selector = section(member, "selector")
        named = [s for s in _SELECTORS if selector.get(s) is not None]
        if not named:
            problems.append(f"{where}.selector: member selector must have one of exactMatch, regexMatch, or labelMatch")
        elif len(named) > 1:
            problems.append(f"{where}.selector: cannot specify more than one selector type "
                            f"(exactMatch, regexMatch, labelMatch); found {', '.join(named)}")
        problems.extend(_selector_problems(where, kind, selector))
    return problems


def _selector_problems(where: str, kind: object, selector: Obj) -> list[str]:
    problems: list[str] = []
    if selector.get("exactMatch") is not None:
        name = str(section(selector, "exactMatch").get("name") or "")
        if not name:
            problems.append(f"{where}.selector.exactMatch.name: member exactMatch name is required")
        elif len(name) > 63 or not _QUALIFIED.match(name):
            problems.append(f"{where}.selector.exactMatch.name: {name!r} is not a valid name (alphanumeric "
                            "characters, '-', '_' or '.', starting and ending with an alphanumeric character)")
    if selector.get("regexMatch") is not None:
        pattern = str(section(selector, "regexMatch").get("pattern") or "")
        if not pattern:
            problems.append(f"{where}.selector.regexMatch.pattern: member regexMatch pattern is required")
        else:
            try:
                re.compile(pattern)
            except re.error as exc:
                problems.append(f"{where}.selector.regexMatch.pattern: member regexMatch pattern {pattern!r} is "
                                f"invalid: {exc}")
    if selector.get("labelMatch") is not None and kind == MemberType.HYPERNODE:
        problems.append(f"{where}.selector.labelMatch: only Node members can be selected by labels; name a "
                        "HyperNode member with exactMatch")
    return problems


def tree_problems(candidate: HyperNodeRecord, others: Iterable[HyperNodeRecord]) -> list[str]:
    """What storing `candidate` (new, or replacing the HyperNode of its name) would break among `others`: a member
    HyperNode that already has a parent, a cycle through it, a Node it names that another HyperNode of its tier
    names too."""
    existing = {r.name: r for r in others if r.name != candidate.name}
    problems: list[str] = []
    for child in dict.fromkeys(candidate.child_names()):
        if child == candidate.name:
            problems.append(f"HyperNode {child} cannot be a member of itself")
            continue
        parents = sorted(r.name for r in existing.values() if child in r.child_names())
        if parents:
            problems.append(f"member HyperNode {child} is already a member of HyperNode {parents[0]}")
    cycle = _cycle_through(candidate, existing)
    if cycle:
        problems.append(f"members would form a cycle: {' contains '.join(cycle)}")
    mine = {m.exact for m in candidate.members if m.type == MemberType.NODE and m.exact}
    for other in sorted(existing.values(), key=lambda r: r.name):
        if other.tier != candidate.tier:
            continue
        shared = sorted(mine & {m.exact for m in other.members if m.type == MemberType.NODE and m.exact})
        if shared:
            problems.append(f"member node {shared[0]} is already in HyperNode {other.name} of tier {other.tier}")
    return problems


def _cycle_through(candidate: HyperNodeRecord, existing: Mapping[str, HyperNodeRecord]) -> list[str]:
    """A chain candidate → … → candidate through member HyperNodes ([] when there is none)."""
    records = {**existing, candidate.name: candidate}
    stack: list[tuple[str, list[str]]] = [(child, [candidate.name, child]) for child in candidate.child_names()
                                          if child != candidate.name]
    seen: set[str] = set()
    while stack:
        name, path = stack.pop()
        if name == candidate.name:
            return path
        if name in seen or name not in records:
            continue
        seen.add(name)
        stack.extend((child, [*path, child]) for child in reversed(records[name].child_names()))
    return []


__all__ = ["member_problems", "tree_problems"]
