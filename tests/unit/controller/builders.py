"""Volcano Jobs and pods as the controller sees them: builders for the controller's unit tests (no tests here)."""

from __future__ import annotations

import copy
from typing import Any

from lapilli.api import Job

UID = "11111111-2222-3333-4444-555555555555"


def container(cpu: str = "1", memory: str = "1Gi", **extra: Any) -> dict[str, Any]:
    return {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": memory}}, **extra}


def task(name: str, replicas: int, **fields: Any) -> dict[str, Any]:
    spec = fields.pop("pod_spec", None) or {"containers": [container()], "restartPolicy": "Never"}
    return {"name": name, "replicas": replicas, "template": {"spec": spec}, **fields}


def job_doc(*tasks: dict[str, Any], name: str = "job1", namespace: str = "ns1", status: dict | None = None,
            **spec: Any) -> dict[str, Any]:
    tasks = tasks or (task("worker", 2),)
    spec.setdefault("minAvailable", sum(t.get("minAvailable", t["replicas"]) for t in tasks))
    spec.setdefault("schedulerName", "volcano")
    spec.setdefault("queue", "default")
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "uid": UID, "resourceVersion": "10",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"tasks": list(tasks), **spec},
        "status": copy.deepcopy(status or {}),
    }


def job(*tasks: dict[str, Any], **kw: Any) -> Job:
    return Job.from_wire(job_doc(*tasks, **kw))


def pod(job_name: str, task_name: str, index: int, phase: str = "Running", *, version: int = 0,
        namespace: str = "ns1", uid: str | None = None, owner_uid: str = UID, **meta: Any) -> dict[str, Any]:
    name = f"{job_name}-{task_name}-{index}"
    notes = {"volcano.sh/job-name": job_name, "volcano.sh/task-spec": task_name,
             "volcano.sh/task-index": str(index), "volcano.sh/job-version": str(version), **meta.pop("notes", {})}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": namespace, "uid": uid or f"uid-{name}", "resourceVersion": "5",
            "annotations": notes, "labels": meta.pop("labels", {}),
            "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": job_name,
                                 "uid": owner_uid, "controller": True}],
            **meta,
        },
        "spec": {"containers": [container()]},
        "status": {"phase": phase, "containerStatuses": [{"name": "main", "ready": phase == "Running",
                                                          "restartCount": 0, "state": {}}]},
    }
