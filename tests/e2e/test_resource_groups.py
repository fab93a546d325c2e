"""Resource groups (`lapilli serve --admission-conf`) on the real control plane: pods created with kubectl, of no
Job and of no scheduler in particular, get their group's nodeSelector, tolerations and schedulerName from the
mutating pod webhook (which then sees every pod), land on the group's nodes, and a changed file applies to the
next pod."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from assembly.dev import ClusterSpec, DevCluster, NodeShape, find_binaries
from lapilli.kube.resources import NODES, PODS
from tests.e2e.test_controller_helpers import eventually

CONF = """
resourceGroups:
- resourceGroup: management
  object: {key: namespace, value: [mng]}
  tolerations: [{key: dedicated, operator: Equal, value: management, effect: NoSchedule}]
  labels: {example.com/pool: management}
- resourceGroup: gpu
  schedulerName: volcano
  labels: {example.com/pool: gpu}
"""


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def grouped(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[DevCluster, Path]]:
    state = tmp_path_factory.mktemp("resource-groups")
    conf = state / "admission.conf"
    conf.write_text(CONF)
    spec = ClusterSpec(state_dir=state / "cluster", nodes=3, shape=NodeShape(cpu="8", memory="32Gi", gpus=1),
                       kubelet="inprocess", tie_to_parent=True, heartbeat_s=10.0, extender=True,
                       serve_args=("--admission-conf", str(conf)))
    cluster = DevCluster(spec, find_binaries())
    await cluster.up()
    try:
        assert cluster.client is not None
        nodes = sorted(n["metadata"]["name"] for n in (await cluster.client.list(NODES)).items)
        for node, pool in zip(nodes, ("management", "gpu", "other"), strict=False):
            await cluster.client.patch(NODES, node, {"metadata": {"labels": {"example.com/pool": pool}}})
        await cluster.client.patch(NODES, nodes[0], {"spec": {"taints": [
            {"key": "dedicated", "value": "management", "effect": "NoSchedule"}]}})
        for namespace in ("mng", "lab"):
            await cluster.ensure_namespace(namespace)
        yield cluster, conf
    finally:
        await cluster.down()


def plain_pod(name: str, namespace: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}},
            "spec": {"containers": [{"name": "main", "image": "busybox",
                                     "resources": {"requests": {"cpu": "100m"}}}]}}


async def create(cluster: DevCluster, tmp_path: Path, pod: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / f"{pod['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(pod))
    cluster.kubectl("create", "-f", str(path))
    assert cluster.client is not None
    return await cluster.client.get(PODS, pod["metadata"]["name"], pod["metadata"]["namespace"])


async def node_of(cluster: DevCluster, name: str, namespace: str) -> str | None:
    assert cluster.client is not None
    return (await cluster.client.get(PODS, name, namespace))["spec"].get("nodeName")


async def test_a_namespace_group_steers_a_plain_pod_to_its_tainted_nodes(grouped, tmp_path):
    cluster, _ = grouped
    stored = await create(cluster, tmp_path, plain_pod("web", "mng"))
    assert stored["spec"]["nodeSelector"] == {"example.com/pool": "management"}
    assert {"key": "dedicated", "operator": "Equal", "value": "management",
            "effect": "NoSchedule"} in stored["spec"]["tolerations"]
    assert stored["spec"]["schedulerName"] == "default-scheduler"  # the group names none
    node = await eventually(lambda: node_of(cluster, "web", "mng"), 60, "the pod placed")
    assert node == sorted(n["metadata"]["name"] for n in (await cluster.client.list(NODES)).items)[0]


async def test_an_annotated_pod_joins_its_group_and_a_changed_file_applies_to_the_next(grouped, tmp_path):
    cluster, conf = grouped
    stored = await create(cluster, tmp_path, plain_pod("train", "lab", {"volcano.sh/resource-group": "gpu"}))
    assert stored["spec"]["nodeSelector"] == {"example.com/pool": "gpu"}
    assert stored["spec"]["schedulerName"] == "volcano"
    assert await eventually(lambda: node_of(cluster, "train", "lab"), 60, "placed by Volcano's scheduler")
    assert (await create(cluster, tmp_path, plain_pod("other", "lab")))["spec"].get("nodeSelector") is None

    conf.write_text(CONF.replace("example.com/pool: gpu}", "example.com/pool: other}"))
    os.utime(conf, (1, 1))  # a modification time the service has not seen, whatever the file system's resolution
    again = await create(cluster, tmp_path, plain_pod("train-2", "lab", {"volcano.sh/resource-group": "gpu"}))
    assert again["spec"]["nodeSelector"] == {"example.com/pool": "other"}
