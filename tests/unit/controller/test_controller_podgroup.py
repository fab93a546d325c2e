"""The PodGroup of a Job (reference §3.3) and of a plain pod (§3.8): names, gang sizes, minResources."""

from fractions import Fraction

from controller.jobs.podgroup import desired_podgroup, min_resources, podgroup_name, spec_patch, task_min_member
from controller.podgroups.plain import build_podgroup, min_member, podgroup_name_for, wants_podgroup
from controller.quota import pod_quota_usage, same_resources, scheduler_view
from lapilli.api import TaskSpec
from tests.unit.controller.test_controller_builders import UID, container, job, job_doc, task


def test_quota_usage_of_a_pod_spec():
    spec = {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"},
                                        "limits": {"cpu": "1", "nvidia.com/gpu": "1"}}},
            {"name": "b", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
        ],
        "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "2"}}}],
        "overhead": {"memory": "64Mi"},
    }
    usage = pod_quota_usage(spec)
    assert usage["cpu"] == usage["requests.cpu"] == 2  # the init container needs more than both containers
    assert usage["memory"] == 2 * 2**30 + 64 * 2**20
    assert usage["limits.cpu"] == 1 and "limits.memory" not in usage
    assert usage["nvidia.com/gpu"] == usage["requests.nvidia.com/gpu"] == 1
    assert usage["pods"] == usage["count/pods"] == 1
    view = scheduler_view(usage)
    assert set(view) == {"cpu", "memory", "nvidia.com/gpu", "pods"}


def test_limits_only_containers_ask_for_nothing():
    usage = pod_quota_usage({"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]})
    assert scheduler_view(usage) == {"pods": Fraction(1)}


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


def bare_pod(**meta):
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid", **meta},
            "spec": {"schedulerName": "volcano", "containers": [container(cpu="1", memory="1Gi")],
                     "priorityClassName": "high"}}


def test_plain_pods_that_want_a_podgroup():
    assert wants_podgroup(bare_pod(), ["volcano"])
    assert not wants_podgroup(bare_pod(), ["other"])
    assert not wants_podgroup(bare_pod(annotations={"scheduling.k8s.io/group-name": "x"}), ["volcano"])
    assert not wants_podgroup(bare_pod(deletionTimestamp="2026-01-01T00:00:00Z"), ["volcano"])


def test_plain_podgroup_of_a_bare_pod_and_of_an_owned_pod():
    pg = build_podgroup(bare_pod(annotations={"scheduling.volcano.sh/queue-name": "q1",
                                              "volcano.sh/preemptable": "true"}), {}, inherit=True)
    assert pg["metadata"]["name"] == "podgroup-pod-uid"
    assert pg["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid",
                                                  "controller": True}]
    assert pg["metadata"]["annotations"] == {"volcano.sh/preemptable": "true"}
    assert pg["spec"] == {"minMember": 1, "minResources": {"cpu": "1", "memory": "1Gi", "pods": "1"},
                          "priorityClassName": "high", "queue": "q1"}
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": True}
    owned = bare_pod(ownerReferences=[rs])
    assert podgroup_name_for(owned) == "podgroup-rs-uid"
    pg = build_podgroup(owned, {"scheduling.volcano.sh/group-min-member": "3", "volcano.sh/x": "1", "other": "2"},
                        inherit=True)
    assert pg["metadata"]["ownerReferences"] == [rs] and pg["metadata"]["annotations"] == {"volcano.sh/x": "1"}
    assert pg["spec"]["minMember"] == 3 and pg["spec"]["minResources"]["cpu"] == "3"
    assert "annotations" not in build_podgroup(owned, {"volcano.sh/x": "1"}, inherit=False)["metadata"]


def test_min_member_of_an_owner():
    assert [min_member(a) for a in ({}, {"scheduling.volcano.sh/group-min-member": "4"},
                                    {"scheduling.volcano.sh/group-min-member": "-2"},
                                    {"scheduling.volcano.sh/group-min-member": "x"})] == [1, 4, 1, 1]
