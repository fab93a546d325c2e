"""A Volcano Job's life on the real control plane: suspend and resume with the CLI, TTL after finishing,
scaling by editing replicas, dependsOn, PVCs, cleanup of everything it owns, and a gang that cannot fit."""

from __future__ import annotations

from collections.abc import Awaitable

import pytest

from assembly.dev import DevCluster
from lapilli.kube import KubeClient, NotFound
from lapilli.kube.resources import COMMANDS, CONFIG_MAPS, PODGROUPS, SECRETS, SERVICES, Resource
from tests.e2e.metrics import service_metric, sessions_run
from tests.e2e.test_controller_helpers import (
    apply,
    controllers_cluster,
    eventually,
    get_job,
    job_pods,
    lapilli,
    phase,
    podgroup_of,
    remove_job,
    running_pods,
    wait_phase,
)

NS = "e2e-controller"
NETWORK_POLICIES = Resource("networking.k8s.io/v1", "networkpolicies", "NetworkPolicy")
PVCS = Resource("v1", "persistentvolumeclaims", "PersistentVolumeClaim")


@pytest.fixture(scope="module")
async def cluster(control_plane: DevCluster) -> DevCluster:
    return await controllers_cluster(control_plane, NS)


@pytest.fixture(scope="module")
def api(cluster: DevCluster) -> KubeClient:
    assert cluster.client is not None
    return cluster.client


def vcjob(name: str, *tasks: dict, **spec) -> dict:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": NS},
            "spec": {"schedulerName": "volcano", "tasks": list(tasks), **spec}}


def task(name: str, replicas: int, *, notes: dict | None = None, gpus: int = 0, **fields) -> dict:
    resources: dict = {"requests": {"cpu": "100m", "memory": "64Mi"}}
    if gpus:
        resources["requests"]["nvidia.com/gpu"] = str(gpus)
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    template = {"spec": {"restartPolicy": "Never",
                         "containers": [{"name": "main", "image": "busybox", "resources": resources}]}}
    if notes:
        template["metadata"] = {"annotations": notes}
    return {"name": name, "replicas": replicas, "template": template, **fields}


async def owned_objects(api: KubeClient, name: str) -> list[str]:
    """What of a Job's plugin objects still exists."""
    found = []
    for res, obj in ((SERVICES, name), (CONFIG_MAPS, f"{name}-svc"), (SECRETS, f"{name}-ssh"),
                     (NETWORK_POLICIES, name)):
        try:
            await api.get(res, obj, NS)
            found.append(f"{res.kind}/{obj}")
        except NotFound:
            pass
    return found


async def test_suspend_and_resume_with_the_cli(cluster, api, tmp_path):
    apply(cluster, vcjob("suspended", task("w", 2), plugins={"svc": []}), tmp_path)
    try:
        await wait_phase(api, NS, "suspended", "Running")
        await running_pods(api, NS, "suspended", 2)
        done = lapilli(cluster, "job", "suspend", "-N", "suspended", "-n", NS)
        assert done.returncode == 0, done.stderr
        aborted = await wait_phase(api, NS, "suspended", "Aborted")
        assert aborted["status"]["version"] >= 1
        await eventually(lambda: _no_pods(api, "suspended"), 30, "pods of the aborted Job gone")
        assert not (await api.list(COMMANDS, NS)).items, "the Command was taken (deleted) before it ran"
        done = lapilli(cluster, "job", "resume", "-N", "suspended", "-n", NS)
        assert done.returncode == 0, done.stderr
        resumed = await wait_phase(api, NS, "suspended", "Running")
        assert resumed["status"]["retryCount"] == 1
        await running_pods(api, NS, "suspended", 2)
        view = lapilli(cluster, "job", "view", "-N", "suspended", "-n", NS).stdout
        for needle in ("Start to execute command AbortJob", "Start to execute action ResumeJob", "Phase:\tRunning"):
            assert needle in view
    finally:
        await remove_job(api, NS, "suspended")


async def _no_pods(api: KubeClient, name: str) -> bool:
    return not await job_pods(api, NS, name)


