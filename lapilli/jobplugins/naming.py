"""How a Volcano Job names its pods and their DNS hosts, read defensively from the Job as a plain dict.

Mirrors `pkg/controllers/job/helpers` (`MakePodName`, `MakeDomainName`) and the host lists the svc, ssh, mpi
and tensorflow plugins build: pod `<job>-<task>-<i>`; host `<hostname>.<subdomain>` where hostname defaults to
the pod name and subdomain to the job name; a template with an explicit hostname yields one host only (every
replica would share it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lapilli.api.constants import BATCH_API_VERSION, JOB_KIND
from lapilli.meta import meta


@dataclass(frozen=True, slots=True)
class TaskShape:
    """The parts of a TaskSpec the plugins read."""

    name: str
    replicas: int
    hostname: str
    subdomain: str


@dataclass(frozen=True, slots=True)
class JobShape:
    """The parts of a Job the plugins read: identity, tasks in order, plugin arguments."""

    name: str
    namespace: str
    uid: str
    tasks: tuple[TaskShape, ...]
    plugins: Mapping[str, Sequence[object]]

    def task(self, name: str) -> TaskShape | None:
        return next((t for t in self.tasks if t.name == name), None)

    def total_replicas(self) -> int:
        return sum(t.replicas for t in self.tasks)


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def job_shape(job: Mapping[str, Any]) -> JobShape:
    """Read a Job dict; wrong-typed fields read as empty (the validating webhook reports them, not us)."""
    spec = _map(job.get("spec"))
    tasks = []
    raw_tasks = spec.get("tasks")
    for raw in raw_tasks if isinstance(raw_tasks, list) else []:
        task = _map(raw)
        pod_spec = _map(_map(task.get("template")).get("spec"))
        tasks.append(
            TaskShape(
                name=_str(task.get("name")),
                replicas=_int(task.get("replicas")),
                hostname=_str(pod_spec.get("hostname")),
                subdomain=_str(pod_spec.get("subdomain")),
            )
        )
    plugins = {str(k): (v if isinstance(v, list) else []) for k, v in _map(spec.get("plugins")).items()}
    return JobShape(
        name=_str(meta(job).get("name")),
        namespace=_str(meta(job).get("namespace")),
        uid=_str(meta(job).get("uid")),
        tasks=tuple(tasks),
        plugins=plugins,
    )


def make_pod_name(job_name: str, task_name: str, index: int) -> str:
    """`helpers.MakePodName`: `<job>-<task>-<index>`."""
    return f"{job_name}-{task_name}-{index}"


def task_host(job: JobShape, task: TaskShape, index: int) -> str:
    """`helpers.MakeDomainName`: `<hostname>.<subdomain>` of replica `index` of `task`."""
    hostname = task.hostname or make_pod_name(job.name, task.name, index)
    return f"{hostname}.{task.subdomain or job.name}"


def task_hosts(job: JobShape, task: TaskShape) -> list[str]:
    """Every replica's host; a template with an explicit hostname contributes one host."""
    if task.hostname:
        return [task_host(job, task, 0)] if task.replicas > 0 else []
    return [task_host(job, task, i) for i in range(task.replicas)]


def env_key(task_name: str) -> str:
    """The svc plugin's key form of a task name: `-` becomes `_` (upper-cased for env names by callers)."""
    return task_name.replace("-", "_")


def owner_reference(job: JobShape) -> dict[str, Any]:
    """`metav1.NewControllerRef(job, JobKind)` for objects a plugin creates."""
    return {
        "apiVersion": BATCH_API_VERSION,
        "kind": JOB_KIND,
        "name": job.name,
        "uid": job.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def object_meta(job: JobShape, name: str) -> dict[str, Any]:
    """Metadata for a plugin-owned object: same namespace, owned by the Job when its uid is known."""
    meta: dict[str, Any] = {"name": name, "namespace": job.namespace}
    if job.uid:
        meta["ownerReferences"] = [owner_reference(job)]
    return meta
