"""The HyperNode tree: parents and children, tiers, the nodes under each HyperNode, ancestors and lowest common
ancestors, with Volcano's virtual cluster-top root above every HyperNode that has no parent.

Counterpart: `pkg/scheduler/api/hyper_node_info.go` (HyperNodesInfo: `realNodesSet`, `hyperNodesSetByTier`,
`HyperNodeTierNameMap`, `GetAncestors`, `GetLCAHyperNode`) together with what a Volcano session adds when it opens
(`addClusterTopHyperNode`: a HyperNode `<cluster-top-hypernode>` one tier above the highest, holding every node;
`GetRealNodesByHyperNode`: only the nodes the session has). Volcano builds its tree incrementally and marks the
whole of it not ready when an update meets a cycle or a HyperNode claimed by a second parent; here the tree is built
in one pass from the records and the nodes, deterministically: a HyperNode claimed twice keeps the claimant lowest
by (tier, name), a cycle is cut at its lowest-named HyperNode, and either makes the tree `ready = False` with the
conflict in `conflicts` (jobs with a network topology then wait, as in Volcano). Other oddities (a member HyperNode
that does not exist, a node under two HyperNodes of one tier, one tierName on two tiers) are `warnings` only.

A tree costs a pass over the records and, for regex or label members, over the nodes: `TreeCache` keeps the last
trees by a fingerprint of what they were built from, so sessions rebuild only when the tree or the node set changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from lapilli.topology.records import HyperNodeRecord, MemberType

CLUSTER_TOP: Final = "<cluster-top-hypernode>"
"""Volcano's `framework.ClusterTopHyperNode`: the virtual root every session adds."""

NodeLabels = tuple[str, Mapping[str, str]]
"""A node as the tree reads it: its name and labels."""


@dataclass(frozen=True, slots=True)
class HyperNodeInfo:
    """One HyperNode of a built tree (`virtual` only for the cluster-top root)."""

    name: str
    tier: int
    tier_name: str
    parent: str  # "" only for the root
    children: tuple[str, ...]
    nodes: frozenset[str]  # the tree's nodes under it, through its children too
    rows: npt.NDArray[np.intp]  # the same nodes as positions in the tree's node order, ascending
    virtual: bool = False


@dataclass(frozen=True, slots=True, eq=False)
class HyperNodeTree:
    hypernodes: Mapping[str, HyperNodeInfo]  # every HyperNode, the root included
    node_names: tuple[str, ...]  # the nodes it was built over, in that order (rows index into it)
    tiers: tuple[int, ...]  # every tier present, ascending; the root's tier is the last
    by_tier: Mapping[int, tuple[str, ...]]  # HyperNode names per tier, sorted
    tier_names: Mapping[str, int]  # `HyperNodeTierNameMap`: tierName -> tier
    lowest: Mapping[str, str]  # node -> its HyperNode of the lowest tier (Volcano's `FindHyperNodeForNode`)
    conflicts: tuple[str, ...]  # what makes the tree unusable for scheduling (cycles, two parents)
    warnings: tuple[str, ...]
    fingerprint: int
    # What users of the tree derive from it once (e.g. the engine's per-tree index arrays), by their own key.
    derived: dict[str, Any] = field(default_factory=dict)

    @property
    def root(self) -> HyperNodeInfo:
        return self.hypernodes[CLUSTER_TOP]

    @property
    def ready(self) -> bool:
        """Volcano's `HyperNodesReadyToSchedule`: no cycle and no HyperNode with two parents."""
        return not self.conflicts

    def real(self) -> list[HyperNodeInfo]:
        """The HyperNodes that exist as objects (the root left out), by name."""
        return [info for name, info in sorted(self.hypernodes.items()) if not info.virtual]

    def tier_of(self, name: str) -> int | None:
        info = self.hypernodes.get(name)
        return None if info is None else info.tier

    def ancestors(self, name: str) -> list[str]:
        """`GetAncestors`: `name` itself, then its parent and theirs up to the root; `[name]` for a name the tree
        does not know."""
        chain = [name]
        info = self.hypernodes.get(name)
        while info is not None and info.parent:
            chain.append(info.parent)
            info = self.hypernodes.get(info.parent)
        return chain

    def lca(self, a: str, b: str) -> str:
        """`GetLCAHyperNode`: the lowest HyperNode both are under (either one when the other is ""; "" when
        they share none, which inside one tree happens only for names it does not know)."""
        if not a:
            return b
        if not b:
            return a
        above_a = set(self.ancestors(a))
        for name in self.ancestors(b):
            if name in above_a:
                return name
        return ""

    def lca_of(self, names: Iterable[str]) -> str:
        """The lowest common ancestor of several HyperNodes ("" for none)."""
        found = ""
        for name in names:
            found = self.lca(found, name) if found else name
        return found

    def leaves(self, name: str) -> list[str]:
        """`GetLeafNodes`: the HyperNodes under `name` (itself included) that have no HyperNode below them."""
        found: list[str] = []
        stack = [name]
        while stack:
            info = self.hypernodes.get(stack.pop())
            if info is None:
                continue
            if not info.children:
                found.append(info.name)
            stack.extend(info.children)
        return sorted(found)

    def hypernode_of_node(self, node: str) -> str:
        """The node's HyperNode of the tree's lowest tier, "" when no HyperNode of that tier holds it."""
        return self.lowest.get(node, "")


