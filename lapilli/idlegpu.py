"""Idle-GPU reclaim's vocabulary, shared by the service that watches utilisation, the engine that may evict, and the
tools that show it (`lapilli job why`, the dashboard, `lapilli schedule`). No Volcano counterpart: Volcano has no
notion of a job that holds GPUs it does not use.

- Condition `lapilli.io/IdleGPU` on a PodGroup (written by the leader, like `lapilli.io/Why`): status True while the
  job's GPUs have stayed below the threshold for the window; reason `Idle` (warned; the grace period runs),
  `Reclaimable` (grace over and the queue's policy is `reclaim`: the preempt and reclaim actions may evict its pods
  for a job that waits for the room), `ReclaimableDryRun` (the same, in dry-run mode: nothing is evicted); status
  False, reason `Active`, once it is no longer idle after a warning.
- Queue annotation `lapilli.io/idle-gpu-policy`: `reclaim` (warn, then reclaimable after the grace period), `warn`
  (warn only), `off` (not watched). A queue without it takes its parent's, up to the root, else the service's
  default (`--idle-gpu-default-policy`, `warn`).
- Job or PodGroup annotation `lapilli.io/idle-gpu-reclaim: "false"`: this job is never watched, warned or reclaimed
  (a Job's annotations are copied onto the PodGroup made for it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Final, Protocol

IDLE_CONDITION: Final = "lapilli.io/IdleGPU"
POLICY_ANNOTATION: Final = "lapilli.io/idle-gpu-policy"
OPT_OUT_ANNOTATION: Final = "lapilli.io/idle-gpu-reclaim"


class IdleReason(StrEnum):
    IDLE = "Idle"
    RECLAIMABLE = "Reclaimable"
    DRY_RUN = "ReclaimableDryRun"
    ACTIVE = "Active"


class Policy(StrEnum):
    RECLAIM = "reclaim"
    WARN = "warn"
    OFF = "off"


class QueueLike(Protocol):
    @property
    def annotations(self) -> Mapping[str, str]: ...

    @property
    def parent(self) -> str: ...


def parse_policy(value: str) -> Policy | None:
    """A policy annotation's value, or None when it names none (`Reclaim` and ` warn ` are read too)."""
    try:
        return Policy(value.strip().lower())
    except ValueError:
        return None


def queue_policy(queues: Mapping[str, QueueLike], name: str, default: Policy) -> tuple[Policy, str]:
    """The policy that governs the jobs of queue `name` and the queue that set it ("" for the default): the
    nearest of the queue and its ancestors whose annotation names a policy. An annotation that names none counts
    as absent (the caller reports it, see `bad_policies`)."""
    seen: set[str] = set()
    current = name
    while current and current not in seen and current in queues:
        seen.add(current)
        queue = queues[current]
        policy = parse_policy(queue.annotations.get(POLICY_ANNOTATION, ""))
        if policy is not None:
            return policy, current
        current = queue.parent or ("root" if current != "root" else "")
    return default, ""


def bad_policies(queues: Mapping[str, QueueLike]) -> dict[str, str]:
    """Queues whose policy annotation names no policy -> its value."""
    return {name: q.annotations[POLICY_ANNOTATION] for name, q in sorted(queues.items())
            if POLICY_ANNOTATION in q.annotations and parse_policy(q.annotations[POLICY_ANNOTATION]) is None}


def opted_out(annotations: Mapping[str, str]) -> bool:
    """The job says `lapilli.io/idle-gpu-reclaim: "false"` (also `no`, `0`, `off`)."""
    return annotations.get(OPT_OUT_ANNOTATION, "").strip().lower() in ("false", "no", "0", "off")


def reclaimable_by_condition(conditions: Iterable[tuple[str, str | None, str | None]]) -> bool:
    """Among a PodGroup's (type, status, reason) conditions, the leader's says its GPUs are reclaimable now."""
    return any(type_ == IDLE_CONDITION and status == "True" and reason == IdleReason.RECLAIMABLE
               for type_, status, reason in conditions)


__all__ = ["IDLE_CONDITION", "OPT_OUT_ANNOTATION", "POLICY_ANNOTATION", "IdleReason", "Policy", "bad_policies",
           "opted_out", "parse_policy", "queue_policy", "reclaimable_by_condition"]
