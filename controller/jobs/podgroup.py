"""The PodGroup of a Volcano Job: its name, the spec it should have, and the patch that gets it there.

Mirrors `createOrUpdatePodGroup` and `calcPGMinResources` in `job_controller_actions.go` (reference §3.3):
name `<job>-<uid>`, owned by the Job, the Job's labels and annotations, `minMember = spec.minAvailable`,
`minTaskMember` per task, queue, priority class, network topology (its mode and one bound: `highestTierAllowed`
when set, else `highestTierName`), one sub-group policy per partitioned task (`getSubGroupPolicy`: named after
the task, `subGroupSize` = `partitionSize`, `minSubGroups` = `minPartitions`, pods selected by
`volcano.sh/task-spec=<task>` and grouped by `volcano.sh/partition-id`, the partition's networkTopology as given)
and `minResources` — the quota usage of the first `minAvailable` pods, tasks taken by their pod template's
PriorityClass value, highest first (only the names a scheduler reads: see `quota.scheduler_view`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.quota import Usage, pod_quota_usage, same_resources, scaled, scheduler_view, to_resource_list, total
from lapilli.api import Job, NetworkTopologySpec, TaskSpec
from lapilli.api.constants import PARTITION_ID_KEY, PODGROUP_KIND, SCHEDULING_API_VERSION, TASK_SPEC_KEY
from lapilli.jobplugins.naming import job_shape, owner_reference


def podgroup_name(job_name: str, job_uid: str) -> str:
    """`<job>-<uid>` (Volcano ≥ 1.5; the UID keeps a re-created namesake from adopting an old gang)."""
    return f"{job_name}-{job_uid}"


def task_min_member(task: TaskSpec) -> int:
    if task.min_available is not None:
        return task.min_available
    policy = task.partition_policy
    if policy is not None and policy.min_partitions > 0:
        return policy.min_partitions * policy.partition_size
    return task.replicas


def _by_priority(job: Job, priorities: Mapping[str, int]) -> list[TaskSpec]:
    def value(task: TaskSpec) -> int:
        name = str((task.template.get("spec") or {}).get("priorityClassName") or "")
        return priorities.get(name, 0)

    return sorted(job.spec.tasks, key=value, reverse=True)  # stable: equal priorities keep spec order


def _usage(task: TaskSpec, count: int) -> Usage:
    return scaled(scheduler_view(pod_quota_usage(task.template.get("spec") or {})), count)


def min_resources(job: Job, priorities: Mapping[str, int]) -> dict[str, str]:
    """`calcPGMinResources`: what the first `minAvailable` pods need, by task priority."""
    tasks = _by_priority(job, priorities)
    need = job.spec.min_available
    parts: list[Usage] = []
    if need < sum(t.min_available if t.min_available is not None else t.replicas for t in tasks):
        for task in tasks:  # CalcFirstCountResources: whole tasks in priority order, the last one cut short
            take = min(need, task.replicas)
            parts.append(_usage(task, take))
            need -= take
            if need <= 0:
                break
        return to_resource_list(total(parts))
    counted = 0
    for task in tasks:  # first every task's minAvailable ...
        if task.min_available is None:
            continue
        take = min(task.min_available, need - counted)
        parts.append(_usage(task, take))
        counted += take
        if counted >= need:
            return to_resource_list(total(parts))
    for task in tasks:  # ... then the optional replicas, in the same order, up to minAvailable
        spare = task.replicas - (task.min_available or 0) if task.min_available is not None else task.replicas
        take = min(max(spare, 0), need - counted)
        parts.append(_usage(task, take))
        counted += take
        if counted >= need:
            break
    return to_resource_list(total(parts))


def _sub_group_policies(job: Job) -> list[dict[str, Any]]:
    out = []
    for task in job.spec.tasks:
        policy = task.partition_policy
        if policy is None:
            continue
        entry: dict[str, Any] = {
            "name": task.name, "subGroupSize": policy.partition_size, "minSubGroups": policy.min_partitions,
            "labelSelector": {"matchLabels": {TASK_SPEC_KEY: task.name}}, "matchLabelKeys": [PARTITION_ID_KEY],
        }
        if policy.network_topology is not None:
            entry["networkTopology"] = policy.network_topology.to_wire()
        out.append(entry)
    return out


def job_topology(topology: NetworkTopologySpec) -> dict[str, Any]:
    """The Job's networkTopology as the PodGroup gets it: the mode and one tier bound, the number winning."""
    out: dict[str, Any] = {"mode": str(topology.mode)}
    if topology.highest_tier_allowed is not None:
        out["highestTierAllowed"] = topology.highest_tier_allowed
    elif topology.highest_tier_name:
        out["highestTierName"] = topology.highest_tier_name
    return out


def desired_spec(job: Job, priorities: Mapping[str, int]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "minMember": job.spec.min_available,
        "minTaskMember": {t.name: task_min_member(t) for t in job.spec.tasks},
        "queue": job.spec.queue,
        "minResources": min_resources(job, priorities),
    }
    if job.spec.priority_class_name:
        spec["priorityClassName"] = job.spec.priority_class_name
    if job.spec.network_topology is not None:
        spec["networkTopology"] = job_topology(job.spec.network_topology)
    if policies := _sub_group_policies(job):
        spec["subGroupPolicy"] = policies
    return spec


def desired_podgroup(job: Job, job_doc: Mapping[str, Any], priorities: Mapping[str, int]) -> dict[str, Any]:
    """The PodGroup to create for `job` (`job_doc` is the same Job as a dict, for its owner reference)."""
    meta: dict[str, Any] = {
        "name": podgroup_name(job.name, job.metadata.uid or ""), "namespace": job.namespace,
        "ownerReferences": [owner_reference(job_shape(job_doc))],
    }
    if job.metadata.labels:
        meta["labels"] = dict(job.metadata.labels)
    if job.metadata.annotations:
        meta["annotations"] = dict(job.metadata.annotations)
    return {"apiVersion": SCHEDULING_API_VERSION, "kind": PODGROUP_KIND, "metadata": meta,
            "spec": desired_spec(job, priorities)}


def spec_patch(current: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any] | None:
    """A merge patch of the fields the controller keeps in step (priority class, gang sizes, resources,
    sub-groups), or None when they already match. The queue is immutable once a gang exists."""
    spec = current.get("spec") or {}
    patch: dict[str, Any] = {}
    if (spec.get("priorityClassName") or "") != (desired.get("priorityClassName") or ""):
        patch["priorityClassName"] = desired.get("priorityClassName") or None
    if int(spec.get("minMember") or 0) != desired["minMember"]:
        patch["minMember"] = desired["minMember"]
    if not same_resources(spec.get("minResources"), desired["minResources"]):
        patch["minResources"] = {**{k: None for k in spec.get("minResources") or {}}, **desired["minResources"]}
    if dict(spec.get("minTaskMember") or {}) != desired["minTaskMember"]:
        stale = {k: None for k in spec.get("minTaskMember") or {} if k not in desired["minTaskMember"]}
        patch["minTaskMember"] = {**stale, **desired["minTaskMember"]}
    if list(spec.get("subGroupPolicy") or []) != list(desired.get("subGroupPolicy") or []):
        patch["subGroupPolicy"] = desired.get("subGroupPolicy") or None
    return {"spec": patch} if patch else None
