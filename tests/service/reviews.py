"""Builders of Volcano objects and AdmissionReviews shared by the webhook's unit, service and e2e tests."""

from __future__ import annotations

import copy
import itertools
from typing import Any

_uids = itertools.count(1)

KINDS = {
    "Job": ("batch.volcano.sh", "v1alpha1", "jobs"),
    "Queue": ("scheduling.volcano.sh", "v1beta1", "queues"),
    "PodGroup": ("scheduling.volcano.sh", "v1beta1", "podgroups"),
    "Pod": ("", "v1", "pods"),
    "HyperNode": ("topology.volcano.sh", "v1alpha1", "hypernodes"),
}


def container(name: str = "main", cpu: str = "1", memory: str = "1Gi", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": "busybox:1.36",
        "resources": {"requests": {"cpu": cpu, "memory": memory}},
        **extra,
    }


def task(name: str | None, replicas: int, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "replicas": replicas,
        "template": {"spec": {"containers": [container()], "restartPolicy": "OnFailure"}},
    }
    if name is not None:
        out["name"] = name
    out.update(fields)
    return out


def job(name: str = "job1", *tasks: dict[str, Any], namespace: str = "ns1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"tasks": list(tasks) or [task("worker", 2)], **spec},
    }


def training_job(name: str = "train", namespace: str = "ml") -> dict[str, Any]:
    """A realistic 3-task PyTorch job (master, worker, evaluator) as users write it, before defaulting."""
    gpu = {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"}

    def pod(role: str, resources: dict[str, str]) -> dict[str, Any]:
        return {
            "metadata": {"labels": {"app": "train", "role": role}},
            "spec": {
                "restartPolicy": "OnFailure",
                "containers": [
                    {
                        "name": "pytorch",
                        "image": "registry.example.com/ml/pytorch-train:2.3.1-cuda12",
                        "command": ["torchrun", "--nnodes=5", "--nproc_per_node=1", "train.py"],
                        "env": [{"name": "EPOCHS", "value": "30"}, {"name": "DATA", "value": "/data/imagenet"}],
                        "resources": {"requests": resources, "limits": resources},
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    }
                ],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "imagenet"}}],
            },
        }

    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"team": "vision"}},
        "spec": {
            "queue": "ml-training",
            "plugins": {"pytorch": ["--master=master", "--worker=worker", "--port=23456"], "env": []},
            "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
            "tasks": [
                {
                    "name": "master",
                    "replicas": 1,
                    "template": pod("master", gpu),
                    "policies": [{"event": "TaskCompleted", "action": "CompleteJob"}],
                },
                {"name": "worker", "replicas": 3, "template": pod("worker", gpu)},
                {"name": "evaluator", "replicas": 1, "template": pod("evaluator", {"cpu": "4", "memory": "16Gi"})},
            ],
        },
    }


def queue(name: str, state: str | None = "Open", parent: str | None = None, **spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, **spec},
    }
    if parent is not None:
        out["spec"]["parent"] = parent
    if state is not None:
        out["status"] = {"state": state}
    return out


def podgroup(name: str = "pg1", queue_name: str = "default", namespace: str = "ns1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": 1, "queue": queue_name, **spec},
    }


def pod(
    name: str = "p1", namespace: str = "ns1", annotations: dict[str, str] | None = None, scheduler: str = "volcano"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations or {})},
        "spec": {"schedulerName": scheduler, "containers": [container()]},
    }


def review(
    obj: dict[str, Any] | None,
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
    kind: str | None = None,
    name: str | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    """An AdmissionReview v1 request for `obj` (or `old` on DELETE), as the apiserver sends it."""
    subject = obj if obj is not None else old
    assert subject is not None
    kind = kind or subject["kind"]
    group, version, plural = KINDS[kind]
    meta = subject.get("metadata") or {}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid or f"uid-{next(_uids)}",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": plural},
            "requestKind": {"group": group, "version": version, "kind": kind},
            "requestResource": {"group": group, "version": version, "resource": plural},
            "name": name if name is not None else meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "operation": operation,
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": copy.deepcopy(obj),
            "oldObject": copy.deepcopy(old),
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def hypernode(name: str, tier: int, *members: tuple[str, str], **selector: Any) -> dict[str, Any]:
    """A HyperNode whose `members` are (type, exact name); `selector` replaces the first member's selector."""
    entries: list[dict[str, Any]] = [{"type": kind, "selector": {"exactMatch": {"name": member}}}
                                     for kind, member in members]
    if selector:
        entries[0]["selector"] = selector
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": entries}}
