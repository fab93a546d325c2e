"""Queue admission: Volcano's `mutate_queue.go` and `validate_queue.go` (HEAD, with hierarchical queues)."""

import copy

import jsonpatch
import pytest

from tests.service.reviews import queue, review
from webhook.context import AdmissionContext, AdmissionSettings
from webhook.listers import MemoryQueues
from webhook.queues import mutate_queue, validate_queue
from webhook.review import AdmissionReview


def run(rule, obj, operation="CREATE", old=None, queues=(), name=None, **settings):
    ctx = AdmissionContext(settings=AdmissionSettings(**settings), queues=MemoryQueues(queues))
    return rule(AdmissionReview.model_validate(review(obj, operation, old, name=name)).request, ctx)


def denial(obj, operation="CREATE", old=None, queues=(), **kw):
    outcome = run(validate_queue, obj, operation, old, queues, **kw)
    assert not outcome.allowed
    return outcome.message


# --- defaulting ---------------------------------------------------------------------------------------------


def test_defaults():
    obj = queue("q", state=None)
    del obj["spec"]["weight"]
    outcome = run(mutate_queue, obj)
    out = jsonpatch.apply_patch(obj, list(outcome.patch))
    assert out["spec"] == {"reclaimable": True, "weight": 1}
    assert outcome.warnings == ()


def test_explicit_values_are_kept_and_zero_weight_warns():
    assert run(mutate_queue, queue("q", reclaimable=False, weight=4)).patch == ()
    outcome = run(mutate_queue, queue("q", reclaimable=True, weight=0))
    assert outcome.patch == ({"op": "add", "path": "/spec/weight", "value": 1},)
    assert outcome.warnings == ("spec.weight 0 replaced by the default 1",)


def test_hierarchy_is_rooted():
    obj = queue("q", reclaimable=True)
    obj["metadata"]["annotations"] = {"volcano.sh/hierarchy": "eng/prod", "volcano.sh/hierarchy-weights": "2/8"}
    out = jsonpatch.apply_patch(obj, list(run(mutate_queue, obj).patch))
    assert out["metadata"]["annotations"] == {
        "volcano.sh/hierarchy": "root/eng/prod",
        "volcano.sh/hierarchy-weights": "1/2/8",
    }


def test_malformed_weight_is_denied():
    outcome = run(mutate_queue, queue("q", weight="heavy"))
    assert (outcome.allowed, outcome.message) == (False, 'spec.weight: expected an integer, got "heavy"')


# --- CREATE / UPDATE ------------------------------------------------------------------------------------------


def test_deserved_above_capability():
    obj = queue("q", capability={"cpu": "4"}, deserved={"cpu": "8"})
    assert denial(obj) == (
        'requestBody.spec.deserved.cpu: Invalid value: "8": deserved[cpu]=8 must be <= capability[cpu]=4'
    )


def test_guarantee_above_deserved_and_missing_from_deserved():
    obj = queue("q", deserved={"cpu": "1"}, guarantee={"resource": {"cpu": "2", "memory": "1Gi"}})
    assert denial(obj) == (
        '[requestBody.spec.deserved.cpu: Invalid value: "1": deserved[cpu]=1 must be >= guarantee[cpu]=2, '
        'requestBody.spec.deserved.memory: Invalid value: "<nil>": deserved[memory] must be >= guarantee[memory]=1Gi]'
    )


def test_guarantee_without_any_deserved_is_refused_as_volcano_does():
    # The overview's ml-training queue (examples/queue-ml-training.yaml): Volcano >= 1.13 refuses it, so do we.
    obj = queue("ml-training", capability={"cpu": "64"}, guarantee={"resource": {"cpu": "16", "memory": "64Gi"}})
    assert denial(obj) == (
        '[requestBody.spec.deserved.cpu: Invalid value: "<nil>": deserved[cpu] must be >= guarantee[cpu]=16, '
        'requestBody.spec.deserved.memory: Invalid value: "<nil>": deserved[memory] must be >= guarantee[memory]=64Gi]'
    )


def test_every_violated_resource_rule_is_reported_in_volcanos_order():
    obj = queue(
        "q",
        capability={"cpu": "2", "memory": "-1"},
        deserved={"cpu": "3000m", "nvidia.com/gpu": "1"},
        guarantee={"resource": {"cpu": "4", "nvidia.com/gpu": "1500m", "memory": "1536Mi"}},
    )
    assert denial(obj) == (
        '[requestBody.spec.capability.memory: Invalid value: "-1": must be greater than or equal to 0, '
        'requestBody.spec.deserved.cpu: Invalid value: "3": deserved[cpu]=3 must be >= guarantee[cpu]=4, '
        'requestBody.spec.guarantee.resource.nvidia.com/gpu: Invalid value: "1500m": must be an integer, '
        'requestBody.spec.deserved.nvidia.com/gpu: Invalid value: "1": deserved[nvidia.com/gpu]=1 must be >= '
        "guarantee[nvidia.com/gpu]=1500m, "
        'requestBody.spec.deserved.memory: Invalid value: "<nil>": deserved[memory] must be >= guarantee[memory]=1536Mi, '
        'requestBody.spec.deserved.cpu: Invalid value: "3": deserved[cpu]=3 must be <= capability[cpu]=2]'
    )


