"""Idle-GPU reclaim's vocabulary: queue policies inherited up the tree, the job opt-out, the condition's meaning."""

from __future__ import annotations

from dataclasses import dataclass, field

from lapilli.idlegpu import (
    IDLE_CONDITION,
    POLICY_ANNOTATION,
    Policy,
    bad_policies,
    opted_out,
    queue_policy,
    reclaimable_by_condition,
)


@dataclass
class Q:
    parent: str = ""
    annotations: dict[str, str] = field(default_factory=dict)


def test_policy_is_inherited_from_the_nearest_ancestor_that_names_one():
    queues = {"root": Q(annotations={POLICY_ANNOTATION: "off"}), "lab-a": Q(annotations={POLICY_ANNOTATION: "Reclaim"}),
              "alice": Q(parent="lab-a"), "bob": Q(parent="lab-a", annotations={POLICY_ANNOTATION: " warn "}),
              "lab-b": Q(annotations={POLICY_ANNOTATION: "sometimes"}), "carol": Q(parent="lab-b")}
    assert queue_policy(queues, "alice", Policy.WARN) == (Policy.RECLAIM, "lab-a")
    assert queue_policy(queues, "bob", Policy.RECLAIM) == (Policy.WARN, "bob")
    # an annotation that names no policy counts as absent: lab-b falls through to root
    assert queue_policy(queues, "carol", Policy.WARN) == (Policy.OFF, "root")
    assert queue_policy({}, "gone", Policy.WARN) == (Policy.WARN, "")
    assert queue_policy({"x": Q(parent="y"), "y": Q(parent="x")}, "x", Policy.WARN) == (Policy.WARN, ""), "a cycle ends"
    assert bad_policies(queues) == {"lab-b": "sometimes"}


def test_opt_out_and_condition():
    assert opted_out({"lapilli.io/idle-gpu-reclaim": "false"}) and opted_out({"lapilli.io/idle-gpu-reclaim": " No"})
    assert not opted_out({}) and not opted_out({"lapilli.io/idle-gpu-reclaim": "true"})
    assert reclaimable_by_condition([("Scheduled", "True", ""), (IDLE_CONDITION, "True", "Reclaimable")])
    assert not reclaimable_by_condition([(IDLE_CONDITION, "True", "ReclaimableDryRun")])
    assert not reclaimable_by_condition([(IDLE_CONDITION, "False", "Reclaimable")])
