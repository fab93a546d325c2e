"""Reading HyperNodes and resolving their members: Volcano's `pkg/util/hypernode/member_selector_test.go`
(TestGetMembers) and the GetMembers rows of `hyper_node_info_test.go` (label match by matchLabels and by In, NotIn,
Exists, DoesNotExist expressions), complete. Reading never raises: the rows below it show what it reports."""

from __future__ import annotations

import pytest

from lapilli.nodematch import LabelSelector
from lapilli.topology import Member, members_of, node_count, read_hypernode
from tests.unit.lapilli.topology.helpers import H, N, hypernode, record

NODES = [("worker-1", {"role": "worker"}), ("worker-2", {"role": "worker"}),
         ("control-plane-1", {"role": "control-plane"})]


def member(selector: dict) -> Member:
    return record(hypernode("h", 1, ("x", N, "exact")) | {"spec": {"tier": 1, "members": [
        {"type": "Node", "selector": selector}]}}).members[0]


@pytest.mark.parametrize(("selector", "want"), [
    ({"exactMatch": {"name": "worker-1"}}, {"worker-1"}),
    ({"regexMatch": {"pattern": "^worker-"}}, {"worker-1", "worker-2"}),
    ({"regexMatch": {"pattern": "["}}, set()),
    ({"labelMatch": {"matchLabels": {"role": "worker"}}}, {"worker-1", "worker-2"}),
    ({"labelMatch": {}}, set()),
    ({"labelMatch": {"matchLabels": {"role": "invalid-role"}}}, set()),
    ({"labelMatch": {"matchExpressions": [{"key": "role", "operator": "In", "values": ["worker"]}]}},
     {"worker-1", "worker-2"}),
    ({"labelMatch": {"matchExpressions": [{"key": "role", "operator": "NotIn", "values": ["worker"]}]}},
     {"control-plane-1"}),
    ({"labelMatch": {"matchExpressions": [{"key": "role", "operator": "Exists"}]}},
     {"worker-1", "worker-2", "control-plane-1"}),
    ({"labelMatch": {"matchExpressions": [{"key": "role", "operator": "DoesNotExist"}]}}, set()),
    ({"exactMatch": {"name": "not-a-node"}}, {"not-a-node"}),  # an exact name is itself
])
def test_get_members(selector, want):
    assert members_of(member(selector), NODES) == want


def test_a_hypernode_member_selects_no_node():
    rec = record(hypernode("h", 2, ("worker-1", "HyperNode", "exact")))
    assert members_of(rec.members[0], NODES) == set() and rec.child_names() == ["worker-1"]


def test_reading_reports_instead_of_raising():
    doc = {"metadata": {"name": "h"}, "spec": {"tier": 1, "tierName": "leaf", "members": [
        {"type": "Node", "selector": {"regexMatch": {"pattern": "("}}},
        {"type": "Rack", "selector": {"exactMatch": {"name": "n1"}}},
        "junk",
        {"type": "Node", "selector": {"labelMatch": {"matchExpressions": [{"key": "a", "operator": "Gt"}]}}},
    ]}}
    rec, problems = read_hypernode(doc)
    assert rec is not None and rec.tier_name == "leaf" and len(rec.members) == 3
    assert problems[0].startswith("spec.members[0].selector.regexMatch.pattern: member regexMatch pattern is invalid")
    assert problems[1:] == [
        "spec.members[1].type: must be Node or HyperNode, got 'Rack'",
        "spec.members[2]: expected an object",
        "spec.members[3].selector.labelMatch.matchExpressions[0].operator: 'Gt' is not a valid label selector "
        "operator",
    ]


@pytest.mark.parametrize("tier", [None, -1, "x", True, 1.5])
def test_no_record_without_a_tier(tier):
    rec, problems = read_hypernode({"metadata": {"name": "h"}, "spec": {"tier": tier, "members": []}})
    assert rec is None and problems == [f"spec.tier: must be an integer ≥ 0, got {tier!r}"]


def test_no_record_without_a_name():
    rec, problems = read_hypernode({"spec": {"tier": 1}})
    assert rec is None and problems == ["metadata.name: missing"]


def test_label_selector_reads_as_apimachinery():
    assert LabelSelector.of(None).matches({"a": "b"})  # empty: everything
    with pytest.raises(ValueError, match="must be non-empty for the In operator"):
        LabelSelector.of({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})
    with pytest.raises(ValueError, match="must be empty for the Exists operator"):
        LabelSelector.of({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]})
    with pytest.raises(ValueError, match="expected an object"):
        LabelSelector.of("a=b")
    both = LabelSelector.of({"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "Exists"}]})
    assert both.matches({"a": "1", "b": ""}) and not both.matches({"a": "1"}) and not both.matches({"b": "x"})


# Volcano's `hypernode_handler_test.go` (TestSyncHyperNodeStatus): the counts of its rows; the API writes and the
# error row are the HyperNode controller's (tests/unit/controller/hypernodes).
HANDLER_NODES = [("node1", {"zone": "east"}), ("node2", {}), ("node3", {}), ("node4", {"zone": "west"}),
                 ("master", {})]


@pytest.mark.parametrize(("members", "nodes", "count"), [
    # Normal case: exact names count whether or not the nodes exist
    ([("node1", N, "exact"), ("node2", N, "exact"), ("node3", N, "exact")], [], 3),
    # Exact & Label & Regex Match
    ([("master", N, "exact"), ("zone=east", N, "label"), ("node[1-3]", N, "regex")], HANDLER_NODES, 4),
    # Exact & Nil Label & Regex Match (the regex member is of type HyperNode: Volcano counts its nodes all the same)
    ([("master", N, "exact"), ("node[2-4]", H, "regex")], HANDLER_NODES, 4),
    # a parent counts its named children, not their nodes
    ([("leaf-1", H, "exact"), ("leaf-2", H, "exact")], HANDLER_NODES, 2),
])
def test_node_count_as_volcanos_hypernode_controller_counts(members, nodes, count):
    assert node_count(record(hypernode("h", 1, *members)), nodes) == count


def test_node_count_of_a_nil_label_member_is_nothing():
    doc = hypernode("h", 1, ("master", N, "exact"))
    doc["spec"]["members"].append({"type": "Node", "selector": {}})
    assert node_count(record(doc), HANDLER_NODES) == 1
