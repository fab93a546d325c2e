"""Pods rendered for a Job (reference §3.4) and the sync / kill plans over them (§3.2, §3.5)."""

import itertools

from controller.jobs.pods import pvc_volume_name, render_pod
from controller.jobs.sync import Target, plan_kill, plan_sync, replica_index
from lapilli.api import Job
from tests.unit.controller.builders import UID, job, job_doc, pod, task


def render(doc, task_name, index, **kw):
    j = Job.from_wire(doc)
    spec = next(t for t in j.spec.tasks if t.name == task_name)
    return render_pod(j, doc, spec, index, **kw)


def test_pod_names_keys_owner_and_scheduler():
    doc = job_doc(task("worker", 2), queue="q1", priorityClassName="high",
                  status={"version": 2, "retryCount": 1})
    doc["metadata"]["annotations"] = {"volcano.sh/preemptable": "true", "volcano.sh/jdb-max-unavailable": "1"}
    doc["metadata"]["labels"] = {"volcano.sh/cooldown-time": "600s", "team": "x"}
    p = render(doc, "worker", 1)
    meta = p["metadata"]
    assert meta["name"] == "job1-worker-1" and meta["namespace"] == "ns1"
    assert meta["ownerReferences"][0]["uid"] == UID and meta["ownerReferences"][0]["controller"] is True
    assert meta["annotations"] == {
        "volcano.sh/task-index": "1", "volcano.sh/task-spec": "worker",
        "scheduling.k8s.io/group-name": f"job1-{UID}", "volcano.sh/job-name": "job1",
        "volcano.sh/queue-name": "q1", "volcano.sh/job-version": "2", "volcano.sh/template-uid": "job1-worker",
        "volcano.sh/job-retry-count": "1", "volcano.sh/preemptable": "true", "volcano.sh/jdb-max-unavailable": "1",
    }
    assert meta["labels"] == {"volcano.sh/task-index": "1", "volcano.sh/job-name": "job1",
                              "volcano.sh/task-spec": "worker", "volcano.sh/job-namespace": "ns1",
                              "volcano.sh/queue-name": "q1", "volcano.sh/cooldown-time": "600s"}
    assert p["spec"]["schedulerName"] == "volcano" and p["spec"]["priorityClassName"] == "high"
    assert "team" not in meta["labels"]


def test_template_scheduler_and_keys_are_kept_and_forwarding_and_partition_marked():
    spec = {"schedulerName": "other", "containers": [{"name": "c", "image": "x"}]}
    t = task("w", 4, pod_spec=spec, partitionPolicy={"totalPartitions": 2, "partitionSize": 2},
             topologyPolicy="best-effort")
    t["template"]["metadata"] = {"labels": {"app": "a"}}
    p = render(job_doc(t), "w", 3, forwarding=True)
    assert p["spec"]["schedulerName"] == "other"
    assert p["metadata"]["labels"]["app"] == "a" and p["metadata"]["labels"]["volcano.sh/partition-id"] == "1"
    assert p["metadata"]["labels"]["volcano.sh/job-forwarding"] == "true"
    assert p["metadata"]["annotations"]["volcano.sh/numa-topology-policy"] == "best-effort"


