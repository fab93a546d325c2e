"""Admission's HyperNode checks: Volcano's `admit_hypernode_test.go` (TestValidateHyperNode: no members, invalid
regex, valid exact/regex/label members) and the rules its CRD and ValidatingAdmissionPolicy enforce (one selector,
an exactMatch name, labelMatch only on Node members), plus the tree conflicts refused before they are stored."""

from __future__ import annotations

import pytest

from lapilli.topology import member_problems, tree_problems
from tests.unit.lapilli.topology.helpers import H, N, hypernode, record


@pytest.mark.parametrize("doc", [
    hypernode("ok-exact", 1, ("node-1", N, "exact")),
    hypernode("ok-regex", 1, ("^node-[0-9]+$", N, "regex")),
    hypernode("ok-label", 1, ("rack=a", N, "label")),
    hypernode("ok-parent", 2, ("ok-exact", H, "exact")),
])
def test_valid(doc):
    assert member_problems(doc) == []


@pytest.mark.parametrize(("spec", "problem"), [
    ({"tier": 1, "members": []}, "spec.members: member must have at least one member"),
    ({"tier": 1}, "spec.members: member must have at least one member"),
    ({"tier": 1, "members": [{"type": "Node", "selector": {}}]},
     "spec.members[0].selector: member selector must have one of exactMatch, regexMatch, or labelMatch"),
    ({"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "a"},
                                                           "regexMatch": {"pattern": "b"}}}]},
     "spec.members[0].selector: cannot specify more than one selector type (exactMatch, regexMatch, labelMatch); "
     "found exactMatch, regexMatch"),
    ({"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": ""}}}]},
     "spec.members[0].selector.exactMatch.name: member exactMatch name is required"),
    ({"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "-bad"}}}]},
     "spec.members[0].selector.exactMatch.name: '-bad' is not a valid name (alphanumeric characters, '-', '_' or "
     "'.', starting and ending with an alphanumeric character)"),
    ({"tier": 2, "members": [{"type": "HyperNode", "selector": {"labelMatch": {"matchLabels": {"a": "b"}}}}]},
     "spec.members[0].selector.labelMatch: only Node members can be selected by labels; name a HyperNode member "
     "with exactMatch"),
    ({"tier": 1, "members": [{"type": "Switch", "selector": {"exactMatch": {"name": "a"}}}]},
     "spec.members[0].type: must be Node or HyperNode, got 'Switch'"),
])
def test_invalid(spec, problem):
    assert member_problems({"metadata": {"name": "h"}, "spec": spec}) == [problem]


def test_invalid_regex():
    problems = member_problems(hypernode("h", 1, ("a[", N, "regex")))
    assert len(problems) == 1
    assert problems[0].startswith("spec.members[0].selector.regexMatch.pattern: member regexMatch pattern 'a[' is "
                                  "invalid: ")


def test_tree_conflicts_against_the_stored_hypernodes():
    leaf = record(hypernode("leaf-1", 1, ("n1", N, "exact"), ("n2", N, "exact")))
    spine = record(hypernode("spine-1", 2, ("leaf-1", H, "exact")))
    top = record(hypernode("top", 3, ("spine-1", H, "exact")))
    stored = [leaf, spine, top]
    assert tree_problems(record(hypernode("spine-2", 2, ("leaf-1", H, "exact"))), stored) == [
        "member HyperNode leaf-1 is already a member of HyperNode spine-1"]
    # leaf-1 updated to contain top: top > spine-1 > leaf-1 > top
    assert tree_problems(record(hypernode("leaf-1", 1, ("top", H, "exact"))), stored) == [
        "members would form a cycle: leaf-1 contains top contains spine-1 contains leaf-1"]
    assert tree_problems(record(hypernode("loop", 1, ("loop", H, "exact"))), stored) == [
        "HyperNode loop cannot be a member of itself"]
    assert tree_problems(record(hypernode("leaf-2", 1, ("n2", N, "exact"))), stored) == [
        "member node n2 is already in HyperNode leaf-1 of tier 1"]
    # replacing an object by itself, changed within the rules, is fine; another tier may list the same node
    assert tree_problems(record(hypernode("leaf-1", 1, ("n1", N, "exact"))), stored) == []
    assert tree_problems(record(hypernode("rack", 2, ("n2", N, "exact"))), stored) == []
