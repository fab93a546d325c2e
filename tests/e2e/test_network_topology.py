"""Network-topology-aware scheduling on the real control plane (issue 17): kube-apiserver, kube-scheduler with the
extender, the Lapilli service running examples/scheduler-conf-network-topology.yaml, 8 simulated nodes of 4 CPU and
HyperNodes the test creates (leaf-a and leaf-b of 4 nodes each under spine, tier 1 and 2). Each pod asks 3 CPU, so a
node holds one, a leaf four.

* a hard tier-1 gang that fits a leaf lands under one leaf; one larger than any leaf waits whole (never split,
  over several sessions);
* a soft gang takes one leaf when one has room, and spreads across the spine when none has;
* a partitioned Job (task partitionPolicy, which the job controller turns into the PodGroup's subGroupPolicy with
  `volcano.sh/partition-id` labels) gets each partition of two pods inside one leaf.

Volcano's own e2e tests of these cases are test/e2e/hypernode/network_topology_test.go (1.1–3.1) and
network_topology_task_test.go (4.1–5.6); this module covers their shapes on Lapilli's control plane."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from assembly.dev import ClusterSpec, DevCluster, NodeShape, find_binaries
from assembly.dev.nodes import node_name
from lapilli.kube.errors import NotFound
from lapilli.kube.resources import HYPERNODES
from tests.e2e.metrics import sessions_run
from tests.e2e.test_controller_helpers import apply, eventually, job_pods, remove_job, running_pods, wait_phase

CONF = Path(__file__).resolve().parents[2] / "examples" / "scheduler-conf-network-topology.yaml"
NODES = [node_name(i, 8) for i in range(8)]
LEAVES = {"leaf-a": NODES[:4], "leaf-b": NODES[4:]}
NAMESPACE = "topo"


def _hypernode(name: str, tier: int, kind: str, members: list[str]) -> dict[str, Any]:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "tierName": "leaf" if tier == 1 else "spine",
                     "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members]}}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevCluster]:
    spec = ClusterSpec(
        state_dir=tmp_path_factory.mktemp("network-topology"), nodes=8,
        shape=NodeShape(cpu="4", memory="16Gi", gpus=0), kubelet="inprocess", tie_to_parent=True,
        heartbeat_s=10.0, extender=True, serve_args=("--scheduler-conf", str(CONF)),
    )
    dev = DevCluster(spec, find_binaries())
    await dev.up()
    try:
        await dev.ensure_namespace(NAMESPACE)
        assert dev.client is not None
        for leaf, nodes in LEAVES.items():
            await dev.client.create(HYPERNODES, _hypernode(leaf, 1, "Node", nodes))
        await dev.client.create(HYPERNODES, _hypernode("spine", 2, "HyperNode", list(LEAVES)))
        yield dev
    finally:
        await dev.down()


def _job(name: str, replicas: int, topology: dict[str, Any] | None = None,
         partitions: tuple[int, int] | None = None) -> dict[str, Any]:
    container = {"name": "worker", "image": "busybox", "command": ["sleep", "3600"],
                 "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}
    task: dict[str, Any] = {"name": "worker", "replicas": replicas,
                            "template": {"spec": {"containers": [container], "restartPolicy": "Never"}}}
    spec: dict[str, Any] = {"minAvailable": replicas, "schedulerName": "volcano", "queue": "default",
                            "tasks": [task]}
    if partitions is not None:
        total, size = partitions
        task["partitionPolicy"] = {"totalPartitions": total, "partitionSize": size, "minPartitions": total,
                                   "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}
    if topology is not None:
        spec["networkTopology"] = topology
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}


def _leaves_of(pods: list[dict[str, Any]]) -> set[str]:
    return {leaf for p in pods for leaf, nodes in LEAVES.items() if p["spec"].get("nodeName") in nodes}


async def _removed(cluster: DevCluster, *names: str) -> None:
    assert cluster.client is not None
    for name in names:
        with contextlib.suppress(NotFound):
            await remove_job(cluster.client, NAMESPACE, name, timeout_s=120)


async def test_a_hard_tier_1_gang_lands_under_one_leaf(cluster: DevCluster, tmp_path: Path) -> None:
    client = cluster.client
    assert client is not None
    apply(cluster, _job("hard-3", 3, {"mode": "hard", "highestTierAllowed": 1}), tmp_path)
    await wait_phase(client, NAMESPACE, "hard-3", "Running", timeout_s=120)
    pods = await running_pods(client, NAMESPACE, "hard-3", 3, timeout_s=60)
    assert len(_leaves_of(pods)) == 1, {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}
    await _removed(cluster, "hard-3")


async def test_a_hard_gang_larger_than_any_leaf_waits_whole(cluster: DevCluster, tmp_path: Path) -> None:
    client = cluster.client
    assert client is not None
    apply(cluster, _job("hard-5", 5, {"mode": "hard", "highestTierAllowed": 1}), tmp_path)

    async def pods_exist() -> list[dict[str, Any]] | None:
        pods = await job_pods(client, NAMESPACE, "hard-5")
        return pods if len(pods) == 5 else None

    await eventually(pods_exist, 120, "the 5 pods of topo/hard-5 created")
    start = await sessions_run(cluster)
    await eventually(lambda: _sessions_after(cluster, start + 5), 120, "five more scheduling sessions")
    bound = [p["metadata"]["name"] for p in await job_pods(client, NAMESPACE, "hard-5") if p["spec"].get("nodeName")]
    assert bound == [], bound  # 8 free nodes, but no leaf holds 5: the gang waits whole, never split
    await _removed(cluster, "hard-5")


async def _sessions_after(cluster: DevCluster, count: float) -> bool:
    return await sessions_run(cluster) >= count


async def test_a_soft_gang_takes_a_leaf_when_one_has_room_and_spreads_when_none_has(
        cluster: DevCluster, tmp_path: Path) -> None:
    client = cluster.client
    assert client is not None
    apply(cluster, _job("soft-4", 4, {"mode": "soft"}), tmp_path)
    pods = await running_pods(client, NAMESPACE, "soft-4", 4, timeout_s=120)
    assert len(_leaves_of(pods)) == 1, {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}
    await _removed(cluster, "soft-4")

    apply(cluster, _job("soft-6", 6, {"mode": "soft"}), tmp_path)
    pods = await running_pods(client, NAMESPACE, "soft-6", 6, timeout_s=120)
    assert _leaves_of(pods) == set(LEAVES)  # no leaf holds 6: the whole spine
    await _removed(cluster, "soft-6")


async def test_a_partitioned_job_puts_each_partition_in_one_leaf(cluster: DevCluster, tmp_path: Path) -> None:
    client = cluster.client
    assert client is not None
    apply(cluster, _job("parted", 6, {"mode": "hard", "highestTierAllowed": 2}, partitions=(3, 2)), tmp_path)
    pods = await running_pods(client, NAMESPACE, "parted", 6, timeout_s=120)
    by_partition: dict[str, set[str]] = {}
    for pod in pods:
        partition = (pod["metadata"].get("labels") or {}).get("volcano.sh/partition-id", "")
        by_partition.setdefault(partition, set()).update(_leaves_of([pod]))
    assert sorted(by_partition) == ["0", "1", "2"], by_partition
    assert all(len(leaves) == 1 for leaves in by_partition.values()), by_partition
    await _removed(cluster, "parted")