def _claims(records: Mapping[str, HyperNodeRecord], warnings: list[str]) -> dict[str, list[str]]:
    """child -> the HyperNodes whose members name it, lowest (tier, name) first."""
    claims: dict[str, list[str]] = {}
    for parent in sorted(records.values(), key=lambda r: (r.tier, r.name)):
        for child in dict.fromkeys(parent.child_names()):
            if child not in records:
                warnings.append(f"HyperNode {parent.name}: member HyperNode {child} does not exist")
                continue
            claims.setdefault(child, []).append(parent.name)
    return claims


def _parents(records: Mapping[str, HyperNodeRecord], conflicts: list[str], warnings: list[str]) -> dict[str, str]:
    parent: dict[str, str] = {}
    for child, claimants in sorted(_claims(records, warnings).items()):
        if len(claimants) > 1:
            others = ", ".join(claimants[1:])
            conflicts.append(f"HyperNode {child} is a member of more than one HyperNode: {claimants[0]} and {others}")
        parent[child] = claimants[0]
    _cut_cycles(parent, conflicts)
    return parent


def _cut_cycles(parent: dict[str, str], conflicts: list[str]) -> None:
    """Follow every parent chain; a chain that comes back to itself is a cycle, reported from its lowest name
    down (`a contains b contains … contains a`) and cut there (the lowest name loses its parent)."""
    done: set[str] = set()
    for start in sorted(parent):
        path: list[str] = []
        seen: dict[str, int] = {}
        name: str | None = start
        while name is not None and name not in done and name not in seen:
            seen[name] = len(path)
            path.append(name)
            name = parent.get(name)
        if name is not None and name in seen:
            cycle = path[seen[name]:]
            low = min(cycle)
            at = cycle.index(low)
            upward = cycle[at:] + cycle[:at]  # low, its parent, … (each contains the one before)
            chain = " contains ".join([*reversed(upward), upward[-1]])
            conflicts.append(f"HyperNodes form a cycle: {chain}")
            del parent[low]
        done.update(path)


def _node_members(
    records: Mapping[str, HyperNodeRecord], nodes: Sequence[NodeLabels], known: Mapping[str, int]
) -> dict[str, set[str]]:
    """Each HyperNode's own Node members (`GetMembers`), kept to the tree's nodes (`GetRealNodesByHyperNode`)."""
    direct: dict[str, set[str]] = {}
    for record in records.values():
        found: set[str] = set()
        for member in record.members:
            if member.type != MemberType.NODE:
                continue
            if member.exact and member.exact in known:
                found.add(member.exact)
            if not member.by_name_only:
                found.update(name for name, labels in nodes if member.matches_node(name, labels))
        direct[record.name] = found
    return direct


def _overlaps(records: Mapping[str, HyperNodeRecord], direct: Mapping[str, set[str]], warnings: list[str]) -> None:
    owner: dict[tuple[int, str], str] = {}
    for record in sorted(records.values(), key=lambda r: r.name):
        for node in sorted(direct[record.name]):
            first = owner.setdefault((record.tier, node), record.name)
            if first != record.name:
                warnings.append(f"node {node} is under both {first} and {record.name} (tier {record.tier})")


def _tier_names(records: Mapping[str, HyperNodeRecord], warnings: list[str]) -> dict[str, int]:
    names: dict[str, int] = {}
    for record in sorted(records.values(), key=lambda r: r.name):
        if not record.tier_name:
            continue
        if record.tier_name in names and names[record.tier_name] != record.tier:
            warnings.append(f"tierName {record.tier_name} names tier {names[record.tier_name]} and tier {record.tier} "
                            f"(HyperNode {record.name}); tier {record.tier} is used")
        names[record.tier_name] = record.tier  # the last by name wins: Volcano's last in map order, made stable
    return names


