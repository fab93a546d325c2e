"""PodGroup and Pod admission (Volcano's `podgroups/*` and `pods/*` webhooks, plus job-plugin env for pods)."""

import jsonpatch
import pytest

from tests.service.reviews import job, pod, podgroup, queue, review, task
from webhook.context import AdmissionContext
from webhook.listers import MemoryJobs, MemoryNamespaces, MemoryQueues
from webhook.podgroups import mutate_podgroup, validate_podgroup
from webhook.pods import mutate_pod, validate_pod
from webhook.review import AdmissionReview

CTX = AdmissionContext(
    queues=MemoryQueues([queue("default"), queue("closed", state="Closed"), queue("team")]),
    jobs=MemoryJobs([job("pt", task("master", 1), task("worker", 2), plugins={"env": [], "pytorch": []})]),
    namespaces=MemoryNamespaces(
        [
            {"metadata": {"name": "ns1", "annotations": {"scheduling.volcano.sh/queue-name": "team"}}},
            {"metadata": {"name": "ns2"}},
        ]
    ),
)


def run(rule, obj, operation="CREATE"):
    return rule(AdmissionReview.model_validate(review(obj, operation)).request, CTX)


# --- PodGroups ---------------------------------------------------------------------------------------------------


def test_namespace_annotation_moves_default_podgroups():
    obj = podgroup("pg", "default", namespace="ns1")
    outcome = run(mutate_podgroup, obj)
    assert jsonpatch.apply_patch(obj, list(outcome.patch))["spec"]["queue"] == "team"
    assert outcome.warnings
    assert run(mutate_podgroup, podgroup("pg", "other", namespace="ns1")).patch == ()
    assert run(mutate_podgroup, podgroup("pg", "default", namespace="ns2")).patch == ()


def test_podgroup_queue_must_exist_and_be_open():
    assert run(validate_podgroup, podgroup("pg", "team")).allowed
    closed = run(validate_podgroup, podgroup("pg", "closed"))
    assert (closed.allowed, closed.code) == (False, 403)
    assert closed.message == "can only submit PodGroup to queue with state `Open`, queue `closed` status is `Closed`."
    assert run(validate_podgroup, podgroup("pg", "nope")).message == (
        'unable to find queue: queue.scheduling.volcano.sh "nope" not found'
    )


def test_podgroup_topology_fields_are_exclusive():
    both = {"highestTierAllowed": 1, "highestTierName": "rack"}
    policies = [{"name": "w", "networkTopology": both}, {"name": "v", "networkTopology": both}]
    obj = podgroup("pg", "nope", networkTopology=both, subGroupPolicy=policies)
    outcome = run(validate_podgroup, obj)
    assert (outcome.code, outcome.message) == (
        400,
        'unable to find queue: queue.scheduling.volcano.sh "nope" not found; '
        "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously. "
        "in subGroupPolicy 'w': must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology "
        "simultaneously.",
    )


@pytest.mark.parametrize("allowed", [0, 3])
def test_podgroup_tier_allowed_counts_when_set_even_to_zero(allowed):
    topology = {"mode": "hard", "highestTierAllowed": allowed, "highestTierName": "rack"}
    outcome = run(validate_podgroup, podgroup("pg", "team", networkTopology=topology))
    assert (outcome.allowed, outcome.code) == (False, 400)
    assert outcome.message == (
        "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously."
    )
    for alone in ({"highestTierAllowed": 0}, {"highestTierAllowed": 0, "highestTierName": ""}, {"highestTierName": "r"}):
        assert run(validate_podgroup, podgroup("pg", "team", networkTopology=alone)).allowed


# --- Pods --------------------------------------------------------------------------------------------------------

JOB_POD = {"volcano.sh/job-name": "pt", "volcano.sh/task-spec": "worker", "volcano.sh/task-index": "1"}


def test_pod_of_a_job_gets_plugin_env():
    obj = pod("pt-worker-1", annotations=JOB_POD)
    outcome = run(mutate_pod, obj)
    out = jsonpatch.apply_patch(obj, list(outcome.patch))
    env = {e["name"]: e["value"] for e in out["spec"]["containers"][0]["env"]}
    assert env == {
        "VK_TASK_INDEX": "1",
        "VC_TASK_INDEX": "1",
        "MASTER_ADDR": "pt-master-0.pt",
        "MASTER_PORT": "23456",
        "WORLD_SIZE": "3",
        "RANK": "2",
    }
    # a pod that already has it (rendered by the controller) gets an empty patch
    assert run(mutate_pod, out).patch == ()


@pytest.mark.parametrize(
    "annotations",
    [{}, {**JOB_POD, "volcano.sh/job-name": "unknown"}, {**JOB_POD, "volcano.sh/task-index": "x"}],
)
def test_other_pods_are_left_alone(annotations):
    assert run(mutate_pod, pod(annotations=annotations)).patch == ()


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        (
            {"volcano.sh/jdb-min-available": "0"},
            'invalid value <"0"> for volcano.sh/jdb-min-available, it must be a positive integer',
        ),
        (
            {"volcano.sh/jdb-max-unavailable": "100%"},
            'invalid value <"100%"> for volcano.sh/jdb-max-unavailable, it must be a valid percentage which between 1% ~ 99%',
        ),
        (
            {"volcano.sh/jdb-max-unavailable": "lots"},
            'invalid value strconv.Atoi: parsing "lots": invalid syntax for volcano.sh/jdb-max-unavailable',
        ),
        (
            {"volcano.sh/jdb-min-available": "2", "volcano.sh/jdb-max-unavailable": "10%"},
            "not allow configure multiple annotations <[volcano.sh/jdb-min-available volcano.sh/jdb-max-unavailable]> at same time",
        ),
    ],
)
def test_disruption_budget_annotations(annotations, message):
    outcome = run(validate_pod, pod(annotations=annotations))
    assert (outcome.allowed, outcome.message) == (False, message)


def test_budget_checks_only_our_pods():
    assert run(validate_pod, pod(annotations={"volcano.sh/jdb-min-available": "2"})).allowed
    assert run(validate_pod, pod(annotations={"volcano.sh/jdb-max-unavailable": "50%"})).allowed
    assert run(
        validate_pod, pod(annotations={"volcano.sh/jdb-min-available": "0"}, scheduler="default-scheduler")
    ).allowed
