"""The HyperNode tree, ported from Volcano's `pkg/scheduler/api/hyper_node_info_test.go`.

Ported: UpdateHyperNode_Normal, _WithCycle, _MultipleParents (conflicts make the tree not ready, and a corrected
object makes it ready again), GetAncestors, GetLCAHyperNode, GetLeafNodes, NodeRegexOrLabelMatchHyperNode's regex
and label rows, GetMembers' label rows. The update-path tests (_NoSpecChange, _TierOnlyChange,
_MembersChangeTriggersRebuild, _RegexMember_AlwaysRebuilds) are ported as what they protect against here: the tree
is built whole from the records and the nodes, and `TreeCache` hands back the same tree exactly when neither
changed. Left out: GetRegexSelectorLeafHyperNodes (Volcano's incremental cache finds which leaves to re-resolve on a
node event; a whole rebuild needs no such list) and NodeRegexOrLabelMatchHyperNode's exactMatch rows (that function
answers for regex and label members only; here a node listed by name is under its HyperNode like any other).
Different by design: Lapilli's tree always has Volcano's session root, so two HyperNodes with no common real
ancestor meet at `<cluster-top-hypernode>` instead of "" (Volcano's session sees the same once it adds that root).
"""

from __future__ import annotations

import pytest

from lapilli.topology import CLUSTER_TOP, TreeCache, build_tree
from tests.unit.lapilli.topology.helpers import H, N, hypernode, nodes, record


def summary(tree, name):  # Volcano's HyperNodeInfo.String()
    info = tree.hypernodes[name]
    parent = "" if info.parent == CLUSTER_TOP else info.parent
    return f"Name: {name}, Tier: {info.tier}, TierName: {info.tier_name}, Parent: {parent}"


def test_update_normal():
    s0 = hypernode("s0", 1, ("node-0", N, "exact"), ("node-1", N, "exact"))
    s1 = hypernode("s1", 1, ("node-2", N, "exact"), ("node-3", N, "exact"))
    s2 = hypernode("s2", 2, ("s1", H, "exact"), ("s0", H, "exact"))
    tree = build_tree([record(s2), record(s0), record(s1)], nodes("node-0", "node-1", "node-2", "node-3"))
    assert [summary(tree, n) for n in ("s0", "s1", "s2")] == [
        "Name: s0, Tier: 1, TierName: , Parent: s2",
        "Name: s1, Tier: 1, TierName: , Parent: s2",
        "Name: s2, Tier: 2, TierName: , Parent: ",
    ]
    assert {n: set(tree.hypernodes[n].nodes) for n in ("s0", "s1", "s2")} == {
        "s0": {"node-0", "node-1"}, "s1": {"node-2", "node-3"}, "s2": {"node-0", "node-1", "node-2", "node-3"}}
    assert tree.by_tier[1] == ("s0", "s1") and tree.by_tier[2] == ("s2",)
    assert tree.by_tier[3] == (CLUSTER_TOP,) and tree.root.children == ("s2",)
    assert tree.ready and not tree.warnings
    assert tree.hypernodes["s2"].rows.tolist() == [0, 1, 2, 3]


def test_cycle_makes_the_tree_not_ready_until_corrected():
    s0 = hypernode("s0", 1, ("node-0", N, "exact"), ("node-1", N, "exact"))
    s1 = hypernode("s1", 2, ("s0", H, "exact"), ("s3", H, "exact"))
    s11 = hypernode("s1", 2, ("s0", H, "exact"))
    s2 = hypernode("s2", 3, ("s1", H, "exact"))
    s3 = hypernode("s3", 4, ("s2", H, "exact"))
    on = nodes("node-0", "node-1")
    broken = build_tree([record(d) for d in (s2, s0, s1, s3)], on)
    assert not broken.ready
    assert broken.conflicts == ("HyperNodes form a cycle: s3 contains s2 contains s1 contains s3",)
    fixed = build_tree([record(d) for d in (s2, s0, s11, s3)], on)
    assert fixed.ready
    assert [summary(fixed, n) for n in ("s0", "s1", "s2", "s3")] == [
        "Name: s0, Tier: 1, TierName: , Parent: s1",
        "Name: s1, Tier: 2, TierName: , Parent: s2",
        "Name: s2, Tier: 3, TierName: , Parent: s3",
        "Name: s3, Tier: 4, TierName: , Parent: ",
    ]
    assert all(fixed.hypernodes[n].nodes == {"node-0", "node-1"} for n in ("s0", "s1", "s2", "s3"))