def build_tree(records: Iterable[HyperNodeRecord], nodes: Sequence[NodeLabels]) -> HyperNodeTree:
    """The tree of `records` over `nodes` (name, labels), with the cluster-top root holding every node."""
    warnings: list[str] = []
    conflicts: list[str] = []
    by_name: dict[str, HyperNodeRecord] = {}
    for record in sorted(records, key=lambda r: r.name):
        if record.name == CLUSTER_TOP:
            warnings.append(f"HyperNode {CLUSTER_TOP} is ignored: the name is the virtual root's")
            continue
        by_name[record.name] = record
    known = {name: row for row, (name, _) in enumerate(nodes)}
    parent = _parents(by_name, conflicts, warnings)
    direct = _node_members(by_name, nodes, known)
    _overlaps(by_name, direct, warnings)
    children: dict[str, list[str]] = {name: [] for name in by_name}
    for child, up in sorted(parent.items()):
        children[up].append(child)
    under: dict[str, frozenset[str]] = {}

    def collect(name: str) -> frozenset[str]:
        # Parents form a forest once cycles are cut, so this ends; iterative depth is bounded by the tier count.
        if name not in under:
            found = set(direct[name])
            for child in children[name]:
                found |= collect(child)
            under[name] = frozenset(found)
        return under[name]

    top_tier = max([1, *(r.tier + 1 for r in by_name.values())])
    infos: dict[str, HyperNodeInfo] = {}
    for name, record in by_name.items():
        members = collect(name)
        rows = np.array(sorted(known[n] for n in members), dtype=np.intp)
        infos[name] = HyperNodeInfo(name, record.tier, record.tier_name, parent.get(name, CLUSTER_TOP),
                                    tuple(children[name]), members, rows)
    roots = tuple(name for name in by_name if name not in parent)
    infos[CLUSTER_TOP] = HyperNodeInfo(CLUSTER_TOP, top_tier, "", "", roots, frozenset(known),
                                       np.arange(len(nodes), dtype=np.intp), virtual=True)
    by_tier: dict[int, list[str]] = {}
    for name in sorted(infos):
        by_tier.setdefault(infos[name].tier, []).append(name)
    tiers = tuple(sorted(by_tier))
    lowest: dict[str, str] = {}
    for name in by_tier[tiers[0]]:  # sorted: a node under two of them goes to the lowest name
        for node in sorted(infos[name].nodes):
            lowest.setdefault(node, name)
    return HyperNodeTree(
        hypernodes=infos, node_names=tuple(name for name, _ in nodes), tiers=tiers,
        by_tier={tier: tuple(names) for tier, names in by_tier.items()}, tier_names=_tier_names(by_name, warnings),
        lowest=lowest, conflicts=tuple(conflicts), warnings=tuple(warnings),
        fingerprint=hash(_key(by_name.values(), nodes)),
    )


def _key(records: Iterable[HyperNodeRecord], nodes: Sequence[NodeLabels]) -> tuple[object, ...]:
    """What a tree depends on: the records, the node names in order and, only when some member selects by label,
    the nodes' labels."""
    ordered = tuple(sorted(records, key=lambda r: r.name))
    names = tuple(name for name, _ in nodes)
    by_label = any(m.label is not None for r in ordered for m in r.members)
    labels = tuple(tuple(sorted(labels.items())) for _, labels in nodes) if by_label else ()
    return ordered, names, labels


class TreeCache:
    """The last few trees by what they were built from: sessions over an unchanged tree and node set share one."""

    def __init__(self, size: int = 4) -> None:
        self._size = size
        self._trees: dict[tuple[object, ...], HyperNodeTree] = {}

    def get(self, records: Iterable[HyperNodeRecord], nodes: Sequence[NodeLabels]) -> HyperNodeTree:
        records = list(records)
        key = _key(records, nodes)
        tree = self._trees.pop(key, None)
        if tree is None:
            tree = build_tree(records, nodes)
            while len(self._trees) >= self._size:
                del self._trees[next(iter(self._trees))]
        self._trees[key] = tree  # most recent last
        return tree


__all__ = ["CLUSTER_TOP", "HyperNodeInfo", "HyperNodeTree", "NodeLabels", "TreeCache", "build_tree"]