def test_extended_resources_requested_without_a_limit_get_the_request_as_limit():
    spec = {"containers": [
        {"name": "gpu", "image": "x", "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": "1"}}},
        {"name": "own", "image": "x", "resources": {"requests": {"example.com/fpga": "2"},
                                                    "limits": {"example.com/fpga": "2", "cpu": "1"}}},
        {"name": "plain", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
    ]}
    p = render(job_doc(task("w", 1, pod_spec=spec)), "w", 0)
    gpu, own, plain = p["spec"]["containers"]
    assert gpu["resources"] == {"requests": {"cpu": "4", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
    assert own["resources"]["limits"] == {"example.com/fpga": "2", "cpu": "1"}  # a limit given is kept
    assert "limits" not in plain["resources"]  # cpu and memory may be overcommitted: left alone


def test_job_volumes_are_mounted_in_every_container():
    doc = job_doc(task("w", 1), volumes=[{"mountPath": "/data", "volumeClaimName": "data"}])
    p = render(doc, "w", 0)
    name = pvc_volume_name("job1", "data")
    assert {"name": name, "persistentVolumeClaim": {"claimName": "data"}} in p["spec"]["volumes"]
    assert {"name": name, "mountPath": "/data"} in p["spec"]["containers"][0]["volumeMounts"]
    assert name == pvc_volume_name("job1", "data") and len(name) == len("job1-") + 12


def test_plugins_wire_pytorch_env():
    doc = job_doc(task("master", 1), task("worker", 2), plugins={"pytorch": ["--port=23456"], "svc": [], "env": []})
    master, worker = render(doc, "master", 0), render(doc, "worker", 1)
    env = {e["name"]: e.get("value") for e in worker["spec"]["containers"][0]["env"]}
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["WORLD_SIZE"], env["RANK"]) == (
        "job1-master-0.job1", "23456", "3", "2")
    assert env["VC_TASK_INDEX"] == "1"
    assert {e["name"]: e.get("value") for e in master["spec"]["containers"][0]["env"]}["RANK"] == "0"
    assert (worker["spec"]["hostname"], worker["spec"]["subdomain"]) == ("job1-worker-1", "job1")


def never(_pod):
    return False


def test_sync_waits_for_admission_then_creates_every_missing_replica():
    j = job(task("a", 2), task("b", 1))
    existing = [pod("job1", "a", 0, "Running")]
    waiting = plan_sync(j, existing, deleting=never, admitted=False)
    assert list(waiting.creations()) == [] and (waiting.counts.running, waiting.counts.pending) == (1, 0)
    plan = plan_sync(j, existing, deleting=never, admitted=True)
    assert [(t.name, i) for t, i in plan.creations()] == [("a", 1), ("b", 0)]
    assert (plan.counts.running, plan.counts.pending) == (1, 2)
    assert plan.counts.tasks == {"a": {"Running": 1, "Pending": 1}, "b": {"Pending": 1}}


def test_sync_scales_down_and_replaces_nothing_that_is_still_terminating():
    j = job(task("a", 1))
    going = pod("job1", "a", 0, "Running")
    extra = pod("job1", "a", 1, "Running")
    marked = pod("job1", "a", 0, notes={"volcano.sh/controller-out-of-sync": "true"})
    plan = plan_sync(j, [going, extra], deleting=lambda p: p is going, admitted=True)
    assert list(plan.creations()) == [] and plan.delete == [extra] and plan.counts.terminating == 2
    plan = plan_sync(j, [marked], deleting=never, admitted=True)
    assert plan.delete == [marked] and plan.counts.running == 0


def test_sync_of_a_huge_job_is_proportional_to_its_pods():
    """2^31-1 declared replicas: counting and planning touch the 3 pods that exist, creations come lazily."""
    j = job(task("a", 2**31 - 1), task("a1", 2), minAvailable=1)
    existing = [pod("job1", "a", 0, "Running"), pod("job1", "a", 2, "Running"), pod("job1", "a1", 0, "Running")]
    plan = plan_sync(j, existing, deleting=never, admitted=True)
    assert plan.counts.pending == 2**31 - 3 + 1 and plan.counts.running == 3
    assert [m.present for m in plan.missing] == [frozenset({0, 2}), frozenset({0})]
    first = list(itertools.islice(plan.creations(), 4))
    assert [(t.name, i) for t, i in first] == [("a", 1), ("a", 3), ("a", 4), ("a", 5)]


def test_replica_index_reads_only_names_the_controller_writes():
    t = job(task("w", 3)).spec.tasks[0]
    names = ("job1-w-0", "job1-w-2", "job1-w-3", "job1-w-01", "job1-w-1-0", "job1-w-", "job1-w-٣", "job1-x-0")
    assert [replica_index(n, "job1", t) for n in names] == [0, 2, None, None, None, None, None, None]


def test_depends_on_waits_for_ready_pods_of_the_dependencies():
    j = job(task("a", 2), task("b", 1, dependsOn={"name": ["a"]}))
    plan = plan_sync(j, [pod("job1", "a", 0), pod("job1", "a", 1, "Pending")], deleting=never, admitted=True)
    assert [(t.name, i) for t, i in plan.creations()] == []
    plan = plan_sync(j, [pod("job1", "a", 0), pod("job1", "a", 1, "Succeeded")], deleting=never, admitted=True)
    assert [(t.name, i) for t, i in plan.creations()] == [("b", 0)]
    either = job(task("a", 1), task("c", 1), task("b", 1, dependsOn={"name": ["a", "c"], "iteration": "any"}))
    plan = plan_sync(either, [pod("job1", "a", 0)], deleting=never, admitted=True)
    assert [(t.name, i) for t, i in plan.creations()] == [("c", 0), ("b", 0)]


def test_kill_keeps_retained_phases_and_hits_only_the_target():
    pods = [pod("job1", "a", 0, "Succeeded"), pod("job1", "a", 1, "Running"), pod("job1", "b", 0, "Pending")]
    doomed, counts = plan_kill(pods, retain=frozenset({"Succeeded", "Failed"}), deleting=never)
    assert doomed == pods[1:] and (counts.succeeded, counts.terminating) == (1, 2)
    doomed, counts = plan_kill(pods, retain=frozenset(), deleting=never, target=Target(task="a"))
    assert doomed == pods[:2] and counts.pending == 1
    doomed, _ = plan_kill(pods, retain=frozenset(), deleting=never, target=Target(task="b", pod="job1-b-0"))
    assert doomed == pods[2:]
