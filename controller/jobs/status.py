"""A Volcano Job's status as the controller writes it, and the merge patch from the old one to the new one.

The wire form mirrors Go's `JobStatus` JSON: zero counters are omitted (`omitempty`), `taskStatusCount` is
`{task: {phase: {PodPhase: n}}}`, and `conditions` keeps one entry per phase — a new transition to a phase
replaces the older entry and goes last. `merge_patch` is RFC 7386 in reverse: the patch that turns one JSON
document into another (nulls for what went away), so a status write never needs a read-modify-write loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.jobs.state import Counts
from lapilli.api import JobPhase

_COUNTERS = ("pending", "running", "succeeded", "failed", "terminating", "unknown")


def counts_status(counts: Counts) -> dict[str, Any]:
    out: dict[str, Any] = {k: getattr(counts, k) for k in _COUNTERS if getattr(counts, k)}
    tasks = {t: {"phase": {p: n for p, n in phases.items() if n}} for t, phases in sorted(counts.tasks.items())}
    tasks = {t: v for t, v in tasks.items() if v["phase"]}
    if tasks:
        out["taskStatusCount"] = tasks
    return out


def transition(status: dict[str, Any], phase: JobPhase, now: str, reason: str = "", message: str = "") -> None:
    """Enter `phase` at `now`: state and the one condition per phase, newest last."""
    state: dict[str, Any] = {"phase": phase.value, "lastTransitionTime": now}
    if reason:
        state["reason"] = reason
    if message:
        state["message"] = message
    status["state"] = state
    kept = [c for c in status.get("conditions") or [] if c.get("status") != phase.value]
    status["conditions"] = [*kept, {"status": phase.value, "lastTransitionTime": now}]


def build_status(
    old: Mapping[str, Any], counts: Counts, *, min_available: int, version: int, retry_count: int,
    controlled: Mapping[str, str], running_duration: str | None = None,
) -> dict[str, Any]:
    """The new status: counts recounted, bookkeeping carried over from `old` (state, conditions)."""
    status: dict[str, Any] = {k: v for k, v in old.items() if k in ("state", "conditions", "runningDuration")}
    status.update(counts_status(counts))
    if min_available:
        status["minAvailable"] = min_available
    if version:
        status["version"] = version
    if retry_count:
        status["retryCount"] = retry_count
    if controlled:
        status["controlledResources"] = dict(sorted(controlled.items()))
    if running_duration is not None:
        status["runningDuration"] = running_duration
    return status


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch that turns `old` into `new` (empty when they are equal)."""
    patch: dict[str, Any] = {}
    for key, value in new.items():
        before = old.get(key)
        if key in old and before == value:
            continue
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            patch[key] = merge_patch(before, value)
        else:
            patch[key] = value
    for key in old:
        if key not in new:
            patch[key] = None
    return patch