def test_deserved_covering_guarantee_is_admitted():
    obj = queue("ml-training", capability={"cpu": "64"}, deserved={"cpu": "16", "memory": "64Gi"},
                guarantee={"resource": {"cpu": "16", "memory": "65536Mi"}})
    assert run(validate_queue, obj).allowed


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        (
            {"capability": {"cpu": "-1"}},
            'requestBody.spec.capability.cpu: Invalid value: "-1": must be greater than or equal to 0',
        ),
        (
            {"capability": {"nvidia.com/gpu": "1500m"}},
            'requestBody.spec.capability.nvidia.com/gpu: Invalid value: "1500m": must be an integer',
        ),
        (
            {"deserved": {"memory": "lots"}},
            'requestBody.spec.deserved.memory: Invalid value: "lots": quantities must match the regular expression '
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        ),
    ],
)
def test_quantities(resources, message):
    assert denial(queue("q", **resources)) == message


def test_state_must_be_open_or_closed():
    assert denial(queue("q", state="Closing")) == (
        'requestBody.spec.state: Invalid value: "Closing": queue state must be in [Open Closed]'
    )


@pytest.mark.parametrize(
    ("hierarchy", "weights", "message"),
    [
        (
            "root/a/b",
            "1/2",
            'Invalid value: "root/a/b": volcano.sh/hierarchy must have the same length with volcano.sh/hierarchy-weights',
        ),
        (
            "root/a",
            "1/x",
            'Invalid value: "1/x": x in the 1/x is invalid number: strconv.ParseFloat: parsing "x": invalid syntax',
        ),
        ("root/a", "1/0", 'Invalid value: "1/0": 0 in the 1/0 must be larger than 0'),
        (
            "root/sci",
            "1/1",
            'Invalid value: "root/sci": root/sci is not allowed to be in the sub path of root/sci/dev of queue dev',
        ),
    ],
)
def test_hierarchy_annotations(hierarchy, weights, message):
    other = queue("dev")
    other["metadata"]["annotations"] = {"volcano.sh/hierarchy": "root/sci/dev", "volcano.sh/hierarchy-weights": "1/1/1"}
    obj = queue("q")
    obj["metadata"]["annotations"] = {"volcano.sh/hierarchy": hierarchy, "volcano.sh/hierarchy-weights": weights}
    assert denial(obj, queues=[other]) == "requestBody.metadata.annotations: " + message


def test_sibling_prefix_is_not_a_sub_path():
    other = queue("scidev")
    other["metadata"]["annotations"] = {"volcano.sh/hierarchy": "root/scidev", "volcano.sh/hierarchy-weights": "1/1"}
    obj = queue("q")
    obj["metadata"]["annotations"] = {"volcano.sh/hierarchy": "root/sci", "volcano.sh/hierarchy-weights": "1/1"}
    assert run(validate_queue, obj, queues=[other]).allowed


# --- hierarchy -------------------------------------------------------------------------------------------------

TREE = [
    queue("root"),
    queue("default"),
    queue("eng", parent="root", capability={"cpu": "10"}, deserved={"cpu": "8"}, guarantee={"resource": {"cpu": "4"}}),
    queue("eng-a", parent="eng", capability={"cpu": "6"}, deserved={"cpu": "5"}, guarantee={"resource": {"cpu": "2"}}),
    queue("l2", parent="eng-a"),
    queue("l3", parent="l2"),
    queue("l4", parent="l3"),
    queue("busy", status={}),
]
TREE[-1]["status"] = {"state": "Open", "allocated": {"pods": "3", "cpu": "2"}}


def test_valid_child_and_seed_hierarchy():
    assert run(validate_queue, queue("eng-b", parent="eng", deserved={"cpu": "3"}), queues=TREE).allowed
    # Volcano's hierarchical example: no resources at all
    assert run(
        validate_queue, queue("team-a1", parent="dept-a", weight=2), queues=[queue("dept-a", parent="root")]
    ).allowed


def test_parent_rules():
    assert denial(queue("x", parent="x"), queues=TREE) == "queue x cannot use itself as parent"
    assert denial(queue("x", parent="nope"), queues=TREE) == (
        'failed to get parent queue nope of queue x: queue.scheduling.volcano.sh "nope" not found'
    )
    assert denial(queue("x", parent="l4"), queues=TREE) == "queue x exceeds the maximum allowed depth of 5"
    assert run(validate_queue, queue("x", parent="l4"), queues=TREE, max_queue_depth=6).allowed
    assert denial(queue("x", parent="busy"), queues=TREE) == (
        "queue busy cannot be the parent queue of queue x because it has allocated Pods: 3"
    )


