"""Lifecycle-policy rules — Volcano's `validatePolicies` (`pkg/webhooks/admission/jobs/validate/util.go`).

Applied separately to the job-level list and to each task's list. A policy names events (`event`/`events`) or
an `exitCode`, never both and never neither; events and actions must be user-facing ones; an event or exit code
may appear in one policy of a list only; exit code 0 is not a failure; `*` excludes every other event. Go's
multierror decoration (`1 error occurred:\n\t* ...`) is left out so kubectl prints one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from lapilli.api import LifecyclePolicy

VALID_EVENTS: Final = (
    "*",
    "PodFailed",
    "PodEvicted",
    "PodPending",
    "Unknown",
    "TaskCompleted",
    "TaskFailed",
    "JobUpdated",
)
VALID_ACTIONS: Final = (
    "AbortJob",
    "RestartJob",
    "RestartTask",
    "RestartPod",
    "RestartPartition",
    "TerminateJob",
    "CompleteJob",
    "ResumeJob",
)
VALID_SUFFIX: Final = f" valid events are [{' '.join(VALID_EVENTS)}], valid actions are [{' '.join(VALID_ACTIONS)}];"


def _invalid(path: str, value: str, detail: str) -> str:
    """`field.Invalid(path, value, detail).Error()`."""
    return f'{path}: Invalid value: "{value}": {detail}'


def _check_events(policy: LifecyclePolicy, path: str, seen: set[str]) -> str:
    for event in policy.all_events():
        if event not in VALID_EVENTS:
            return _invalid(path, event, "invalid policy event")
        if policy.action not in VALID_ACTIONS:
            return _invalid(path, policy.action or "", "invalid policy action")
        if event in seen:
            return f"duplicate event {event}  across different policy"
        seen.add(event)
    return ""


def policy_errors(policies: Sequence[LifecyclePolicy], path: str) -> list[str]:
    """Errors of one policy list (`path` is `spec.policies` or `spec.tasks.policies`, as Volcano names them)."""
    errors: list[str] = []
    events: set[str] = set()
    exit_codes: set[int] = set()
    for policy in policies:
        has_events = bool(policy.all_events())
        if has_events and policy.exit_code is not None:
            errors.append("must not specify event and exitCode simultaneously")
            break
        if not has_events and policy.exit_code is None:
            errors.append("either event and exitCode should be specified")
            break
        if has_events:
            error = _check_events(policy, path, events)
        elif policy.exit_code == 0:
            error = "0 is not a valid error code"
        elif policy.exit_code in exit_codes:
            error = f"duplicate exitCode {policy.exit_code}"
        else:
            exit_codes.add(policy.exit_code or 0)
            error = ""
        if error:
            errors.append(error)
            break
    if "*" in events and len(events) > 1:
        errors.append("if there's * here, no other policy should be here")
    return errors


def policies_message(policies: Sequence[LifecyclePolicy], path: str) -> str:
    """The job-webhook fragment for one list, or "" when it is valid."""
    errors = policy_errors(policies, path)
    return "; ".join(errors) + VALID_SUFFIX if errors else ""
