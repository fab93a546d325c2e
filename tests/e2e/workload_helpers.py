"""Helpers for the workload e2e tests: `lapilli schedule` over the objects a cluster made."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from assembly.dev import DevCluster
from tests.e2e.test_controller_helpers import lapilli


def _node(name: str, cpu: str, memory: str, gpus: int) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}}, "spec": {},
            "status": {"allocatable": allocatable, "conditions": [{"type": "Ready", "status": "True"}]}}


def _pending(pod: dict[str, Any]) -> dict[str, Any]:
    meta = pod["metadata"]
    spec = {k: v for k, v in pod["spec"].items() if k != "nodeName"}
    keep = {k: meta[k] for k in ("name", "namespace", "uid", "labels", "annotations") if k in meta}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": keep, "spec": spec, "status": {"phase": "Pending"}}


def _podgroup(pg: dict[str, Any]) -> dict[str, Any]:
    meta = {k: pg["metadata"][k] for k in ("name", "namespace", "annotations") if k in pg["metadata"]}
    return {"apiVersion": pg["apiVersion"], "kind": "PodGroup", "metadata": meta, "spec": pg["spec"],
            "status": {"phase": "Pending"}}


def schedule_offline(cluster: DevCluster, tmp_path: Path, pods: list[dict[str, Any]], podgroup: dict[str, Any],
                     gpu_nodes: int, gpus: int = 8, queues: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    """`lapilli schedule -o json` over these pods (as Pending) and PodGroup on `gpu_nodes` fresh nodes."""
    default = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"},
               "spec": {"weight": 1}, "status": {"state": "Open"}}
    docs = [_node(f"gpu-{i}", "64", "1Ti", gpus) for i in range(gpu_nodes)]
    docs += [default, *queues, _podgroup(podgroup), *(_pending(p) for p in pods)]
    path = tmp_path / f"snapshot-{podgroup['metadata']['name']}-{gpu_nodes}.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    done = lapilli(cluster, "schedule", str(path), "-o", "json")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result
