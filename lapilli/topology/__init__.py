"""Volcano's network topology, shared by the faces: HyperNodes read into slim records (`records`), the tree they
form over the nodes with ancestors, lowest common ancestors and the virtual cluster-top root (`tree`, cached per
tree change by `TreeCache`), and the checks admission makes (`validate`). Pure: the engine builds on it."""

from lapilli.topology.records import (
    HyperNodeRecord,
    Member,
    MemberType,
    members_of,
    node_count,
    read_hypernode,
)
from lapilli.topology.tree import CLUSTER_TOP, HyperNodeInfo, HyperNodeTree, NodeLabels, TreeCache, build_tree
from lapilli.topology.validate import member_problems, tree_problems

__all__ = [
    "CLUSTER_TOP",
    "HyperNodeInfo",
    "HyperNodeRecord",
    "HyperNodeTree",
    "Member",
    "MemberType",
    "NodeLabels",
    "TreeCache",
    "build_tree",
    "member_problems",
    "members_of",
    "node_count",
    "read_hypernode",
    "tree_problems",
]
