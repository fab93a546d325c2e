"""The PodGroup of a Job (reference §3.3): its name, gang sizes, minResources and the spec patch."""

from controller.jobs.podgroup import desired_podgroup, min_resources, podgroup_name, spec_patch, task_min_member
from controller.quota import same_resources
from lapilli.api import TaskSpec
from tests.unit.controller.builders import UID, container, job, job_doc, task


def test_min_task_member():
    assert task_min_member(TaskSpec(name="a", replicas=4)) == 4
    assert task_min_member(TaskSpec(name="a", replicas=4, min_available=1)) == 1
    partitioned = TaskSpec.from_wire({"name": "a", "replicas": 4,
                                      "partitionPolicy": {"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1}})
    assert task_min_member(partitioned) == 2


def test_min_resources_fill_min_available_then_spare_replicas_by_priority():
    big = {"containers": [container(cpu="4", memory="8Gi")], "priorityClassName": "high"}
    j = job(task("small", 3, minAvailable=1), task("big", 2, minAvailable=1, pod_spec=big), minAvailable=3)
    # one of each task's minAvailable, then the spare replicas of the higher-priority task first
    assert min_resources(j, {"high": 1000}) == {"cpu": "9", "memory": "17Gi", "pods": "3"}
    # without priorities the spec order decides: small's spare replica fills the gap
    assert min_resources(j, {}) == {"cpu": "6", "memory": "10Gi", "pods": "3"}


def test_min_resources_take_whole_tasks_when_min_available_is_below_the_task_minimums():
    j = job(task("a", 2), task("b", 2, pod_spec={"containers": [container(cpu="2")]}), minAvailable=3)
    assert min_resources(j, {}) == {"cpu": "4", "memory": "3Gi", "pods": "3"}


def test_desired_podgroup_of_a_job():
    doc = job_doc(task("master", 1), task("worker", 2, minAvailable=1), minAvailable=2, queue="q1",
                  priorityClassName="high")
    doc["metadata"]["labels"] = {"team": "a"}
    doc["metadata"]["annotations"] = {"volcano.sh/preemptable": "false"}
    from lapilli.api import Job
    pg = desired_podgroup(Job.from_wire(doc), doc, {})
    assert pg["metadata"]["name"] == podgroup_name("job1", UID) == f"job1-{UID}"
    assert pg["metadata"]["labels"] == {"team": "a"} and pg["metadata"]["annotations"] == {"volcano.sh/preemptable": "false"}
    owner = pg["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Job", UID, True)
    assert pg["spec"] == {"minMember": 2, "minTaskMember": {"master": 1, "worker": 1}, "queue": "q1",
                          "minResources": {"cpu": "2", "memory": "2Gi", "pods": "2"}, "priorityClassName": "high"}


def test_spec_patch_only_when_something_changed():
    j = job(task("w", 2))
    desired = desired_podgroup(j, job_doc(task("w", 2)), {})["spec"]
    current = {"spec": {**desired, "minResources": {"cpu": "2000m", "memory": "2048Mi", "pods": "2"}}}
    assert spec_patch(current, desired) is None
    scaled = desired_podgroup(job(task("w", 3)), job_doc(task("w", 3)), {})["spec"]
    patch = spec_patch(current, scaled)
    assert patch == {"spec": {"minMember": 3, "minResources": {"cpu": "3", "memory": "3Gi", "pods": "3"},
                              "minTaskMember": {"w": 3}}}
    assert not same_resources(None, {}) and same_resources(None, None)
