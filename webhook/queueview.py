"""Small reads of Queue dicts shared by the job, podgroup and queue rules.

A Queue's state lives only in `status.state` (`Open`, `Closed`, `Closing`, `Unknown`). One deliberate
difference from Volcano: a queue whose state is still empty — created, not yet synced by the queue controller,
which always moves an empty state to `Open` — is treated as Open, so `kubectl apply` of a Queue followed at once
by a Job into it does not fail on that race.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lapilli.meta import name_of, section
from webhook.listers import QueueLister


def spec_of(queue: Mapping[str, Any]) -> Mapping[str, Any]:
    return section(queue, "spec")


def parent_of(queue: Mapping[str, Any]) -> str:
    parent = spec_of(queue).get("parent")
    return parent if isinstance(parent, str) else ""


def state_of(queue: Mapping[str, Any]) -> str:
    state = section(queue, "status").get("state")
    return state if isinstance(state, str) else ""


def is_open(queue: Mapping[str, Any]) -> bool:
    return state_of(queue) in ("Open", "")


def not_found(name: str) -> str:
    """The lister's NotFound error text, as Volcano embeds it in its messages."""
    return f'queue.scheduling.volcano.sh "{name}" not found'


def children(queues: QueueLister, name: str) -> list[Mapping[str, Any]]:
    """Queues whose `spec.parent` is `name`, by name."""
    return sorted((q for q in queues.list() if parent_of(q) == name), key=name_of)