def test_multiple_parents_make_the_tree_not_ready_until_corrected():
    s0 = hypernode("s0", 1, ("node-0", N, "exact"), ("node-1", N, "exact"))
    s1 = hypernode("s1", 2, ("s0", H, "exact"))
    s2 = hypernode("s2", 3, ("s0", H, "exact"))
    s22 = hypernode("s2", 3, ("s1", H, "exact"))
    on = nodes("node-0", "node-1")
    broken = build_tree([record(d) for d in (s0, s1, s2)], on)
    assert not broken.ready
    assert broken.conflicts == ("HyperNode s0 is a member of more than one HyperNode: s1 and s2",)
    assert broken.hypernodes["s0"].parent == "s1"  # the claimant lowest by (tier, name) keeps it
    fixed = build_tree([record(d) for d in (s0, s1, s22)], on)
    assert fixed.ready
    assert [summary(fixed, n) for n in ("s0", "s1", "s2")] == [
        "Name: s0, Tier: 1, TierName: , Parent: s1",
        "Name: s1, Tier: 2, TierName: , Parent: s2",
        "Name: s2, Tier: 3, TierName: , Parent: ",
    ]
    assert all(fixed.hypernodes[n].nodes == {"node-0", "node-1"} for n in ("s0", "s1", "s2"))


def test_leaf_hypernodes():
    s0 = hypernode("s0", 1, ("node-0", N, "exact"), ("node-1", N, "exact"))
    s1 = hypernode("s1", 1, ("node-2", N, "exact"), ("node-3", N, "exact"))
    s2 = hypernode("s2", 2, ("s1", H, "exact"), ("s0", H, "exact"))
    s3 = hypernode("s3", 3, ("s2", H, "exact"))
    tree = build_tree([record(d) for d in (s2, s3, s0, s1)], nodes("node-0", "node-1", "node-2", "node-3"))
    assert tree.leaves("s3") == ["s0", "s1"]


@pytest.mark.parametrize(("node", "hypernode_name", "expected"), [
    ("node-5", "s4", True), ("prefix-1", "s1", True), ("node-2", "s1", True), ("not-match-prefix", "s2", False),
    ("node-4", "s3", False), ("node-5", "s5", False), ("node-6", "s6", True),
])
def test_node_regex_or_label_match(node, hypernode_name, expected):
    docs = [
        hypernode("s1", 1, ("^prefix", N, "regex"), ("node-2", N, "regex")),
        hypernode("s2", 1, ("^not-match-prefix", H, "regex"), ("node-3", N, "regex")),
        hypernode("s3", 1, ("node-4", H, "regex")),
        hypernode("s4", 1, ("role=worker", N, "label")),
        hypernode("s5", 1, ("role=invalid-role", N, "label")),
        hypernode("s6", 1, ("", N, "label"),
                  labels={"matchExpressions": [{"key": "role", "operator": "In", "values": ["master"]}]}),
    ]
    on = nodes("node-2", "node-4", "node-5", "node-6", "not-match-prefix", "prefix-1",
               labels={"node-5": {"role": "worker"}, "node-6": {"role": "master"}})
    tree = build_tree([record(d) for d in docs], on)
    assert (node in tree.hypernodes[hypernode_name].nodes) is expected


@pytest.mark.parametrize(("name", "expected"), [
    ("s0", ["s0", "s2", "s3", "s4", CLUSTER_TOP]),
    ("s2", ["s2", "s3", "s4", CLUSTER_TOP]),
    ("s4", ["s4", CLUSTER_TOP]),
])
def test_ancestors(name, expected):
    docs = [
        hypernode("s0", 1, ("node-0", N, "exact"), ("node-1", N, "exact")),
        hypernode("s4", 4, ("s3", H, "exact")),
        hypernode("s1", 1, ("node-0", N, "exact"), ("node-1", N, "exact")),
        hypernode("s2", 2, ("s0", H, "exact"), ("s1", H, "exact")),
        hypernode("s3", 3, ("s2", H, "exact")),
    ]
    tree = build_tree([record(d) for d in docs], nodes("node-0", "node-1"))
    assert tree.ancestors(name) == expected
    # s0 and s1 both list node-0 and node-1 at tier 1: reported, not fatal
    assert tree.ready and tree.warnings == ("node node-0 is under both s0 and s1 (tier 1)",
                                            "node node-1 is under both s0 and s1 (tier 1)")


