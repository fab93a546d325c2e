"""The pods of a Volcano Job: `<job>-<task>-<index>` rendered from the task template, then the job plugins.

Mirrors `createJobPod` in `job_controller_util.go` and `pluginOnPodCreate` (reference §3.4): the template's
labels, annotations and spec; the Job as controller owner; the Job's scheduler and priority class where the
template names none; one PVC volume per `spec.volumes` entry mounted into every container; Volcano's
annotations and labels (group, job, task, index, queue, version, retry count, template, topology, partition)
and a few scheduling hints copied from the Job. Then `lapilli.jobplugins.apply_plugins` adds what the env, svc,
ssh, pytorch, mpi and tensorflow plugins give the pod — the one implementation the pod mutator uses too.

An extended resource (`nvidia.com/gpu`) requested without a limit gets its request as limit: Kubernetes refuses
such a pod ("Limit must be set for non overcommitable resources"), and examples written for Volcano do ask that
way, so their pods could otherwise never be created.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from typing import Any

from controller.jobs.podgroup import podgroup_name
from controller.quota import is_extended
from lapilli.api import Job, TaskSpec
from lapilli.api.constants import (
    COOLDOWN_TIME_KEY,
    DEFAULT_TASK_SPEC,
    GROUP_NAME_ANNOTATION,
    JDB_MAX_UNAVAILABLE_KEY,
    JDB_MIN_AVAILABLE_KEY,
    JOB_FORWARDING_KEY,
    JOB_NAME_KEY,
    JOB_NAMESPACE_KEY,
    JOB_QUEUE_KEY,
    JOB_RETRY_COUNT_KEY,
    JOB_VERSION_KEY,
    NUMA_POLICY_KEY,
    PARTITION_ID_KEY,
    PREEMPTABLE_KEY,
    REVOCABLE_ZONE_KEY,
    TASK_INDEX_KEY,
    TASK_SPEC_KEY,
    TEMPLATE_UID_KEY,
)
from lapilli.jobplugins import apply_plugins, make_pod_name
from lapilli.jobplugins.naming import job_shape, owner_reference
from lapilli.meta import annotations_of, labels_of

_ANNOTATIONS_FROM_JOB = (PREEMPTABLE_KEY, COOLDOWN_TIME_KEY, REVOCABLE_ZONE_KEY)
_LABELS_FROM_JOB = (PREEMPTABLE_KEY, COOLDOWN_TIME_KEY)


def pvc_volume_name(job_name: str, claim: str) -> str:
    """`<job>-<12 chars>`: Volcano draws the 12 chars at random; a digest of the claim keeps re-renders equal."""
    return f"{job_name}-{hashlib.sha256(claim.encode()).hexdigest()[:12]}"


def _add_volumes(pod: dict[str, Any], job: Job) -> None:
    spec = pod["spec"]
    seen: set[str] = set()
    for volume in job.spec.volumes:
        claim = volume.volume_claim_name
        if claim in seen:
            continue  # a duplicate claim is refused by validation; never mount one twice
        seen.add(claim)
        name = pvc_volume_name(job.name, claim)
        spec.setdefault("volumes", []).append({"name": name, "persistentVolumeClaim": {"claimName": claim}})
        for container in spec.get("containers") or []:
            container.setdefault("volumeMounts", []).append({"name": name, "mountPath": volume.mount_path})


def _keys(pod: dict[str, Any], job: Job, task: TaskSpec, index: int, forwarding: bool) -> None:
    meta = pod["metadata"]
    notes: dict[str, str] = meta.setdefault("annotations", {})
    labels: dict[str, str] = meta.setdefault("labels", {})
    task_key = task.name or DEFAULT_TASK_SPEC
    notes.update({
        TASK_INDEX_KEY: str(index), TASK_SPEC_KEY: task_key,
        GROUP_NAME_ANNOTATION: podgroup_name(job.name, job.metadata.uid or ""), JOB_NAME_KEY: job.name,
        JOB_QUEUE_KEY: job.spec.queue, JOB_VERSION_KEY: str(job.status.version),
        TEMPLATE_UID_KEY: f"{job.name}-{task.name}", JOB_RETRY_COUNT_KEY: str(job.status.retry_count),
    })
    if task.topology_policy is not None:
        notes[NUMA_POLICY_KEY] = task.topology_policy.value
    job_notes, job_labels = job.metadata.annotations, job.metadata.labels
    notes.update({k: job_notes[k] for k in _ANNOTATIONS_FROM_JOB if k in job_notes})
    budget = JDB_MIN_AVAILABLE_KEY if JDB_MIN_AVAILABLE_KEY in job_notes else JDB_MAX_UNAVAILABLE_KEY
    if budget in job_notes:
        notes[budget] = job_notes[budget]
    labels.update({
        TASK_INDEX_KEY: str(index), JOB_NAME_KEY: job.name, TASK_SPEC_KEY: task_key,
        JOB_NAMESPACE_KEY: job.namespace, JOB_QUEUE_KEY: job.spec.queue,
    })
    labels.update({k: job_labels[k] for k in _LABELS_FROM_JOB if k in job_labels})
    if forwarding:
        notes[JOB_FORWARDING_KEY] = labels[JOB_FORWARDING_KEY] = "true"
    if task.partition_policy is not None:
        size = task.partition_policy.partition_size
        labels[PARTITION_ID_KEY] = str(index // size if size > 0 else 0)


def render_pod(
    job: Job, job_doc: Mapping[str, Any], task: TaskSpec, index: int, *, forwarding: bool = False,
) -> dict[str, Any]:
    """Replica `index` of `task`, ready to create (`job_doc`: the same Job as a dict, for the plugins)."""
    template = copy.deepcopy(task.template)
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": make_pod_name(job.name, task.name, index), "namespace": job.namespace,
            "ownerReferences": [owner_reference(job_shape(job_doc))],
            "labels": dict(labels_of(template)), "annotations": dict(annotations_of(template)),
        },
        "spec": template.get("spec") or {},
    }
    spec = pod["spec"]
    if not spec.get("schedulerName") and job.spec.scheduler_name:
        spec["schedulerName"] = job.spec.scheduler_name
    if not spec.get("priorityClassName") and job.spec.priority_class_name:
        spec["priorityClassName"] = job.spec.priority_class_name
    _add_volumes(pod, job)
    _limit_extended_resources(spec)
    _keys(pod, job, task, index, forwarding)
    return apply_plugins(job_doc, task.name, index, pod)


def _limit_extended_resources(spec: dict[str, Any]) -> None:
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        missing = {k: v for k, v in requests.items() if is_extended(k) and k not in (resources.get("limits") or {})}
        if missing:
            container["resources"] = {**resources, "limits": {**(resources.get("limits") or {}), **missing}}
