"""Queue state and PodGroup counts as pure functions (Volcano's `pkg/controllers/queue/state/*.go`, §1.1).

* OpenQueue, from any state → Open.
* CloseQueue → Closed if no PodGroup is in the queue, else Closing; a Closed queue stays Closed.
* SyncQueue: an unset state becomes Open; Closing becomes Closed once the queue holds no PodGroup; any other
  state is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from lapilli.api import Action, QueueState

PHASE_COUNTERS: Final = {"Pending": "pending", "Running": "running", "Inqueue": "inqueue", "Unknown": "unknown",
                         "Completed": "completed"}


def next_state(current: str, action: Action, podgroups: int) -> str:
    if action == Action.OPEN_QUEUE:
        return QueueState.OPEN.value
    if action == Action.CLOSE_QUEUE:
        if current == QueueState.CLOSED.value:
            return current
        return QueueState.CLOSED.value if podgroups == 0 else QueueState.CLOSING.value
    if not current:
        return QueueState.OPEN.value
    if current == QueueState.CLOSING.value and podgroups == 0:
        return QueueState.CLOSED.value
    return current


def podgroup_counts(podgroups: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """PodGroups per phase, under the QueueStatus field names (a PodGroup with no phase yet is Pending)."""
    counts = dict.fromkeys(PHASE_COUNTERS.values(), 0)
    for pg in podgroups:
        phase = str((pg.get("status") or {}).get("phase") or "Pending")
        if phase in PHASE_COUNTERS:
            counts[PHASE_COUNTERS[phase]] += 1
    return counts


def status_patch(status: Mapping[str, Any], state: str, counts: Mapping[str, int]) -> dict[str, Any] | None:
    """Merge patch of the fields this controller owns (others, such as `allocated`, belong to the scheduler);
    zero counters are dropped as Go's `omitempty` drops them. None when nothing changes."""
    patch: dict[str, Any] = {}
    if status.get("state") != state:
        patch["state"] = state
    for field, value in counts.items():
        if int(status.get(field) or 0) != value:
            patch[field] = value or None
    return patch or None


def needs_root_parent(queue: Mapping[str, Any]) -> bool:
    """Every queue but `root` hangs under `root` when it names no parent."""
    name = (queue.get("metadata") or {}).get("name")
    return name != "root" and not (queue.get("spec") or {}).get("parent")