def lca_tree():
    docs = [
        hypernode("s0", 1, ("node-0", N, "exact"), ("node-1", N, "exact")),
        hypernode("s1", 1, ("node-2", N, "exact"), ("node-3", N, "exact")),
        hypernode("s2", 1, ("node-4", N, "exact"), ("node-5", N, "exact")),
        hypernode("s3", 1, ("node-6", N, "exact"), ("node-7", N, "exact")),
        hypernode("s4", 2, ("s0", H, "exact"), ("s1", H, "exact")),
        hypernode("s5", 2, ("s2", H, "exact"), ("s3", H, "exact")),
        hypernode("s6", 3, ("s4", H, "exact"), ("s5", H, "exact")),
        hypernode("s-orphan", 1, ("node-8", N, "exact"), ("node-9", N, "exact")),
    ]
    return build_tree([record(d) for d in docs], nodes(*(f"node-{i}" for i in range(10))))


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("s0", "s1", "s4"),  # siblings
    ("s0", "s-orphan", CLUSTER_TOP),  # no common real ancestor: Volcano's "" before the session adds its root
    ("s4", "s0", "s4"),  # one is the other's ancestor
    ("node6", "node6", "node6"),  # the same name, even one the tree does not know
    ("", "s3", "s3"),
    ("s2", "", "s2"),
    ("unknown-a", "unknown-b", ""),
])
def test_lca(a, b, expected):
    assert lca_tree().lca(a, b) == expected


def test_lowest_tier_hypernode_of_a_node():
    tree = lca_tree()
    assert tree.hypernode_of_node("node-5") == "s2"
    assert tree.hypernode_of_node("node-8") == "s-orphan"
    assert tree.hypernode_of_node("nowhere") == ""
    assert tree.lca_of(["s0", "s1", "s2"]) == "s6"
    assert tree.tiers == (1, 2, 3, 4) and tree.root.tier == 4


def test_cache_rebuilds_only_on_change():
    cache = TreeCache()
    s0 = hypernode("s0", 1, ("node-0", N, "exact"))
    on = nodes("node-0", "node-1")
    first = cache.get([record(s0)], on)
    relabelled = {**s0, "metadata": {"name": "s0", "labels": {"env": "test"}}}
    assert cache.get([record(relabelled)], on) is first  # metadata only: same tree
    tier2 = hypernode("s0", 2, ("node-0", N, "exact"))
    assert cache.get([record(tier2)], on).hypernodes["s0"].tier == 2  # tier only: rebuilt
    more = hypernode("s0", 1, ("node-0", N, "exact"), ("node-1", N, "exact"))
    assert cache.get([record(more)], on).hypernodes["s0"].nodes == {"node-0", "node-1"}
    regex = hypernode("r", 1, ("node-.*", N, "regex"))
    assert cache.get([record(regex)], on).hypernodes["r"].nodes == {"node-0", "node-1"}
    assert cache.get([record(regex)], nodes("node-0", "node-1", "node-2")).hypernodes["r"].nodes == {
        "node-0", "node-1", "node-2"}  # the same spec over another node set: re-resolved
    labelled = hypernode("l", 1, ("rack=a", N, "label"))
    a = cache.get([record(labelled)], nodes("node-0", labels={"node-0": {"rack": "a"}}))
    b = cache.get([record(labelled)], nodes("node-0", labels={"node-0": {"rack": "b"}}))
    assert a.hypernodes["l"].nodes == {"node-0"} and b.hypernodes["l"].nodes == frozenset()


def test_tier_names_and_missing_members():
    docs = [
        hypernode("leaf", 1, ("n1", N, "exact"), tier_name="rack"),
        hypernode("spine", 2, ("leaf", H, "exact"), ("ghost", H, "exact"), tier_name="spine"),
        hypernode("odd", 3, ("n2", N, "exact"), tier_name="rack"),
    ]
    tree = build_tree([record(d) for d in docs], nodes("n1", "n2"))
    assert tree.tier_names == {"rack": 3, "spine": 2}  # the last by name wins, as a warning says
    assert tree.ready
    assert tree.warnings == ("HyperNode spine: member HyperNode ghost does not exist",
                             "tierName rack names tier 1 and tier 3 (HyperNode odd); tier 3 is used")


def test_no_hypernodes_is_a_root_over_every_node():
    tree = build_tree([], nodes("a", "b"))
    assert tree.tiers == (1,) and tree.root.nodes == {"a", "b"} and tree.hypernode_of_node("a") == CLUSTER_TOP
