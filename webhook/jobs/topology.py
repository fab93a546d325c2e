"""`networkTopology` rules of Volcano's job and PodGroup webhooks (`validateNetworkTopology`).

`highestTierAllowed` and `highestTierName` are exclusive wherever a networkTopology appears: on the Job, on a
task's `partitionPolicy`, on a PodGroup and on its `subGroupPolicy` entries. Volcano tests whether
`highestTierAllowed` is *set* (a pointer), so `highestTierAllowed: 0` with a tier name is refused too; an empty
`highestTierName` counts as unset, as Go's empty string does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

TOPOLOGY_CONFLICT: Final = (
    "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously"
)


def topology_conflict(topology: object) -> bool:
    """Both tier fields present: `highestTierAllowed` set to anything, `highestTierName` non-empty."""
    return (
        isinstance(topology, Mapping)
        and topology.get("highestTierAllowed") is not None
        and bool(topology.get("highestTierName"))
    )


def partition_topology(task: Mapping[str, Any]) -> object:
    """A raw task's `partitionPolicy.networkTopology` (None when absent or not a mapping)."""
    policy = task.get("partitionPolicy")
    return policy.get("networkTopology") if isinstance(policy, Mapping) else None


def task_topology_fragment(task: Mapping[str, Any], task_name: str, job_name: str) -> str:
    """The job-webhook fragment for a task whose partition topology names both tiers, or ""."""
    if topology_conflict(partition_topology(task)):
        return f" {TOPOLOGY_CONFLICT} in task: {task_name}, job: {job_name};"
    return ""
