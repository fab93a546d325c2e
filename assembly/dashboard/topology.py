"""The dashboard's network topology: the HyperNode tree, top down, with the GPUs free in each domain (on the nodes
under it, as the scheduler's session counts them), and what keeps the tree from being used (a cycle, a HyperNode
with two parents) or looks odd (a member that does not exist). Built with the kernel's tree (`lapilli.topology`),
the one the scheduler places gangs by."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from lapilli.meta import Obj, labels_of
from lapilli.topology import CLUSTER_TOP, build_tree, read_hypernode


@dataclass(slots=True)
class DomainRow:
    name: str
    depth: int
    tier: int
    tier_name: str
    nodes: int
    gpus_free: float
    gpus: float


@dataclass(slots=True)
class Topology:
    domains: list[DomainRow] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)  # the tree is not used for scheduling while any remains
    warnings: list[str] = field(default_factory=list)


def topology(hypernodes: Iterable[Obj], nodes: Mapping[str, Obj],
             gpus: Mapping[str, tuple[float, float]]) -> Topology | None:
    """The tree of `hypernodes` over `nodes` (by name), or None when there is none. `gpus`: node -> (used,
    allocatable); a node the session does not have counts nothing."""
    problems: list[str] = []
    records = []
    for doc in hypernodes:
        record, read = read_hypernode(doc)
        problems += read
        if record is not None:
            records.append(record)
    if not records:
        return None
    tree = build_tree(records, [(name, labels_of(node)) for name, node in sorted(nodes.items())])
    out = Topology(conflicts=list(tree.conflicts), warnings=[*tree.warnings, *problems])

    def walk(name: str, depth: int) -> None:
        info = tree.hypernodes[name]
        if not info.virtual:
            used = sum(gpus.get(n, (0.0, 0.0))[0] for n in info.nodes)
            total = sum(gpus.get(n, (0.0, 0.0))[1] for n in info.nodes)
            out.domains.append(DomainRow(name, depth, info.tier, info.tier_name, len(info.nodes), total - used,
                                         total))
        for child in sorted(info.children, key=lambda c: (-tree.hypernodes[c].tier, c)):
            walk(child, depth if info.virtual else depth + 1)

    walk(CLUSTER_TOP, 0)
    return out
