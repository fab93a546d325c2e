"""Self-healing gangs, the Job controller's part: what a lost member's lifecycle policy does while the gang regains
it. (The scheduler's part: a gang that ran and lost members goes before new work of its queue and keeps its
admission — `extender/engine/model.Job.degraded`.)

A member is lost when its pod is deleted or evicted (PodEvicted; a node that is gone has its pods deleted by the
pod garbage collector) or fails (PodFailed). Volcano acts on the Job's policy at once, or after the policy's own
`timeout`, dropped once a pod of that name runs again. Lapilli keeps that, and with `--gang-heal-timeout` > 0 gives a
gang that still holds members below minAvailable that long to regain the lost one before a PodEvicted/PodFailed
policy without a timeout of its own acts — unless the scheduler evicted the pod (annotation
`lapilli.io/evicted-by`: that was a decision, not an accident). A gang whose loss no policy acts on would sit
partial for ever in Volcano (#5805); it gets a Warning Event `GangDegraded` on the Job once the heal window has
passed (at once without one) while it is still short, naming what it holds, what it lost and the policy that would
restart it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from controller.jobs.policies import Decision
from controller.jobs.requests import Request
from lapilli.api import Event, Job
from lapilli.api.constants import JOB_VERSION_KEY
from lapilli.meta import Obj, annotations_of, is_deleting

LOSS_EVENTS: Final = frozenset({Event.POD_EVICTED, Event.POD_FAILED})
DEGRADED_REASON: Final = "GangDegraded"


def holding(job: Job, pods: Iterable[Obj]) -> int:
    """Members of the Job's current version that hold a place: bound, Pending or Running, not being deleted."""
    version = str(job.status.version)
    return sum(
        1 for p in pods
        if (p.get("spec") or {}).get("nodeName") and not is_deleting(p)
        and ((p.get("status") or {}).get("phase") or "Pending") in ("Pending", "Running")
        and annotations_of(p).get(JOB_VERSION_KEY, version) == version
    )


def short(job: Job, pods: Iterable[Obj]) -> tuple[int, int] | None:
    """(members holding a place, minAvailable) when the gang keeps some members but fewer than minAvailable."""
    held = holding(job, pods)
    return (held, job.spec.min_available) if 0 < held < job.spec.min_available else None


def heal_first(decision: Decision, req: Request, gang: tuple[int, int] | None, timeout_s: float) -> Decision:
    """The decision for a lost member's request: a PodEvicted/PodFailed policy acting at once waits `timeout_s` for
    a gang that still holds members (not for one the scheduler evicted from, nor with a timeout of its own)."""
    if req.event not in LOSS_EVENTS or req.delayed or timeout_s <= 0 or gang is None or req.scheduler_evicted:
        return decision
    if not decision.policy_matched or decision.delay_s > 0:
        return decision
    return Decision(decision.action, timeout_s, policy_matched=True)


def degraded_message(req: Request, gang: tuple[int, int], waited_s: float) -> str:
    held, minimum = gang
    lost = "evicted or deleted" if req.event == Event.POD_EVICTED else "failed"
    waited = f" for {waited_s:g}s" if waited_s > 0 else ""
    return (f"gang below minAvailable{waited}: {held} of {minimum} pods hold their place since pod {req.pod_name} "
            f"was {lost}; no lifecycle policy of the Job acts on {req.event}, so it waits for room to regain it "
            f"(it goes first in its queue); add a policy `event: {req.event}, action: RestartJob` to restart it "
            "instead")