def test_capability_within_ancestors():
    assert denial(queue("x", parent="eng-a", capability={"cpu": "20"}), queues=TREE) == (
        "queue x capability[cpu]=20 exceeds its ancestor's capability=6"
    )
    # l2 defines no capability: the nearest ancestor that does (eng-a) bounds l3's children
    assert denial(queue("x", parent="l3", capability={"cpu": "7"}), queues=TREE) == (
        "queue x capability[cpu]=7 exceeds its ancestor's capability=6"
    )


def test_sibling_sums_within_parent():
    assert denial(queue("eng-b", parent="eng", deserved={"cpu": "4"}), queues=TREE) == (
        "parent queue eng validation failed: sum of children's deserved (cpu 9, memory 0) exceeds parent's "
        "deserved limit (cpu 8, memory 0)"
    )
    assert denial(
        queue("eng-b", parent="eng", deserved={"cpu": "3"}, guarantee={"resource": {"cpu": "3"}}), queues=TREE
    ) == (
        "parent queue eng validation failed: sum of children's guarantee (cpu 5, memory 0) exceeds parent's "
        "guarantee limit (cpu 4, memory 0)"
    )


def test_parent_update_must_cover_children():
    old = copy.deepcopy(TREE[2])
    new = copy.deepcopy(old)
    new["spec"].update(capability={"cpu": "5"}, deserved={"cpu": "5"})
    assert denial(new, "UPDATE", old, queues=TREE) == (
        "queue eng capability[cpu]=5 is smaller than its descendants' max capability=6"
    )
    new = copy.deepcopy(old)
    new["spec"]["deserved"] = {"cpu": "4"}
    assert denial(new, "UPDATE", old, queues=TREE) == (
        "queue eng validation failed: sum of children's deserved (cpu 5, memory 0) exceeds parent's deserved "
        "limit (cpu 4, memory 0)"
    )


def test_update_without_resource_or_parent_change_skips_hierarchy():
    old = queue("l2", parent="eng-a")
    new = copy.deepcopy(old)
    new["spec"]["weight"] = 3
    assert run(validate_queue, new, "UPDATE", old, queues=TREE, max_queue_depth=1).allowed


def test_root_protection():
    old = queue("root")
    new = queue("root", capability={"cpu": "100"})
    outcome = run(validate_queue, new, "UPDATE", old, queues=TREE)
    assert (outcome.allowed, outcome.code) == (False, 403)
    assert outcome.message == "root queue's resource attributes (capability, deserved, guarantee) cannot be modified"
    assert run(validate_queue, new, "UPDATE", old, queues=TREE, root_queue_protection=False).allowed


# --- DELETE ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "message", "settings"),
    [
        ("default", "`default` queue can not be deleted", {}),
        ("root", "`root` queue can not be deleted", {}),
        ("eng", "queue eng can not be deleted because it has 1 child queues: eng-a", {}),
        ("busy", "queue busy cannot be deleted because it has allocated Pods: 3", {"queue_allocated_pods_check": True}),
    ],
)
def test_delete(name, message, settings):
    old = queue(name)
    assert denial(None, "DELETE", old, queues=TREE, name=name, **settings) == message


def test_delete_of_a_queue_neither_cached_nor_sent_is_not_found():
    """kube-apiserver 1.15+ always sends the object it deletes; without it, only the cache can tell."""
    body = review(None, "DELETE", queue("nope"), name="nope")
    del body["request"]["oldObject"]
    outcome = validate_queue(AdmissionReview.model_validate(body).request,
                             AdmissionContext(settings=AdmissionSettings(), queues=MemoryQueues(TREE)))
    assert (outcome.allowed, outcome.message) == (False, 'queue.scheduling.volcano.sh "nope" not found')


def test_delete_of_a_queue_the_cache_has_not_seen_yet_reads_the_object_being_deleted():
    """Created a moment before and deleted at once (the cache lags under load): kube-apiserver sends the queue it is
    deleting, so it exists, and its own status answers the allocated-pods check."""
    assert run(validate_queue, None, "DELETE", queue("fresh"), queues=TREE, name="fresh").allowed
    busy = queue("fresh")
    busy["status"]["allocated"] = {"pods": "2"}
    assert denial(None, "DELETE", busy, queues=TREE, name="fresh", queue_allocated_pods_check=True) == (
        "queue fresh cannot be deleted because it has allocated Pods: 2")


def test_delete_leaf():
    assert run(validate_queue, None, "DELETE", queue("busy"), queues=TREE, name="busy").allowed
