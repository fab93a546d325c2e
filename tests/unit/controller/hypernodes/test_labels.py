"""HyperNodes from node labels: Volcano's `discovery/label/label_test.go` TestNewLabelDiscoverer_start, its five
rows complete, checked whole where the Go test only counts the HyperNodes (its expected objects name random
suffixes it cannot predict and tier names it does not compare; here the random source is seeded). Left out: the
informer and channel plumbing the Go test drives, which is the controller's here (test_controller.py)."""

import random

import pytest

from controller.hypernodes.config import LabelDiscovery
from controller.hypernodes.labels import NamingFailed, clean_type, discover

SOURCE = "volcano.sh/network-topology-source"
# getCfg(): three types, each two labels above kubernetes.io/hostname (dropped), listed highest tier first.
CFG = LabelDiscovery((
    ("topologyA2", ("volcano.sh_torA2-1", "volcano.sh/torA2-2")),
    ("topologyA3", ("volcano.sh/torA3-1", "volcano.sh/torA3-2")),
    ("topologyA5", ("volcano.sh/torA5-1", "volcano.sh/torA5-2")),
))
T1, T2 = "volcano.sh_torA2-1", "volcano.sh/torA2-2"


def node(name, labels):
    return {"metadata": {"name": name, "labels": labels}}


def shape(found):
    """Each HyperNode as (tier, tierName, its label value, its members), members resolved to label values for
    HyperNode members so the rows read without the random names."""
    value = {name: next(v for k, v in hn["metadata"]["labels"].items() if k != SOURCE) for name, hn in found.items()}
    out = set()
    for name, hn in found.items():
        spec = hn["spec"]
        names = [m["selector"]["exactMatch"]["name"] for m in spec["members"]]
        assert names == sorted(names), name
        members = tuple(sorted(value.get(m, m) for m in names))
        types = {m["type"] for m in spec["members"]}
        assert types == {"Node" if spec["tier"] == 1 else "HyperNode"}, name
        assert name.startswith(f"hypernode-topologya2-tier{spec['tier']}-") and len(name.rsplit("-", 1)[1]) == 5
        assert hn["metadata"]["labels"] == {SOURCE: "label", spec["tierName"]: value[name]}
        out.add((spec["tier"], spec["tierName"], value[name], members))
    return out


def run(node_list, existing=(), seed=1):
    return discover(CFG, node_list, existing, random.Random(seed))


def test1_two_tiers_of_four_and_two():
    assert shape(run([node(f"node{i}", {T1: f"s{i // 2}", T2: f"s{4 + i // 4}"}) for i in range(8)])) == {
        (1, T1, "s0", ("node0", "node1")), (1, T1, "s1", ("node2", "node3")),
        (1, T1, "s2", ("node4", "node5")), (1, T1, "s3", ("node6", "node7")),
        (2, T2, "s4", ("s0", "s1")), (2, T2, "s5", ("s2", "s3")),
    }


def test2_some_nodes_only_have_tier1_labels():
    found = run([node("node0", {T1: "s0"}), node("node1", {T1: "s0", T2: "s2"}), node("node2", {T1: "s1"}),
                 node("node3", {T1: "s1"})])
    assert shape(found) == {(1, T1, "s0", ("node0", "node1")), (1, T1, "s1", ("node2", "node3")),
                            (2, T2, "s2", ("s0",))}


def test3_some_nodes_only_have_tier2_labels():
    found = run([node(n, {T2: "s2"}) for n in ("node0", "node2", "node3")] + [node("node1", {T1: "s0"})])
    assert shape(found) == {(1, T1, "s0", ("node1",))}


@pytest.mark.parametrize("tier_name", ["", "volcano.sh/torA3-1"])  # test4 and test5: the existing one has none/one
def test4_and_5_a_hypernode_of_another_type_is_not_reused(tier_name):
    existing = {"metadata": {"name": "hypernode-topologya2-tier1-mnsx6",
                             "labels": {SOURCE: "label", "volcano.sh/torA3-1": "s0"}},
                "spec": {"tier": 1, "tierName": tier_name,
                         "members": [{"type": "Node", "selector": {"exactMatch": {"name": "node0"}}}]}}
    found = run([node("node0", {"volcano.sh/torA3-1": "s0"})], [existing])
    (name, hn), = found.items()
    assert name.startswith("hypernode-topologya3-tier1-") and name != existing["metadata"]["name"]
    assert hn["spec"] == {"tier": 1, "tierName": "volcano.sh/torA3-1",
                          "members": [{"type": "Node", "selector": {"exactMatch": {"name": "node0"}}}]}


def test_a_discovered_hypernode_keeps_its_name_and_others_are_never_taken():
    ours = {"metadata": {"name": "hypernode-topologya2-tier1-zzzzz", "labels": {SOURCE: "label", T1: "s0"}}}
    by_hand = {"metadata": {"name": "hypernode-topologya2-tier1-yyyyy", "labels": {T1: "s1"}}}
    found = run([node("n0", {T1: "s0"}), node("n1", {T1: "s1"})], [ours, by_hand])
    names = {hn["metadata"]["labels"][T1]: name for name, hn in found.items()}
    assert names["s0"] == "hypernode-topologya2-tier1-zzzzz"  # reused: labelled by discovery with this value
    assert names["s1"] != "hypernode-topologya2-tier1-yyyyy"  # not labelled by discovery: a new name


def test_one_cluster_state_one_result_whatever_the_order():
    rows = [node(f"n{i}", {T1: f"s{i % 3}", T2: "top"}) for i in range(9)]
    assert run(rows, seed=7) == run(list(reversed(rows)), seed=7)


def test_no_free_name_is_reported():
    class Stuck(random.Random):
        def choice(self, seq):
            return seq[0]

    taken = {"metadata": {"name": "hypernode-topologya2-tier1-bbbbb"}}
    with pytest.raises(NamingFailed, match="hypernode-topologya2-tier1"):
        discover(CFG, [node("n0", {T1: "s0"})], [taken], Stuck())


def test_clean_type_name():
    assert clean_type("GPU_Type A/100.x") == "gpu-type-a-100.x"
