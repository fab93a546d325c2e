"""The simulated network: the workload's HyperNodes as a tree over its nodes, and how many tiers a gang spans.

A gang's span is the tier of the lowest HyperNode holding all its pods, counted from the tree's lowest tier: 0 when
they share a lowest-tier HyperNode (a leaf switch), 1 when they share only its parent, and so on up to Volcano's
cluster-top root one tier above the highest HyperNode (pods on nodes outside every HyperNode meet only there). It is
what `sim.lapilli.io/tier-penalty` multiplies (workload.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from assembly.sim.workload import Workload
from extender.engine.snapshot import NodeRecord
from lapilli.topology import HyperNodeTree, build_tree, read_hypernode


def workload_tree(work: Workload, nodes: Mapping[str, NodeRecord]) -> HyperNodeTree | None:
    """The tree of the workload's HyperNodes over its nodes, None when it has none."""
    records = [r for r, _ in (read_hypernode(doc) for doc in work.hypernodes) if r is not None]
    if not records:
        return None
    return build_tree(records, [(name, node.labels) for name, node in sorted(nodes.items())])


def spans(tree: HyperNodeTree | None, nodes: Iterable[str]) -> int:
    """Tiers the pods on `nodes` span beyond the lowest (0 without a tree)."""
    if tree is None:
        return 0
    lowest = tree.tiers[0]
    held = ""
    for node in nodes:
        hypernode = tree.hypernode_of_node(node) or tree.root.name
        held = tree.lca(held, hypernode) if held else hypernode
    tier = tree.tier_of(held) if held else None
    return 0 if tier is None else tier - lowest


__all__ = ["spans", "workload_tree"]
