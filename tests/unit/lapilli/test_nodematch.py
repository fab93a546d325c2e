"""Node selection by labels and taints, as kube-scheduler's component-helpers decide it."""

from __future__ import annotations

import pytest

from lapilli.nodematch import PodPlacement, Taint, Toleration, taints_of

GPU_TAINT = Taint("gpu", "yes", "NoSchedule")


@pytest.mark.parametrize(("toleration", "taint", "tolerated"), [
    ({"key": "gpu", "operator": "Exists"}, GPU_TAINT, True),
    ({"key": "gpu", "value": "yes"}, GPU_TAINT, True),
    ({"key": "gpu", "value": "no"}, GPU_TAINT, False),
    ({"operator": "Exists"}, Taint("any", "", "NoExecute"), True),
    ({"value": "yes"}, GPU_TAINT, False),  # no key and not Exists tolerates nothing
    ({"key": "gpu", "operator": "Exists", "effect": "NoExecute"}, GPU_TAINT, False),
])
def test_a_toleration_tolerates_a_taint(toleration, taint, tolerated):
    assert Toleration.of(toleration).tolerates(taint) is tolerated


def test_selector_and_required_affinity_must_both_match():
    spec = {
        "nodeSelector": {"zone": "a"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["4"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]},
        ]}}},
    }
    placement = PodPlacement.of(spec)
    assert placement.matches_node({"zone": "a", "gpus": "8"}, "n1")
    assert placement.matches_node({"zone": "a"}, "n9")  # the second term, ORed
    assert not placement.matches_node({"zone": "b", "gpus": "8"}, "n1")
    assert not placement.matches_node({"zone": "a", "gpus": "2"}, "n1")


def test_required_affinity_without_terms_matches_no_node_and_an_empty_term_none_either():
    assert not PodPlacement.of({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {}}}}).matches_node({}, "n")
    assert not PodPlacement.of({"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}}}).matches_node({}, "n")
    assert PodPlacement.of({}).matches_node({}, "n")


def test_untolerated_counts_only_hard_effects_and_scores_prefer_no_schedule():
    taints = taints_of({"taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"},
                                   {"key": "spot", "effect": "PreferNoSchedule"}]})
    placement = PodPlacement.of({"tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]})
    assert placement.untolerated(taints) == []
    assert PodPlacement.of({}).untolerated(taints) == [GPU_TAINT]
    assert placement.prefer_no_schedule_count(taints) == 1.0
    assert str(GPU_TAINT) == "gpu=yes:NoSchedule"


def test_cordoned_nodes_are_tolerated_only_by_the_unschedulable_toleration():
    assert not PodPlacement.of({}).tolerates_unschedulable()
    assert PodPlacement.of({"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]}
                           ).tolerates_unschedulable()


def test_wrong_shapes_read_as_absent():
    placement = PodPlacement.of({"nodeSelector": "x", "tolerations": "all", "affinity": [1]})
    assert placement.matches_node({}, "n") and placement.tolerations == ()
    assert taints_of({"taints": [7]}) == (Taint("", "", ""),)


def test_preferred_terms_add_their_weights():
    placement = PodPlacement.of({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "preference": {"matchExpressions": [{"key": "ssd", "operator": "Exists"}]}},
        {"weight": 2, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}},
    ]}}})
    assert placement.preferred_weight({"ssd": "1", "zone": "a"}, "n") == 7.0
    assert placement.preferred_weight({"zone": "b"}, "n") == 0.0
