"""PodGroup and Queue status as the scheduler writes them at session close (Volcano's `session.go`
`updateJobStatus` / `updateQueueStatus`), computed as pure values and written only when they changed, and the
PodGroup events recorded with them (Volcano's `RecordJobStatusEvent`)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Final

from lapilli.kube.events import EventType


def _condition_key(cond: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return (str(cond.get("type")), str(cond.get("status")), str(cond.get("reason", "")), str(cond.get("message", "")))


def status_key(status: Mapping[str, Any]) -> Hashable:
    """What a PodGroup status says, without its conditions' transition times (a status computed again a second
    later is stamped anew)."""
    conditions = tuple(_condition_key(c) for c in status.get("conditions") or ())
    return (status.get("phase"), conditions, *((status.get(k) or 0) for k in ("running", "succeeded", "failed")))


def podgroup_status(
    current: Mapping[str, Any], computed: Mapping[str, Any], now: str, *, planned: bool
) -> dict[str, Any] | None:
    """The status to write, or None when nothing changed. A gang that is only planned (its pods are still on
    their way through bind) is written nothing: it is Running once the API server says its pods are bound, and
    that is its next write (Volcano, which binds within its session, writes Running at that session's close and no
    Inqueue before it)."""
    if planned:
        return None
    phase = computed["phase"]
    old_conditions = {c.get("type"): c for c in current.get("conditions") or []}
    conditions = []
    for cond in computed["conditions"]:
        old = old_conditions.get(cond.get("type"))
        unchanged = old is not None and _condition_key(old) == _condition_key(cond)
        stamp = old.get("lastTransitionTime") if unchanged and old is not None else now
        # Volcano's Go types omit empty fields, and the API server turns an empty string in a merge patch into
        # null, which the CRD schema refuses.
        conditions.append({k: v for k, v in {**cond, "lastTransitionTime": stamp}.items() if v != ""})
    new = {
        "phase": phase,
        "conditions": conditions,
        "running": computed["running"],
        "succeeded": computed["succeeded"],
        "failed": computed["failed"],
    }
    return None if status_key(current) == status_key(new) else new


def queue_status(current: Mapping[str, Any], allocated: Mapping[str, str]) -> dict[str, Any] | None:
    """`allocated` (a ResourceList) as the session counted it; `state` only filled in when the queue has none."""
    patch: dict[str, Any] = {}
    if dict(current.get("allocated") or {}) != allocated:
        patch["allocated"] = allocated or None
        if not allocated and not current.get("allocated"):
            patch.pop("allocated")
    if not current.get("state"):
        patch["state"] = "Open"
    return patch or None


# Volcano's `RecordJobStatusEvent`: a PodGroup still Pending, Inqueue or Unknown after the session is
# unschedulable; any other phase says it is ready, but only in a session that changed its status.
UNSCHEDULABLE_PHASES: Final = frozenset({"Pending", "Inqueue", "Unknown"})
UNSCHEDULABLE: Final[tuple[EventType, str]] = ("Warning", "Unschedulable")
SCHEDULED: Final[tuple[EventType, str]] = ("Normal", "Scheduled")
READY_MESSAGE: Final = "pod group is ready"


def podgroup_event(phase: str, updated: bool) -> tuple[EventType, str] | None:
    """(type, reason) of the event a PodGroup gets at session close, or None."""
    if phase in UNSCHEDULABLE_PHASES:
        return UNSCHEDULABLE
    return SCHEDULED if updated else None


def unschedulable_message(pending: int, tasks: int, fit_error: str) -> str:
    """`<pending>/<tasks> tasks in gang unschedulable: <fit errors>`; unlike the condition, which counts how many
    more the gang needs, the event counts the tasks still Pending."""
    return f"{pending}/{tasks} tasks in gang unschedulable: {fit_error}"
