"""A partitioned Job's PodGroup and pods, as Volcano's job controller makes them (issue 17).

Ports what `job_controller_actions.go` does in `getSubGroupPolicy` / `setPgSubGroupPolicy` /
`updatePgSubGroupPolicy` and in `createOrUpdatePodGroup`'s networkTopology copy, and the partition label of
`createJobPod` (`job_controller_util.go`). Volcano has no unit test of these functions of its own; the rows below
are the cases of its e2e `network_topology_task_test.go` (4.x) reduced to the objects the controller writes.
"""

from controller.jobs.podgroup import desired_podgroup, spec_patch
from controller.jobs.pods import render_pod
from lapilli.api import Job, PodGroup
from tests.unit.controller.builders import job_doc, task


def _partitioned(name: str, replicas: int, size: int, **policy: object) -> dict:
    return task(name, replicas, partitionPolicy={"totalPartitions": replicas // size, "partitionSize": size,
                                                  **policy})


def _spec(doc: dict) -> dict:
    return desired_podgroup(Job.from_wire(doc), doc, {})["spec"]


def test_each_partitioned_task_becomes_one_sub_group_policy_in_task_order():
    doc = job_doc(
        task("master", 1),
        _partitioned("worker", 8, 4, minPartitions=1, networkTopology={"mode": "hard", "highestTierAllowed": 1}),
        _partitioned("ps", 4, 2, networkTopology={"mode": "soft", "highestTierName": "leaf"}),
    )
    spec = _spec(doc)
    assert spec["subGroupPolicy"] == [
        {"name": "worker", "subGroupSize": 4, "minSubGroups": 1,
         "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "worker"}},
         "matchLabelKeys": ["volcano.sh/partition-id"],
         "networkTopology": {"mode": "hard", "highestTierAllowed": 1}},
        {"name": "ps", "subGroupSize": 2, "minSubGroups": 0,
         "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "ps"}},
         "matchLabelKeys": ["volcano.sh/partition-id"],
         "networkTopology": {"mode": "soft", "highestTierName": "leaf"}},
    ]
    # minTaskMember: minPartitions x partitionSize where minPartitions is set, else every replica
    assert spec["minTaskMember"] == {"master": 1, "worker": 4, "ps": 4}
    PodGroup.from_wire({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                        "metadata": {"name": "x"}, "spec": spec})  # a valid PodGroup by the CRD's model


def test_no_partition_no_sub_group_policy_and_a_partition_without_topology_has_none():
    assert "subGroupPolicy" not in _spec(job_doc(task("w", 4)))
    (policy,) = _spec(job_doc(_partitioned("w", 4, 2)))["subGroupPolicy"]
    assert "networkTopology" not in policy


def test_job_network_topology_is_copied_with_one_bound_the_number_winning():
    spec = _spec(job_doc(task("w", 2), networkTopology={"mode": "soft", "highestTierAllowed": 2}))
    assert spec["networkTopology"] == {"mode": "soft", "highestTierAllowed": 2}
    spec = _spec(job_doc(task("w", 2), networkTopology={"highestTierName": "spine"}))
    assert spec["networkTopology"] == {"mode": "hard", "highestTierName": "spine"}
    # Both set (the webhook refuses it; a Job admitted without the webhook): Volcano keeps highestTierAllowed.
    both = {"mode": "hard", "highestTierAllowed": 0, "highestTierName": "spine"}
    assert _spec(job_doc(task("w", 2), networkTopology=both))["networkTopology"] == {"mode": "hard",
                                                                                    "highestTierAllowed": 0}
    assert "networkTopology" not in _spec(job_doc(task("w", 2)))


def test_changed_partitions_patch_the_sub_group_policy_and_a_removed_one_drops_it():
    before = _spec(job_doc(_partitioned("w", 4, 2)))
    current = {"spec": before}
    assert spec_patch(current, _spec(job_doc(_partitioned("w", 4, 2)))) is None
    resized = _spec(job_doc(_partitioned("w", 4, 4)))
    assert spec_patch(current, resized) == {"spec": {"subGroupPolicy": resized["subGroupPolicy"]}}
    plain = _spec(job_doc(task("w", 4)))
    assert spec_patch(current, plain) == {"spec": {"subGroupPolicy": None}}


def test_pods_carry_their_task_and_partition_labels():
    doc = job_doc(task("master", 1), _partitioned("worker", 6, 3))
    j = Job.from_wire(doc)
    master, worker = j.spec.tasks
    labels = [render_pod(j, doc, worker, i)["metadata"]["labels"] for i in range(6)]
    assert [lab["volcano.sh/partition-id"] for lab in labels] == ["0", "0", "0", "1", "1", "1"]
    assert {lab["volcano.sh/task-spec"] for lab in labels} == {"worker"}
    master_labels = render_pod(j, doc, master, 0)["metadata"]["labels"]
    assert master_labels["volcano.sh/task-spec"] == "master" and "volcano.sh/partition-id" not in master_labels
