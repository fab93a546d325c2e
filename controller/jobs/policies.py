"""Lifecycle policies: which action a request calls for, and after how long.

Mirrors `applyPolicies` in `pkg/controllers/job/job_controller_util.go` (reference §3.1): a Command's action
wins; internal events and requests about an older incarnation of the Job just sync; otherwise the request's
task policies are scanned before the job-level ones, first match wins. A policy matches when its events hold
the request's event or `*` — a PodPending event only matches a policy with a `timeout` (a pod is pending for
a while before anyone should act on it) — or when its `exitCode` equals the request's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from controller.jobs.requests import INTERNAL_EVENTS, Request
from lapilli.api import Action, Event, Job, LifecyclePolicy
from lapilli.times import parse_duration


@dataclass(frozen=True, slots=True)
class Decision:
    """The action to take and the delay (seconds) before taking it; 0 means now."""

    action: Action
    delay_s: float = 0.0
    policy_matched: bool = False


SYNC = Decision(Action.SYNC_JOB)


def matches(policy: LifecyclePolicy, req: Request) -> bool:
    events = policy.all_events()  # Volcano's getEventlist
    if events and req.event is not None and (req.event in events or Event.ANY in events):
        return req.event != Event.POD_PENDING or policy.timeout is not None
    return policy.exit_code is not None and policy.exit_code == req.exit_code and req.event == Event.POD_FAILED


def _first(policies: Iterable[LifecyclePolicy], req: Request) -> Decision | None:
    for policy in policies:
        if policy.action is not None and matches(policy, req):
            delay = parse_duration(policy.timeout).total_seconds() if policy.timeout else 0.0
            return Decision(policy.action, max(0.0, delay), True)
    return None


def apply_policies(job: Job, req: Request) -> Decision:
    """The action for `req` against the Job as it is now."""
    if req.action is not None:
        return Decision(req.action)
    if req.event is None or req.event in INTERNAL_EVENTS:
        return SYNC
    if (req.job_uid and req.job_uid != job.metadata.uid) or req.job_version < job.status.version:
        return SYNC  # a leftover of an earlier incarnation: never a reason to act again
    if req.task:
        task = next((t for t in job.spec.tasks if t.name == req.task), None)
        if task is not None and (found := _first(task.policies, req)) is not None:
            return found
    return _first(job.spec.policies, req) or SYNC
