"""Shared GPUs on the real control plane (issue 18): `lapilli dev up --vgpu`'s cluster (nodes registering vGPU cards
through the node annotation, every fourth node MIG; the device config ConfigMap; the service running
examples/scheduler-conf-vgpu.yaml), kube-scheduler 1.20 calling the extender, and the simulated kubelet checking
every started pod's cards as the vGPU device plugin would (a wrong assignment fails the pod, so none may).

Nodes: sim-node-000..002 with 3 × A100-80GB (81,920 MB, hami-core, split 10), sim-node-003 with 3 × A100-40GB in
MIG mode. Pods are pinned to a node with a nodeSelector, so each case is about cards, not about which node; the
totals in allocatable never bind before the cards do (the gang case leaves room for all four in the totals)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from assembly.dev import ClusterSpec, DevCluster, NodeShape, find_binaries
from lapilli.devices.assign import decode_pod_devices
from lapilli.kube import KubeClient
from lapilli.kube.resources import PODGROUPS, PODS, VC_JOBS
from tests.e2e.faults.helpers import service_pid, service_ready
from tests.e2e.test_controller_helpers import eventually, lapilli

NS = "ml"
CARD_MB = 81920


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def vgpu(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevCluster]:
    spec = ClusterSpec(
        state_dir=tmp_path_factory.mktemp("vgpu"), nodes=4, shape=NodeShape(cpu="32", memory="256Gi", gpus=3),
        kubelet="inprocess", tie_to_parent=True, heartbeat_s=10.0, extender=True, vgpu=True,
    )
    cluster = DevCluster(spec, find_binaries())
    await cluster.up()
    try:
        await cluster.ensure_namespace(NS)
        yield cluster
    finally:
        await cluster.down()


def _api(cluster: DevCluster) -> KubeClient:
    assert cluster.client is not None
    return cluster.client


def vgpu_pod(name: str, memory: int, node: str, annotations: dict[str, str] | None = None,
             cores: int = 0) -> dict[str, Any]:
    limits = {"cpu": "1", "memory": "1Gi", "volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": str(memory)}
    if cores:
        limits["volcano.sh/vgpu-cores"] = str(cores)
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "annotations": annotations or {}},
        "spec": {"schedulerName": "volcano", "nodeSelector": {"kubernetes.io/hostname": node},
                 "containers": [{"name": "c", "image": "cuda:12", "resources": {"limits": limits}}]},
    }


async def create(cluster: DevCluster, *pods: dict[str, Any]) -> None:
    for pod in pods:
        await _api(cluster).create(PODS, pod, NS)


async def running(cluster: DevCluster, names: list[str], timeout_s: float = 120) -> dict[str, dict[str, Any]]:
    """The pods once all are Running (failing at once if any is refused by the simulated device plugin)."""
    async def check() -> dict[str, dict[str, Any]] | None:
        pods = {n: await _api(cluster).get(PODS, n, NS) for n in names}
        failed = {n: p["status"].get("message") for n, p in pods.items() if p["status"].get("phase") == "Failed"}
        assert not failed, f"refused by the simulated vGPU device plugin: {failed}"
        return pods if all(p["status"].get("phase") == "Running" for p in pods.values()) else None

    return await eventually(check, timeout_s, f"{names} Running")


def cards(pod: dict[str, Any]) -> list[tuple[str, int]]:
    devices, problems = decode_pod_devices(pod["metadata"]["annotations"]["volcano.sh/vgpu-ids-new"])
    assert not problems
    return [(use.uuid, use.memory) for container in devices for use in container]


async def card_use(cluster: DevCluster, node: str) -> Counter[str]:
    """MB in use per card of `node`, from every live pod's assignment there."""
    used: Counter[str] = Counter()
    for pod in (await _api(cluster).list(PODS, NS)).items:
        if pod["spec"].get("nodeName") == node and pod["status"].get("phase") in ("Pending", "Running"):
            for uuid, memory in cards(pod):
                used[uuid] += memory
    return used


async def test_four_20gb_pods_share_one_card_and_a_fifth_goes_to_another(vgpu: DevCluster):
    names = [f"share-{i}" for i in range(5)]
    for name in names:  # one after another: binpack fills the card in use before the next
        await create(vgpu, vgpu_pod(name, 20480, "sim-node-000"))
        await running(vgpu, [name])
    pods = await running(vgpu, names)
    given = {n: cards(p) for n, p in pods.items()}
    assert all(len(c) == 1 and c[0][1] == 20480 for c in given.values()), given
    per_card = Counter(c[0][0] for c in given.values())
    assert sorted(per_card.values()) == [1, 4], given
    for pod in pods.values():
        notes = pod["metadata"]["annotations"]
        assert notes["volcano.sh/vgpu-node"] == "sim-node-000" and notes["volcano.sh/bind-phase"] == "allocating"
    assert max((await card_use(vgpu, "sim-node-000")).values()) == CARD_MB


def gang_job(name: str, replicas: int, memory: int, node: str) -> dict[str, Any]:
    pod = vgpu_pod("x", memory, node)
    template = {"spec": {**pod["spec"], "restartPolicy": "Never"}}
    template["spec"].pop("schedulerName")
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": NS},
            "spec": {"minAvailable": replicas, "schedulerName": "volcano", "queue": "default",
                     "tasks": [{"name": "worker", "replicas": replicas, "template": template}]}}