async def test_ttl_deletes_the_finished_job_with_everything_it_owns(cluster, api, tmp_path):
    quick = task("w", 2, notes={"sim.lapilli.io/duration": "1s"})
    apply(cluster, vcjob("short-lived", quick, ttlSecondsAfterFinished=5, plugins={"svc": [], "ssh": []}), tmp_path)
    job = await wait_phase(api, NS, "short-lived", "Completed", timeout_s=60)
    pg_name = f"short-lived-{job['metadata']['uid']}"

    async def collected() -> bool:
        if await get_job(api, NS, "short-lived") is not None or await job_pods(api, NS, "short-lived"):
            return False
        pgs = {pg["metadata"]["name"] for pg in (await api.list(PODGROUPS, NS)).items}
        return pg_name not in pgs and not await owned_objects(api, "short-lived")

    await eventually(collected, 20, "Job, pods, PodGroup and plugin objects deleted after the TTL")


async def test_scaling_by_editing_replicas_updates_pods_and_hosts(cluster, api, tmp_path):
    apply(cluster, vcjob("scaled", task("w", 2, minAvailable=1), minAvailable=1, plugins={"svc": []}), tmp_path)
    try:
        await running_pods(api, NS, "scaled", 2)
        patch = '[{"op": "replace", "path": "/spec/tasks/0/replicas", "value": 3}]'
        cluster.kubectl("patch", "vcjob", "scaled", "-n", NS, "--type=json", "-p", patch)
        await running_pods(api, NS, "scaled", 3)

        async def hosts(count: int) -> bool:
            data = (await api.get(CONFIG_MAPS, "scaled-svc", NS))["data"]
            return data["VC_W_NUM"] == str(count) and len(data["VC_W_HOSTS"].split(",")) == count

        await eventually(lambda: hosts(3), 20, "hosts ConfigMap lists 3 replicas")
        patch = '[{"op": "replace", "path": "/spec/tasks/0/replicas", "value": 1}]'
        cluster.kubectl("patch", "vcjob", "scaled", "-n", NS, "--type=json", "-p", patch)

        async def scaled_down() -> bool:
            return [p["metadata"]["name"] for p in await job_pods(api, NS, "scaled")] == ["scaled-w-0"]

        await eventually(scaled_down, 30, "scaled down to one pod")
        await eventually(lambda: hosts(1), 20, "hosts ConfigMap lists 1 replica")
        pg = await podgroup_of(api, await get_job(api, NS, "scaled"))
        assert pg["spec"]["minTaskMember"] == {"w": 1}
    finally:
        await remove_job(api, NS, "scaled")


