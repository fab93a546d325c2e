"""task-topology on the real control plane (issue 13): with examples/scheduler-conf-task-topology.yaml, a
TensorFlow-style Volcano Job of 2 ps + 4 workers carrying Volcano's task-topology annotations lands packed on
one node (it needs exactly one node's 16 CPU), through kube-scheduler's filter and the extender's gang bind.

No manifest in examples/ (nor in Volcano's own example/) carries these annotations, so the Job is written here as
Volcano's task-topology documentation does: the annotations on the Job, which its PodGroup inherits. This module
starts its own control plane (3 nodes of 16 CPU, no GPU) because the conf is not the one the other e2e tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from assembly.dev import ClusterSpec, DevCluster, NodeShape, find_binaries
from tests.e2e.test_controller_helpers import apply, job_pods, wait_phase

CONF = Path(__file__).resolve().parents[2] / "examples" / "scheduler-conf-task-topology.yaml"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def topology(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevCluster]:
    spec = ClusterSpec(
        state_dir=tmp_path_factory.mktemp("task-topology"), nodes=3,
        shape=NodeShape(cpu="16", memory="64Gi", gpus=0), kubelet="inprocess", tie_to_parent=True,
        heartbeat_s=10.0, extender=True, serve_args=("--scheduler-conf", str(CONF)),
    )
    cluster = DevCluster(spec, find_binaries())
    await cluster.up()
    try:
        await cluster.ensure_namespace("ml")
        yield cluster
    finally:
        await cluster.down()


def _task(name: str, replicas: int, cpu: str, memory: str) -> dict[str, Any]:
    container = {"name": "tensorflow", "image": "tensorflow/tensorflow:2.15.0",
                 "command": ["python", "/opt/train.py", f"--job_name={name}"],
                 "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}}
    return {"name": name, "replicas": replicas, "template": {"spec": {"containers": [container],
                                                                      "restartPolicy": "Never"}}}


def _tf_job() -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "tf-topology", "namespace": "ml",
                     "annotations": {"volcano.sh/task-topology-affinity": "ps,worker",
                                     "volcano.sh/task-topology-task-order": "ps,worker"}},
        "spec": {"minAvailable": 6, "schedulerName": "volcano", "queue": "default",
                 "plugins": {"env": [], "svc": []},
                 "tasks": [_task("ps", 2, "2", "4Gi"), _task("worker", 4, "3", "8Gi")]},
    }


async def test_a_ps_worker_job_with_task_topology_lands_packed_on_one_node(topology: DevCluster, tmp_path):
    client = topology.client
    assert client is not None
    apply(topology, _tf_job(), tmp_path)
    await wait_phase(client, "ml", "tf-topology", "Running", timeout_s=120)
    pods = await job_pods(client, "ml", "tf-topology")
    nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}
    assert len(nodes) == 6 and None not in nodes.values(), nodes
    assert len(set(nodes.values())) == 1, nodes
