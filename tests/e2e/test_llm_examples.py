"""The LLM examples on the real control plane, applied unchanged: distributed vLLM inference (Ray head + workers
serving one model, a Service for the API) and LLaMA-Factory fine-tuning (torchrun through the pytorch plugin).
Each binds as one gang, reaches Running with the wiring its program reads, and `lapilli schedule` over the
objects the controller made places the whole gang where the GPUs suffice and nothing where they do not."""

from __future__ import annotations

import pytest

from assembly.dev import DevCluster
from lapilli.kube import KubeClient
from lapilli.kube.resources import CONFIG_MAPS, SERVICES
from tests.e2e.gangs import never_partly_bound
from tests.e2e.test_controller_helpers import (
    EXAMPLES,
    apply,
    controllers_cluster,
    env_of,
    podgroup_of,
    remove_job,
    running_pods,
    wait_phase,
)
from tests.e2e.workload_helpers import schedule_offline

NS = "ml"


@pytest.fixture(scope="module")
async def cluster(control_plane: DevCluster) -> DevCluster:
    return await controllers_cluster(control_plane, NS)


@pytest.fixture(scope="module")
def api(cluster: DevCluster) -> KubeClient:
    assert cluster.client is not None
    return cluster.client


def _gpus(pod: dict) -> str:
    return pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]


async def test_vllm_multinode_serves_as_one_gang(cluster, api, tmp_path):
    name = "vllm-llama-405b"
    await remove_job(api, NS, name)
    try:
        async with never_partly_bound(cluster, NS):
            applied = apply(cluster, EXAMPLES / "vcjob-vllm-multinode.yaml", tmp_path)  # unchanged
            job = await wait_phase(api, NS, name, "Running", timeout_s=90)
            pods = await running_pods(api, NS, name, 2)
        assert "service/vllm-llama-405b-api" in applied
        pg = await podgroup_of(api, job)
        assert (pg["spec"]["minMember"], pg["spec"]["minTaskMember"]) == (2, {"head": 1, "worker": 1})
        assert len({p["spec"]["nodeName"] for p in pods}) == 2, "8 GPUs each: one pod per node"
        assert [_gpus(p) for p in pods] == ["8", "8"]
        head = next(p for p in pods if p["metadata"]["name"] == f"{name}-head-0")
        worker = next(p for p in pods if p["metadata"]["name"] == f"{name}-worker-0")
        # the workers find the head by the svc plugin's DNS name
        hosts = (await api.get(CONFIG_MAPS, f"{name}-svc", NS))["data"]
        assert hosts["VC_HEAD_HOSTS"] == f"{name}-head-0.{name}" and hosts["VC_WORKER_NUM"] == "1"
        assert env_of(worker)["VC_HEAD_HOSTS"]["configMapKeyRef"]["key"] == "VC_HEAD_HOSTS"
        assert (head["spec"]["hostname"], head["spec"]["subdomain"]) == (f"{name}-head-0", name)
        # the API Service selects the head pod only
        api_svc = await api.get(SERVICES, f"{name}-api", NS)
        selector = api_svc["spec"]["selector"]
        assert all(head["metadata"]["labels"].get(k) == v for k, v in selector.items())
        assert any(worker["metadata"]["labels"].get(k) != v for k, v in selector.items())
        # lapilli schedule: the same pods place whole on two 8-GPU nodes, and not at all on one
        placed = schedule_offline(cluster, tmp_path, pods, pg, gpu_nodes=2)
        assert sorted(placed["binds"]) == sorted(f"{NS}/{p['metadata']['name']}" for p in pods)
        assert len(set(placed["binds"].values())) == 2
        assert schedule_offline(cluster, tmp_path, pods, pg, gpu_nodes=1)["binds"] == {}
    finally:
        await remove_job(api, NS, name)


async def test_llamafactory_fine_tuning_runs_torchrun_as_one_gang(cluster, api, tmp_path):
    name = "llamafactory-qwen2-5-sft"
    await remove_job(api, NS, name)
    try:
        async with never_partly_bound(cluster, NS):
            applied = apply(cluster, EXAMPLES / "vcjob-llamafactory-sft.yaml", tmp_path)  # unchanged
            job = await wait_phase(api, NS, name, "Running", timeout_s=90)
            pods = await running_pods(api, NS, name, 2)
        assert f"configmap/{name}" in applied
        assert set(job["spec"]["plugins"]) == {"pytorch", "svc"}  # the webhook adds svc for pytorch
        pg = await podgroup_of(api, job)
        assert (pg["spec"]["minMember"], pg["spec"]["minTaskMember"]) == (2, {"master": 1, "worker": 1})
        assert len({p["spec"]["nodeName"] for p in pods}) == 2
        by_name = {p["metadata"]["name"]: env_of(p) for p in pods}
        for pod, rank in ((f"{name}-master-0", "0"), (f"{name}-worker-0", "1")):
            env = by_name[pod]
            assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["WORLD_SIZE"], env["RANK"]) == (
                f"{name}-master-0.{name}", "29500", "2", rank), pod
        for pod in pods:
            config = next(v for v in pod["spec"]["volumes"] if v["name"] == "config")
            assert config["configMap"]["name"] == name
            assert "torchrun" in pod["spec"]["containers"][0]["args"][0]
        placed = schedule_offline(cluster, tmp_path, pods, pg, gpu_nodes=2)
        assert len(placed["binds"]) == 2 and len(set(placed["binds"].values())) == 2
        assert schedule_offline(cluster, tmp_path, pods, pg, gpu_nodes=1)["binds"] == {}
        # the master finishing completes the job
        cluster.kubectl("annotate", "pod", "-n", NS, f"{name}-master-0", "sim.lapilli.io/duration=0s",
                        "sim.lapilli.io/exit-code=0")
        await wait_phase(api, NS, name, "Completed", timeout_s=60)
    finally:
        await remove_job(api, NS, name)