async def test_depends_on_starts_a_task_after_its_dependency_runs(cluster, api, tmp_path):
    job = vcjob("ordered", task("first", 1), task("second", 1, dependsOn={"name": ["first"]}), minAvailable=1)
    apply(cluster, job, tmp_path)
    try:
        pods = await running_pods(api, NS, "ordered", 2)
        first, second = (next(p for p in pods if p["metadata"]["name"] == f"ordered-{t}-0")
                         for t in ("first", "second"))
        started = first["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
        assert second["metadata"]["creationTimestamp"] >= started
    finally:
        await remove_job(api, NS, "ordered")


async def test_deleting_a_job_deletes_what_it_owns(cluster, api, tmp_path):
    claim = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    job = vcjob("owner", task("w", 2), plugins={"svc": [], "ssh": []},
                volumes=[{"mountPath": "/data", "volumeClaim": claim}])
    apply(cluster, job, tmp_path)

    async def ready() -> dict | None:
        current = await get_job(api, NS, "owner")
        claims = [v.get("volumeClaimName") for v in (current or {}).get("spec", {}).get("volumes", [])]
        return current if all(claims) and len(await job_pods(api, NS, "owner")) == 2 else None

    current = await eventually(ready, 60, "claim named, PVC and pods created")
    pvc = current["spec"]["volumes"][0]["volumeClaimName"]
    assert pvc.startswith("owner-pvc-")
    assert (await api.get(PVCS, pvc, NS))["metadata"]["ownerReferences"][0]["uid"] == current["metadata"]["uid"]
    assert sorted(await owned_objects(api, "owner")) == sorted(
        ["Service/owner", "ConfigMap/owner-svc", "Secret/owner-ssh", "NetworkPolicy/owner"])
    pods = await job_pods(api, NS, "owner")
    assert all(any(v.get("persistentVolumeClaim", {}).get("claimName") == pvc for v in p["spec"]["volumes"])
               for p in pods)
    await remove_job(api, NS, "owner")

    async def all_gone() -> bool:
        try:  # without a controller-manager the pvc-protection finalizer stays: deleted is all we can see
            if not (await api.get(PVCS, pvc, NS))["metadata"].get("deletionTimestamp"):
                return False
        except NotFound:
            pass
        pgs = [pg for pg in (await api.list(PODGROUPS, NS)).items if pg["metadata"]["name"].startswith("owner-")]
        return not pgs and not await owned_objects(api, "owner")

    await eventually(all_gone, 30, "PodGroup, PVC, Service, ConfigMap, Secret and NetworkPolicy deleted")


async def test_a_gang_that_cannot_fit_stays_pending_with_the_reason(cluster, api, tmp_path):
    too_big = vcjob("too-big", task("w", 2, gpus=9))  # no node has nine GPUs
    apply(cluster, too_big, tmp_path)
    try:
        job = await wait_phase(api, NS, "too-big", "Pending")
        pg_name = f"too-big-{job['metadata']['uid']}"

        async def reason() -> str | None:
            described = cluster.kubectl("describe", "pg", pg_name, "-n", NS).stdout
            return described if "Unschedulable" in described and "unschedulable" in described else None

        described = await eventually(reason, 30, "the PodGroup's Unschedulable condition")
        assert "NotEnoughResources" in described or "tasks in gang unschedulable" in described
        assert phase(await get_job(api, NS, "too-big")) == "Pending"
        assert not [p for p in await job_pods(api, NS, "too-big") if p["spec"].get("nodeName")]

        async def job_events() -> str | None:
            # The controller notes the condition on the Job once its watch brings the PodGroup's new status.
            events = cluster.kubectl("get", "events", "-n", NS, "--field-selector", "involvedObject.name=too-big")
            return events.stdout if "PodGroupPending" in events.stdout else None

        await eventually(job_events, 15, "the Job's PodGroupPending event")
    finally:
        await remove_job(api, NS, "too-big")


async def _at_least(value: Awaitable[float | None], floor: float) -> bool:
    return (await value or 0.0) >= floor


async def test_no_pod_is_created_before_the_podgroup_is_admitted(cluster, api, tmp_path):
    """The gate: a gang its queue's capability can never admit keeps its PodGroup Pending, and the controller
    creates no pod at all (Volcano creates pods only once the PodGroup is Inqueue)."""
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "e2e-tiny"},
             "spec": {"weight": 1, "capability": {"cpu": "1", "memory": "1Gi"}}}
    apply(cluster, queue, tmp_path)
    wide = task("w", 2)
    wide["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
    try:
        await eventually(lambda: _queue_open(api, "e2e-tiny"), 20, "the queue is Open")
        apply(cluster, vcjob("gated", wide, queue="e2e-tiny"), tmp_path)
        job = await wait_phase(api, NS, "gated", "Pending")
        pg = await podgroup_of(api, job)
        assert pg["spec"]["minResources"]["cpu"] == "2"

        # The leader's sessions count the PodGroup as a pending (not admitted) job of its queue: wait for that, then
        # for a few more sessions, which turn it away too.
        pending = {"queue": "e2e-tiny", "phase": "pending"}
        await eventually(lambda: _at_least(service_metric(cluster, "lapilli_queue_jobs", pending), 1), 30,
                         "a session to judge the PodGroup pending")
        seen = await sessions_run(cluster)
        await eventually(lambda: _at_least(sessions_run(cluster), seen + 3), 30, "three more sessions")
        current = await podgroup_of(api, job)
        assert (current.get("status") or {}).get("phase") in (None, "Pending"), current.get("status")
        assert await job_pods(api, NS, "gated") == []
        assert phase(await get_job(api, NS, "gated")) == "Pending"
    finally:
        await remove_job(api, NS, "gated")
        cluster.kubectl("delete", "queue", "e2e-tiny", "--ignore-not-found")


async def _queue_open(api: KubeClient, name: str) -> bool:
    from lapilli.kube.resources import QUEUES

    return ((await api.get(QUEUES, name)).get("status") or {}).get("state") == "Open"