async def job_pods(cluster: DevCluster, job: str) -> list[dict[str, Any]]:
    return [p for p in (await _api(cluster).list(PODS, NS)).items
            if (p["metadata"].get("annotations") or {}).get("volcano.sh/job-name") == job]


async def test_a_gang_of_four_40gb_waits_whole_while_only_three_slices_are_free(vgpu: DevCluster):
    """sim-node-001's three 80 GB cards: one taken whole by a pod asking all its cores, one holding 30 GB: three
    40 GB slices are free (one on the second card, two on the third), while the node's totals have room for all
    four (241 of 245 GB). The gang waits whole; once the whole-card pod goes, it runs whole."""
    await create(vgpu, vgpu_pod("exclusive", 1024, "sim-node-001", cores=100))
    await running(vgpu, ["exclusive"])
    await create(vgpu, vgpu_pod("partial", 30720, "sim-node-001"))
    await running(vgpu, ["partial"])
    await _api(vgpu).create(VC_JOBS, gang_job("gang4", 4, 40960, "sim-node-001"), NS)
    await eventually(lambda: _pods_exist(vgpu, "gang4", 4), 60, "the gang's four pods exist")
    await asyncio.sleep(8)  # several sessions and kube-scheduler passes: nothing of the gang may bind
    assert [p["metadata"]["name"] for p in await job_pods(vgpu, "gang4") if p["spec"].get("nodeName")] == []
    await _api(vgpu).delete(PODS, "exclusive", NS)
    names = [p["metadata"]["name"] for p in await job_pods(vgpu, "gang4")]
    pods = await running(vgpu, names)
    assert all(memory == 40960 for p in pods.values() for _, memory in cards(p))
    assert max((await card_use(vgpu, "sim-node-001")).values()) <= CARD_MB
    group = (await job_pods(vgpu, "gang4"))[0]["metadata"]["annotations"]["scheduling.k8s.io/group-name"]

    async def group_running() -> bool:
        return (await _api(vgpu).get(PODGROUPS, group, NS))["status"].get("phase") == "Running"

    await eventually(group_running, 60, "the gang's PodGroup Running")


async def _pods_exist(cluster: DevCluster, job: str, count: int) -> bool:
    return len(await job_pods(cluster, job)) == count


async def test_a_mig_node_gives_a_3gb_ask_a_5gb_slice(vgpu: DevCluster):
    await create(vgpu, vgpu_pod("mig-small", 3000, "sim-node-003", {"volcano.sh/vgpu-mode": "mig"}))
    pod = (await running(vgpu, ["mig-small"]))["mig-small"]
    ((uuid, memory),) = cards(pod)
    assert memory == 5120 and uuid.startswith("GPU-sim-node-003-") and uuid.endswith("[group1-0]"), uuid


async def test_a_restarted_service_keeps_every_assignment(vgpu: DevCluster):
    """After test_four_…: sim-node-000's cards hold 80 GB, 20 GB and nothing. The service is killed and comes back
    with nothing but the cluster: three more 20 GB pods go to the card with 60 GB free (binpack), a fourth to the
    empty card; no card is ever given more than it has (the simulated device plugin would fail the pod)."""
    before = await card_use(vgpu, "sim-node-000")
    assert sorted(before.values()) == [20480, CARD_MB], before
    old = service_pid(vgpu)
    os.kill(old, signal.SIGKILL)
    await service_ready(vgpu, not_pid=old)
    names = [f"after-{i}" for i in range(3)]
    for name in names:
        await create(vgpu, vgpu_pod(name, 20480, "sim-node-000"))
        await running(vgpu, [name])
    pods = await running(vgpu, names)
    roomy = next(uuid for uuid, used in before.items() if used < CARD_MB)
    assert {cards(p)[0][0] for p in pods.values()} == {roomy}
    await create(vgpu, vgpu_pod("after-3", 20480, "sim-node-000"))
    last = (await running(vgpu, ["after-3"]))["after-3"]
    assert cards(last)[0][0] not in before
    assert sorted((await card_use(vgpu, "sim-node-000")).values()) == [20480, CARD_MB, CARD_MB]


async def test_job_why_names_the_card_that_comes_closest_and_queue_list_counts_gpu_memory(vgpu: DevCluster):
    """A one-pod Job pinned to sim-node-002 asking 84 GB of one card: no card has that much. `lapilli job why` says
    so and names the closest card; `lapilli queue list` shows the GPU memory the default queue's pods' cards hold."""
    await _api(vgpu).create(VC_JOBS, gang_job("toobig", 1, 86016, "sim-node-002"), NS)
    await eventually(lambda: _pods_exist(vgpu, "toobig", 1), 60, "the job's pod exists")

    def why() -> str:
        return lapilli(vgpu, "job", "why", "-n", NS, "toobig").stdout

    text = await eventually(lambda: _async(why() if "no card with 84 GB free" in why() else ""), 60, "job why")
    assert "best sim-node-002 card 0 with 80 GB" in text, text
    listed = lapilli(vgpu, "queue", "list").stdout
    assert "vGPU mem" in listed.splitlines()[0], listed
    default = next(line for line in listed.splitlines() if line.startswith("default "))
    assert default.endswith(" GB") and float(default.split()[-2]) > 0, listed


async def _async(value: str) -> str:
    return value
