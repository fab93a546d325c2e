"""Job validation on UPDATE — Volcano's `validateJobUpdate` plus the VAP rule that `spec.queue` is immutable.

First failure wins. Only `minAvailable`, `priorityClassName`, `tasks[*].replicas` and `tasks[*].minAvailable`
may change (and `volumes[*].volumeClaimName` where the controller fills it in for a `volumeClaim`); everything
else under `spec` is compared semantically: absent, null, empty and zero values are equal, as Go's decoded
structs compare.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from lapilli.api import Job
from webhook.jobs.topology import TOPOLOGY_CONFLICT, topology_conflict
from webhook.jobs.validate import partition_errors

FROZEN: Final = (
    "job updates may not change fields other than `minAvailable`, `tasks[*].replicas under spec` and "
    "`PriorityClassName`"
)


def _prune(value: Any) -> Any:
    """Drop map entries holding a zero value (None, "", 0, False, [], {}) so `a: 0` equals a missing `a`."""
    if isinstance(value, Mapping):
        pruned = {k: _prune(v) for k, v in value.items()}
        return {k: v for k, v in pruned.items() if v not in (None, "", 0, False, [], {})}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def _comparable(given: Mapping[str, Any]) -> Any:
    spec = copy.deepcopy(dict(given))
    for key in ("minAvailable", "priorityClassName"):
        spec.pop(key, None)
    for task in spec.get("tasks") or []:
        if isinstance(task, dict):
            task.pop("replicas", None)
            task.pop("minAvailable", None)
    for volume in spec.get("volumes") or []:
        if isinstance(volume, dict) and volume.get("volumeClaim") is not None:
            volume.pop("volumeClaimName", None)
    return _prune(spec)


def update_error(old: Job, new: Job, old_spec: Mapping[str, Any], new_spec: Mapping[str, Any]) -> str:
    """The first reason to refuse the update, or ""."""
    for task in new.spec.tasks:
        if task.replicas < 0:
            return f"'replicas' must be >= 0 in task: {task.name}"
        if task.min_available is not None and task.min_available < 0:
            return f"'minAvailable' must be >= 0 in task: {task.name}"
        if task.min_available is not None and task.min_available > task.replicas:
            return f"'minAvailable' must be <= 'replicas' in task: {task.name}"
        if errors := list(partition_errors(task, new.name)):
            return errors[0].strip().rstrip(";")  # Volcano returns the bare sentence on UPDATE
    if new.spec.min_available > sum(t.replicas for t in new.spec.tasks):
        return "job 'minAvailable' must not be greater than total replicas"
    if new.spec.min_available < 0:
        return "job 'minAvailable' must be >= 0"
    if topology_conflict(new.spec.network_topology):
        return TOPOLOGY_CONFLICT
    if len(old.spec.tasks) != len(new.spec.tasks):
        return "job updates may not add or remove tasks"
    if _comparable(old_spec) != _comparable(new_spec):
        return FROZEN
    return ""
