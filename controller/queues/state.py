"""Queue state and PodGroup counts as pure functions (Volcano's `pkg/controllers/queue/state/*.go`, §1.1).

* OpenQueue, from any state → Open.
* CloseQueue → Closed if no PodGroup is in the queue, else Closing; a Closed queue stays Closed.
* SyncQueue: an unset state becomes Open; Closing becomes Closed once the queue holds no PodGroup; any other
  state is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lapilli.api import Action, QueueState
from lapilli.meta import name_of


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


def status_patch(status: Mapping[str, Any], state: str) -> dict[str, Any] | None:
    """Merge patch of the one field this controller owns (`allocated` belongs to the scheduler); None when the
    state is already `state`."""
    return None if status.get("state") == state else {"state": state}


def needs_root_parent(queue: Mapping[str, Any]) -> bool:
    """Every queue but `root` hangs under `root` when it names no parent."""
    name = name_of(queue)
    return name != "root" and not (queue.get("spec") or {}).get("parent")
