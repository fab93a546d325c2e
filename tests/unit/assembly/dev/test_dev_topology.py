"""`lapilli dev up --topology`: the tiers it reads, the node labels that spread the nodes over them, and a discovery
ConfigMap the HyperNode controller reads back as the same tiers."""

import random

import pytest

from assembly.dev.topology import discovery_configmap, node_labels, parse_tiers
from controller.hypernodes.config import CONFIG_KEY, LabelDiscovery, read_config
from controller.hypernodes.labels import discover


def test_tiers_top_down():
    assert parse_tiers("spine=2,leaf=4", 8) == (("spine", 2), ("leaf", 4))
    assert parse_tiers(" volcano.sh/hypercluster=1 , volcano.sh/hypernode=2 ", 2) == (
        ("volcano.sh/hypercluster", 1), ("volcano.sh/hypernode", 2))


@pytest.mark.parametrize(("text", "problem"), [
    ("", "at least one tier"),
    ("spine", "is not LABEL=COUNT"),
    ("spine=two", "is not LABEL=COUNT"),
    ("bad key=2", "is not LABEL=COUNT"),
    ("spine=4,leaf=2", "at least as many domains as the one above"),
    ("leaf=9", "at most one per node"),
    ("spine=0", "at least as many domains"),
    ("leaf=2,leaf=4", "distinct labels"),
    ("kubernetes.io/hostname=8", "distinct labels"),
])
def test_bad_tiers_are_refused_with_the_reason(text, problem):
    with pytest.raises(ValueError, match=problem):
        parse_tiers(text, 8)


def test_nodes_spread_evenly_and_every_domain_holds_some():
    tiers = parse_tiers("spine=2,leaf=4", 8)
    labels = [node_labels(i, 8, tiers) for i in range(8)]
    assert [lab["leaf"] for lab in labels] == ["leaf-0", "leaf-0", "leaf-1", "leaf-1", "leaf-2", "leaf-2", "leaf-3",
                                               "leaf-3"]
    assert [lab["spine"] for lab in labels] == ["spine-0"] * 4 + ["spine-1"] * 4
    uneven = [node_labels(i, 5, parse_tiers("spine=2,leaf=3", 5)) for i in range(5)]
    assert {lab["leaf"] for lab in uneven} == {"leaf-0", "leaf-1", "leaf-2"}
    # a leaf never straddles two spines
    parents = {}
    for lab in uneven:
        assert parents.setdefault(lab["leaf"], lab["spine"]) == lab["spine"]
    prefixed = node_labels(3, 4, parse_tiers("volcano.sh/hypernode=2", 4))
    assert prefixed == {"volcano.sh/hypernode": "hypernode-1"}


def test_the_configmap_reads_back_as_the_tiers_and_makes_the_tree():
    tiers = parse_tiers("spine=2,leaf=4", 8)
    cm = discovery_configmap(tiers, "lapilli-system")
    assert (cm["metadata"]["name"], cm["metadata"]["namespace"]) == ("volcano-controller-configmap", "lapilli-system")
    config, problems = read_config(cm["data"][CONFIG_KEY])
    assert problems == [] and config == LabelDiscovery((("dev", ("leaf", "spine")),))
    nodes = [{"metadata": {"name": f"n{i}", "labels": node_labels(i, 8, tiers)}} for i in range(8)]
    found = discover(config, nodes, [], random.Random(0))
    assert sorted((h["spec"]["tier"], h["spec"]["tierName"], len(h["spec"]["members"])) for h in found.values()) == [
        (1, "leaf", 2)] * 4 + [(2, "spine", 2)] * 2
