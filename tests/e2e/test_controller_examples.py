"""The shipped Volcano Job examples on the real control plane, through the whole service: the webhook defaults
them, the Job controller makes the PodGroup, the extender admits and gang-binds it, the controller creates the
pods once admitted, the simulated kubelet runs them, and the lifecycle policies do the rest."""

from __future__ import annotations

import copy

import pytest

from assembly.dev import DevCluster
from lapilli.kube import KubeClient
from lapilli.kube.resources import CONFIG_MAPS, PODS, SECRETS, SERVICES
from tests.e2e.gangs import never_partly_bound
from tests.e2e.test_controller_helpers import (
    EXAMPLES,
    apply,
    env_of,
    eventually,
    example,
    get_job,
    job_pods,
    podgroup_of,
    remove_example_jobs,
    remove_job,
    running_pods,
    wait_phase,
)


@pytest.fixture(scope="module")
async def cluster(control_plane: DevCluster) -> DevCluster:
    assert control_plane.info is not None and control_plane.info.extender, "needs the service with its extender"
    await control_plane.ensure_namespace("ml")
    assert control_plane.client is not None
    await remove_example_jobs(control_plane.client)
    control_plane.kubectl("apply", "-f", str(EXAMPLES / "priorityclass-high-priority.yaml"),
                          "-f", str(EXAMPLES / "queues-for-examples.yaml"))
    return control_plane


@pytest.fixture(scope="module")
def api(cluster: DevCluster) -> KubeClient:
    assert cluster.client is not None
    return cluster.client


async def test_torchrun_gang_runs_wired_and_completes_with_its_master(cluster, api, tmp_path):
    await remove_job(api, "ml", "torchrun-gang")  # the conformance tier applied the same example earlier
    try:
        async with never_partly_bound(cluster, "ml"):  # the gang binds together
            apply(cluster, EXAMPLES / "vcjob-torchrun-gang.yaml", tmp_path)  # unchanged
            job = await wait_phase(api, "ml", "torchrun-gang", "Running")
            pods = await running_pods(api, "ml", "torchrun-gang", 3)
        pg = await podgroup_of(api, job)
        assert pg["spec"]["minMember"] == 3 and pg["spec"]["minTaskMember"] == {"master": 1, "worker": 2}
        assert pg["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
        assert all(p["spec"]["nodeName"] for p in pods)
        by_name = {p["metadata"]["name"]: env_of(p) for p in pods}
        for name, rank in (("torchrun-gang-master-0", "0"), ("torchrun-gang-worker-0", "1"),
                           ("torchrun-gang-worker-1", "2")):
            env = by_name[name]
            assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["WORLD_SIZE"], env["RANK"]) == (
                "torchrun-gang-master-0.torchrun-gang", "23456", "3", rank), name
        # rank 0 finishes: TaskCompleted -> CompleteJob stops the workers
        cluster.kubectl("annotate", "pod", "-n", "ml", "torchrun-gang-master-0", "sim.lapilli.io/duration=0s",
                        "sim.lapilli.io/exit-code=0")
        done = await wait_phase(api, "ml", "torchrun-gang", "Completed")
        assert [c["status"] for c in done["status"]["conditions"]][-2:] == ["Completing", "Completed"]

        async def workers_gone() -> bool:
            left = await job_pods(api, "ml", "torchrun-gang")
            return [p["metadata"]["name"] for p in left] == ["torchrun-gang-master-0"]

        await eventually(workers_gone, 30, "workers stopped, the finished master kept")
        events = cluster.kubectl("get", "events", "-n", "ml", "--field-selector",
                                 "involvedObject.name=torchrun-gang").stdout
        assert "Start to execute action CompleteJob" in events
    finally:
        await remove_job(api, "ml", "torchrun-gang")


