"""HyperNodes as slim records, read from raw JSON once, and their members resolved against nodes.

Counterparts: the `topology.volcano.sh/v1alpha1 HyperNode` type (`hypernode_types.go`: `spec.tier`, `spec.tierName`,
`spec.members[]` of type Node or HyperNode with an `exactMatch`, `regexMatch` or `labelMatch` selector) and
`pkg/util/hypernode/member_selector.go` (`GetMembers`). Reading never raises: what cannot be read is reported as a
readable problem next to the record (`read_hypernode`), so a bad object in a watch stream costs a warning, not a
scheduler. A record without a usable `spec.tier` is not a record at all (the tree cannot place it).

Regular expressions are Python's `re`, searched unanchored as Go's `MatchString` does; the RE2 syntax Volcano
accepts and `re` does not (`\\z`, `\\pL`) reads as an invalid pattern, reported like any other.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from lapilli.meta import Obj, name_of, section
from lapilli.nodematch import LabelSelector


class MemberType(StrEnum):
    NODE = "Node"
    HYPERNODE = "HyperNode"


@dataclass(frozen=True, slots=True)
class Member:
    """One `spec.members[]` entry. Exactly one selector is set on an admitted object; a record read from anywhere
    else may carry more (each then adds its matches, as `GetMembers` does) or none (it matches nothing)."""

    type: str
    exact: str = ""
    regex: str = ""
    label: LabelSelector | None = None
    # The pattern compiled once; None when there is no pattern or it does not compile.
    pattern: re.Pattern[str] | None = None

    def matches_node(self, name: str, labels: Mapping[str, str]) -> bool:
        """Whether node `name` is one of this member's nodes (a HyperNode member never selects a node)."""
        if self.type != MemberType.NODE:
            return False
        if self.exact and self.exact == name:
            return True
        if self.pattern is not None and self.pattern.search(name):
            return True
        return self.label is not None and not self.label.empty() and self.label.matches(labels)

    @property
    def by_name_only(self) -> bool:
        """Resolved from the member's own text, without looking at any node (exactMatch alone)."""
        return not self.regex and self.label is None


@dataclass(frozen=True, slots=True)
class HyperNodeRecord:
    name: str
    tier: int
    tier_name: str
    members: tuple[Member, ...]

    def child_names(self) -> list[str]:
        """The HyperNodes this one claims: exactMatch members of type HyperNode (a HyperNode member is only ever
        named, as Volcano's cache reads it)."""
        return [m.exact for m in self.members if m.type == MemberType.HYPERNODE and m.exact]


def members_of(member: Member, nodes: Iterable[tuple[str, Mapping[str, str]]]) -> set[str]:
    """`GetMembers`: the node names a selector selects among `nodes` (name, labels). An exact name is itself
    whether or not such a node exists; an invalid pattern, an empty label selector and a HyperNode member select no
    node."""
    if member.type != MemberType.NODE:
        return set()
    found = {member.exact} if member.exact else set()
    if member.regex or member.label is not None:
        found.update(name for name, labels in nodes if member.matches_node(name, labels))
    return found



def node_count(record: HyperNodeRecord, nodes: Iterable[tuple[str, Mapping[str, str]]]) -> int:
    """`status.nodeCount` as Volcano's HyperNode controller counts it (`actualNodeCnt`): the names the members'
    selectors select among `nodes`, whatever each member's type. So a HyperNode named by an exactMatch member counts
    once (not its nodes), and a regex or label selector counts matching nodes even on a HyperNode member; a
    count another controller of Volcano's keeps on the same object therefore agrees with this one."""
    nodes = list(nodes)
    found: set[str] = set()
    for member in record.members:
        found |= members_of(replace(member, type=MemberType.NODE), nodes)
    return len(found)

def _member(raw: object, where: str, problems: list[str]) -> Member | None:
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: expected an object")
        return None
    kind = str(raw.get("type") or "")
    if kind not in (MemberType.NODE, MemberType.HYPERNODE):
        problems.append(f"{where}.type: must be Node or HyperNode, got {kind!r}")
    selector = section(raw, "selector")
    exact = str(section(selector, "exactMatch").get("name") or "")
    regex = str(section(selector, "regexMatch").get("pattern") or "")
    pattern = None
    if regex:
        try:
            pattern = re.compile(regex)
        except re.error as exc:
            problems.append(f"{where}.selector.regexMatch.pattern: member regexMatch pattern is invalid: {exc}")
    label = None
    if selector.get("labelMatch") is not None:
        try:
            label = LabelSelector.of(selector.get("labelMatch"))
        except ValueError as exc:
            problems.append(f"{where}.selector.labelMatch.{exc}")
    return Member(kind, exact, regex, label, pattern)


def _tier(spec: Obj) -> int | None:
    tier = spec.get("tier")
    if isinstance(tier, bool) or not isinstance(tier, int | str):
        return None
    try:
        value = int(tier)
    except ValueError:
        return None
    return value if value >= 0 else None


def read_hypernode(doc: Obj) -> tuple[HyperNodeRecord | None, list[str]]:
    """A HyperNode object as a record, with the problems found reading it (each `field: what is wrong`). The record
    is None when the object has no name or no tier ≥ 0: the tree has nowhere to put it."""
    problems: list[str] = []
    name = name_of(doc)
    spec = section(doc, "spec")
    tier = _tier(spec)
    if not name:
        problems.append("metadata.name: missing")
    if tier is None:
        problems.append(f"spec.tier: must be an integer ≥ 0, got {spec.get('tier')!r}")
    raw_members = spec.get("members")
    members: list[Member] = []
    for i, raw in enumerate(raw_members if isinstance(raw_members, list) else []):
        member = _member(raw, f"spec.members[{i}]", problems)
        if member is not None:
            members.append(member)
    if not name or tier is None:
        return None, problems
    return HyperNodeRecord(name, tier, str(spec.get("tierName") or ""), tuple(members)), problems


__all__ = [
    "HyperNodeRecord",
    "Member",
    "MemberType",
    "members_of",
    "node_count",
    "read_hypernode",
]
