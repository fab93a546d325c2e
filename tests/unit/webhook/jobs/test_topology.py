"""networkTopology rows of Volcano's job webhook: job level, a task's partitionPolicy, CREATE and UPDATE, with
`highestTierAllowed` counted when it is set at all (Volcano tests the pointer, not its truth)."""

import copy

import pytest

from tests.service.reviews import job, queue, review, task
from webhook.context import AdmissionContext
from webhook.jobs import validate_job
from webhook.listers import MemoryQueues
from webhook.review import AdmissionReview

CTX = AdmissionContext(queues=MemoryQueues([queue("default")]))
CONFLICT = "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously"


def run(obj, operation="CREATE", old=None):
    return validate_job(AdmissionReview.model_validate(review(obj, operation, old)).request, CTX)


def partitioned(topology):
    return task("w", 4, partitionPolicy={"totalPartitions": 2, "partitionSize": 2, "networkTopology": topology})


@pytest.mark.parametrize("allowed", [0, 2])
def test_job_level_both_tiers_are_denied_even_with_zero(allowed):
    obj = job("job1", queue="default", networkTopology={"mode": "hard", "highestTierAllowed": allowed,
                                                          "highestTierName": "zone"})
    outcome = run(obj)
    assert (outcome.allowed, outcome.message) == (False, CONFLICT + ";")


@pytest.mark.parametrize("allowed", [0, 1])
def test_task_partition_with_both_tiers_is_denied(allowed):
    obj = job("job1", partitioned({"mode": "hard", "highestTierAllowed": allowed, "highestTierName": "spine"}),
              queue="default")
    assert run(obj).message == CONFLICT + ";"


def test_job_and_task_conflicts_are_both_reported_with_other_problems():
    both = {"highestTierAllowed": 1, "highestTierName": "rack"}
    broken = task("w", 5, partitionPolicy={"totalPartitions": 2, "partitionSize": 2, "networkTopology": both})
    outcome = run(job("job1", broken, queue="default", networkTopology=both))
    assert outcome.message == (
        f"{CONFLICT}; 'Replicas' are not equal to TotalPartitions*PartitionSize in task: w, job: job1; {CONFLICT};"
    )


@pytest.mark.parametrize(
    "topology",
    [
        {"mode": "hard", "highestTierAllowed": 0},
        {"mode": "soft", "highestTierName": "rack"},
        {"highestTierAllowed": 2, "highestTierName": ""},
        {"highestTierAllowed": None, "highestTierName": "rack"},
    ],
)
def test_one_tier_field_is_admitted(topology):
    assert run(job("job1", queue="default", networkTopology=topology)).allowed
    assert run(job("job1", partitioned(topology), queue="default")).allowed


def test_update_checks_job_and_partition_topology():
    old = job("job1", partitioned({"highestTierAllowed": 1}), queue="default")
    new = copy.deepcopy(old)
    new["spec"]["networkTopology"] = {"highestTierAllowed": 0, "highestTierName": "zone"}
    assert run(new, "UPDATE", old).message == CONFLICT
    new = copy.deepcopy(old)
    new["spec"]["tasks"][0]["partitionPolicy"]["networkTopology"]["highestTierName"] = "zone"
    assert run(new, "UPDATE", old).message == CONFLICT


def test_malformed_partition_topology_is_denied_not_crashed():
    obj = job("job1", partitioned("spine"), queue="default")
    assert run(obj).message == 'spec.tasks[0].partitionPolicy.networkTopology: expected an object, got "spine"'