async def test_mpi_gang_gets_ssh_and_its_hosts(cluster, api, tmp_path):
    await remove_job(api, "ml", "mpi-gang")
    apply(cluster, EXAMPLES / "vcjob-mpi-gang.yaml", tmp_path)
    try:
        job = await wait_phase(api, "ml", "mpi-gang", "Running")
        assert set(job["spec"]["plugins"]) == {"mpi", "svc", "ssh"}  # the webhook added what mpi implies
        secret = await api.get(SECRETS, "mpi-gang-ssh", "ml")
        assert set(secret["data"]) == {"id_rsa", "id_rsa.pub", "authorized_keys", "config"}
        service = await api.get(SERVICES, "mpi-gang", "ml")
        assert service["spec"]["clusterIP"] == "None"
        hosts = (await api.get(CONFIG_MAPS, "mpi-gang-svc", "ml"))["data"]
        assert hosts["VC_MPIWORKER_HOSTS"] == "mpi-gang-mpiworker-0.mpi-gang,mpi-gang-mpiworker-1.mpi-gang"
        pods = await running_pods(api, "ml", "mpi-gang", 3)
        master = next(p for p in pods if p["metadata"]["name"] == "mpi-gang-mpimaster-0")
        assert env_of(master)["MPI_HOST"] == "mpi-gang-mpiworker-0.mpi-gang,mpi-gang-mpiworker-1.mpi-gang"
        for pod in pods:
            volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "mpi-gang-ssh")
            assert volume["secret"]["secretName"] == "mpi-gang-ssh"
            mount = next(m for m in pod["spec"]["containers"][0]["volumeMounts"] if m["name"] == "mpi-gang-ssh")
            assert (mount["mountPath"], mount["subPath"]) == ("/root/.ssh", ".ssh")
            assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == (pod["metadata"]["name"], "mpi-gang")
    finally:
        await remove_job(api, "ml", "mpi-gang")

        async def plugin_objects_gone() -> bool:
            # The controller deletes them after the pods, so "pods gone" does not mean these are yet.
            for res, name in ((SECRETS, "mpi-gang-ssh"), (SERVICES, "mpi-gang"), (CONFIG_MAPS, "mpi-gang-svc")):
                if name in {o["metadata"]["name"] for o in (await api.list(res, "ml")).items}:
                    return False
            return True

        await eventually(plugin_objects_gone, 30, "the job's Secret, Service and ConfigMap deleted with it")


def tf_training(name: str = "tf-training") -> dict:
    """The tf example as written (its workers request `nvidia.com/gpu` without a limit; the controller gives
    their pods the request as limit, which Kubernetes requires)."""
    job = copy.deepcopy(example("vcjob-tf-training.yaml"))
    job["metadata"]["name"] = name
    return job


async def test_tf_training_restarts_on_eviction(cluster, api, tmp_path):
    await remove_job(api, "default", "tf-training")
    apply(cluster, tf_training(), tmp_path)
    try:
        await wait_phase(api, "default", "tf-training", "Running")
        before = {p["metadata"]["uid"] for p in await running_pods(api, "default", "tf-training", 3)}
        victim = next(p for p in await job_pods(api, "default", "tf-training")
                      if p["metadata"]["name"].startswith("tf-training-worker") and p["spec"].get("nodeName"))
        await api.evict("default", victim["metadata"]["name"])

        async def restarted() -> dict | None:
            job = await get_job(api, "default", "tf-training")
            status = (job or {}).get("status") or {}
            return job if status.get("retryCount") == 1 and status.get("version", 0) >= 1 else None

        await eventually(restarted, 30, "RestartJob: retryCount and version up")
        await wait_phase(api, "default", "tf-training", "Running")
        after = await running_pods(api, "default", "tf-training", 3)
        assert not before & {p["metadata"]["uid"] for p in after}, "every pod is a fresh one"
        assert all(int(p["metadata"]["annotations"]["volcano.sh/job-version"]) >= 1 for p in after)
    finally:
        await remove_job(api, "default", "tf-training")


async def test_tf_training_fails_after_max_retry(cluster, api, tmp_path):
    job = tf_training("tf-failing")
    job["spec"]["maxRetry"] = 2
    job["spec"]["policies"].append({"event": "PodFailed", "action": "RestartJob"})
    worker = job["spec"]["tasks"][1]["template"]
    worker["metadata"] = {"annotations": {"sim.lapilli.io/duration": "1s", "sim.lapilli.io/exit-code": "1"}}
    apply(cluster, job, tmp_path)
    try:
        failed = await wait_phase(api, "default", "tf-failing", "Failed", timeout_s=120)
        assert failed["status"]["retryCount"] == 2
        assert "Restarting" in [c["status"] for c in failed["status"]["conditions"]]
        assert not [p for p in await job_pods(api, "default", "tf-failing")
                    if p["status"].get("phase") in ("Pending", "Running")]
    finally:
        await remove_job(api, "default", "tf-failing")


async def test_every_pod_is_owned_by_its_job(cluster, api, tmp_path):
    await remove_job(api, "ml", "torchrun-gang")
    apply(cluster, EXAMPLES / "vcjob-torchrun-gang.yaml", tmp_path)
    try:
        job = await wait_phase(api, "ml", "torchrun-gang", "Running")
        for pod in await job_pods(api, "ml", "torchrun-gang"):
            owner = pod["metadata"]["ownerReferences"][0]
            assert (owner["kind"], owner["uid"], owner["controller"]) == ("Job", job["metadata"]["uid"], True)
            assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == (
                f"torchrun-gang-{job['metadata']['uid']}")
    finally:
        await remove_job(api, "ml", "torchrun-gang")
    assert not (await api.list(PODS, "ml", label_selector="volcano.sh/job-name=torchrun-gang")).items
