"""HyperNode admission (`validatehypernode.volcano.sh`): Volcano's `admit_hypernode_test.go` TestValidateHyperNode
through the webhook's rule (valid exactMatch, invalid regexMatch, valid labelMatch; the rows its comments say moved
to the CRD and the ValidatingAdmissionPolicy — empty name, empty pattern, two selectors, none, no members — are
checked here too, since the webhook enforces them on every Kubernetes version), plus the tree conflicts refused
against the HyperNodes already stored. The wording of each problem is the kernel's (tests/unit/lapilli/topology);
these rows pin the denial: one line, every problem, nothing for a valid object."""

import pytest

from tests.service.reviews import hypernode, review
from webhook.context import AdmissionContext
from webhook.hypernodes import NOT_SYNCED, validate_hypernode
from webhook.listers import MemoryHyperNodes
from webhook.review import AdmissionReview

N, H = "Node", "HyperNode"
STORED = [
    hypernode("leaf-0", 1, (N, "node-0"), (N, "node-1")),
    hypernode("leaf-1", 1, (N, "node-2")),
    hypernode("spine-0", 2, (H, "leaf-0")),
]
CTX = AdmissionContext(hypernodes=MemoryHyperNodes(STORED))


class Unsynced(MemoryHyperNodes):
    def synced(self) -> bool:
        return False


def run(obj, operation="CREATE", ctx=CTX):
    return validate_hypernode(AdmissionReview.model_validate(review(obj, operation)).request, ctx)


@pytest.mark.parametrize("obj", [
    hypernode("hypernode-1", 1, (N, "node-9")),  # validate valid hypernode (a new tier needs no parent)
    hypernode("hypernode-label", 1, (N, ""), labelMatch={"matchLabels": {"topology-rack": "rack1"}}),
    hypernode("hypernode-regex", 1, (N, ""), regexMatch={"pattern": "^node-[0-9]+$"}),
    hypernode("spine-1", 2, (H, "leaf-1")),  # leaf-1 has no parent yet
])
def test_valid_hypernodes_are_admitted(obj):
    assert run(obj).allowed


@pytest.mark.parametrize(("obj", "message"), [
    (hypernode("hypernode-1", 1, (N, ""), regexMatch={"pattern": "a(b"}),
     "spec.members[0].selector.regexMatch.pattern: member regexMatch pattern 'a(b' is invalid: "),
    (hypernode("h", 1, (N, "node-9"), exactMatch={"name": "node-9"}, regexMatch={"pattern": "x"}),
     "spec.members[0].selector: cannot specify more than one selector type (exactMatch, regexMatch, labelMatch); "
     "found exactMatch, regexMatch"),
    ({**hypernode("h", 1, (N, "x")), "spec": {"tier": 1, "members": [{"type": N, "selector": {}}]}},
     "spec.members[0].selector: member selector must have one of exactMatch, regexMatch, or labelMatch"),
    ({**hypernode("h", 1, (N, "x")), "spec": {"tier": 1}}, "spec.members: member must have at least one member"),
    (hypernode("h", 2, (H, "leaf-1"), labelMatch={"matchLabels": {"rack": "a"}}),
     "spec.members[0].selector.labelMatch: only Node members can be selected by labels"),
    (hypernode("h", 1, (N, ""), labelMatch={"matchExpressions": [{"key": "rack", "operator": "Near"}]}),
     "spec.members[0].selector.labelMatch.matchExpressions[0].operator: 'Near' is not a valid label selector"),
])
def test_a_bad_member_is_denied_in_one_line(obj, message):
    outcome = run(obj)
    assert not outcome.allowed and outcome.code == 400
    assert outcome.message.startswith(message) and "\n" not in outcome.message


def test_every_problem_is_reported():
    obj = hypernode("h", 2, (H, "leaf-1"), (N, "node-7"), labelMatch={"matchLabels": {"rack": "a"}})
    obj["spec"]["members"][1]["selector"] = {"regexMatch": {"pattern": "("}}
    message = run(obj).message
    first, second = message.index("spec.members[0].selector.labelMatch: "), message.index("; spec.members[1]")
    assert first == 0 and message[second:].startswith("; spec.members[1].selector.regexMatch.pattern: ")


@pytest.mark.parametrize(("obj", "operation", "message"), [
    (hypernode("spine-1", 2, (H, "leaf-0")), "CREATE",
     "member HyperNode leaf-0 is already a member of HyperNode spine-0"),
    (hypernode("leaf-0", 1, (H, "spine-0")), "UPDATE",
     "members would form a cycle: leaf-0 contains spine-0 contains leaf-0"),
    (hypernode("leaf-2", 1, (N, "node-1")), "CREATE", "member node node-1 is already in HyperNode leaf-0 of tier 1"),
])
def test_tree_conflicts_with_stored_hypernodes_are_denied(obj, operation, message):
    outcome = run(obj, operation)
    assert not outcome.allowed and outcome.message.startswith(message)


def test_an_update_within_the_rules_is_admitted():
    assert run(hypernode("leaf-0", 1, (N, "node-0"), (N, "node-1"), (N, "node-5")), "UPDATE").allowed
    assert run(hypernode("spine-0", 2, (H, "leaf-0"), (H, "leaf-1")), "UPDATE").allowed


def test_nothing_is_checked_against_a_cache_that_has_not_listed():
    ctx = AdmissionContext(hypernodes=Unsynced(STORED))
    outcome = run(hypernode("spine-1", 2, (H, "leaf-1")), ctx=ctx)
    assert not outcome.allowed and outcome.message == NOT_SYNCED
    assert run(hypernode("h", 1, (N, ""), regexMatch={"pattern": "("}), ctx=ctx).message.startswith("spec.members")


def test_delete_is_admitted():
    outcome = validate_hypernode(AdmissionReview.model_validate(
        review(None, "DELETE", old=hypernode("leaf-0", 1, (N, "node-0")))).request, CTX)
    assert outcome.allowed
