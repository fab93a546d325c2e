"""Victim bundles for gang-aware eviction (Volcano's `actions/utils/bundle.go`).

A bundle is what gangpreempt and gangreclaim evict as one decision. A *surplus* bundle holds a gang's members above
its minAvailable (and above each role's minTaskMember, when the roles are enforced, and leaving each sub-gang group
the whole sub-gangs its minSubGroups asks for, when the PodGroup has a subGroupPolicy): taking them leaves the gang
running. A *whole* bundle holds the whole gang: taking it breaks the gang, so it takes **every** placed member, on
every node, its surplus members too — Volcano's whole bundle holds only the members left after the surplus inside
the domain searched, which can leave a gang spread over domains, or one whose surplus was given back, with
1..minAvailable−1 members; here a gang is evicted whole or not at all, and a whole bundle with a member the
eviction may not take (not preemptable, not Running for reclaim, on its way to bind) is not offered. A gang already
below its minimum costs nothing more to break: all its evictable members form one surplus bundle (Volcano's
"already not gang-ready").

Bundles are ordered least important first, as the victims they are:

1. idle-reclaimable pods before busy ones (their queue's idle-GPU policy gave their room up), then surplus before
   whole (Volcano: breaking no gang comes first);
2. gangpreempt: lower priority first; gangreclaim: victim-queue order (Volcano's `VictimQueueOrderFn`, else reverse
   queue order), then lower priority;
3. then upstream's workload-aware preemption (KEP-5710) importance, least important first: single pods before
   gangs, smaller gangs before larger ones (by placed members), later start before earlier (a gang's start: its
   earliest placed member's creation);
4. then Volcano's efficiency: what the bundle frees inside the domain, capped at the need, per unit of what it
   evicts everywhere (a surplus bundle costs no gang: infinite), higher first;
5. then the lowest job uid and first task uid (deterministic).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace
from enum import IntEnum
from functools import cmp_to_key

import numpy as np

from extender.engine.model import ALLOCATED_STATUS, READY_STATUS, Job, Queue, SubJob, Task, TaskStatus
from lapilli.resources.vector import Vec


class BundleKind(IntEnum):
    SURPLUS = 0  # Volcano's BundleSafe
    WHOLE = 1


@dataclass(slots=True)
class Bundle:
    kind: BundleKind
    job: Job
    tasks: list[Task]  # evicted together
    local: Vec  # what they free inside the domain
    cost: Vec | None  # whole: what the gang gives up everywhere; surplus: None (no gang breaks)


def _sum(tasks: Iterable[Task], zeros: Vec) -> Vec:
    total = zeros.copy()
    for task in tasks:
        total += task.resreq
    return total


def _role_surplus(job: Job) -> dict[str, int] | None:
    """Members each role can lose before falling below its minTaskMember (None: roles not enforced, as the gang
    plugin skips the per-role check when minMember is below the sum of role minima)."""
    if job.min_member < job.task_min_sum():
        return None
    ready: dict[str, int] = {}
    for role in job.min_task_member:
        ready[role] = job.role_count(role, READY_STATUS)
    for task in job.tasks.values():
        if task.status is TaskStatus.PENDING and task.best_effort and task.role in ready:
            ready[task.role] += 1  # a pending BestEffort member counts as placed (gang's CheckTaskReady)
    return {role: ready[role] - need for role, need in job.min_task_member.items()}


class _GroupSlack:
    """Sub-gang groups (a PodGroup's subGroupPolicy): how many more of its whole sub-gangs each group can lose before
    it falls below its minSubGroups, and the sub-gangs already short of a member, which cost nothing more to take from
    (Volcano's groupSurplus and subJobBroken; every sub-gang is counted in its group, as there)."""

    def __init__(self, job: Job) -> None:
        assert job.subjobs is not None
        self.job = job
        self.slack: dict[str, int] = {}
        self.broken: set[str] = set()
        for sub in job.subjobs.values():
            if sub.is_ready():
                self.slack[sub.gid] = self.slack.get(sub.gid, 0) + 1
            else:
                self.broken.add(sub.uid)
        for gid, need in job.min_subjobs.items():
            self.slack[gid] = self.slack.get(gid, 0) - need

    def _sub(self, task: Task) -> SubJob | None:
        return self.job.subjob_of.get(task.uid)

    def spares(self, task: Task) -> bool:
        sub = self._sub(task)  # a member of no sub-gang is never taken as surplus (Volcano: routed whole)
        return sub is not None and (sub.uid in self.broken or self.slack.get(sub.gid, 0) > 0)

    def take(self, task: Task) -> None:
        sub = self._sub(task)
        if sub is not None and sub.uid not in self.broken:
            self.broken.add(sub.uid)  # the first member taken breaks it: its group has one whole sub-gang fewer
            self.slack[sub.gid] = self.slack.get(sub.gid, 0) - 1


def _surplus(job: Job, inside: list[Task]) -> list[Task]:
    """The members among `inside` (least important first) the gang can lose and stay ready: at most its members
    above minAvailable, none a role or a sub-gang group cannot spare (Volcano's CreateJobBundles)."""
    left = job.ready_num() - job.min_member
    roles = _role_surplus(job)
    groups = _GroupSlack(job) if job.min_subjobs and job.subjobs is not None else None
    out: list[Task] = []
    for task in inside:
        role_ok = roles is None or task.role not in roles or roles[task.role] > 0
        if left > 0 and role_ok and (groups is None or groups.spares(task)):
            out.append(task)
            left -= 1
            if roles is not None and task.role in roles:
                roles[task.role] -= 1
            if groups is not None:
                groups.take(task)
    return out


def job_bundles(job: Job, eligible: list[Task], local: Collection[str], zeros: Vec) -> list[Bundle]:
    """`job`'s bundles from its members the eviction may take (`eligible`, on any node), `local` the node names of
    the domain. Surplus members are taken only inside the domain (elsewhere they free nothing useful)."""
    inside = sorted((t for t in eligible if t.node in local), key=lambda t: (t.priority, t.uid))
    if not inside:
        return []
    if job.ready_num() < job.min_member:
        # Already below its minimum: all of it is one free bundle, so it is left with none rather than fewer.
        everything = sorted(eligible, key=lambda t: (t.priority, t.uid))
        return [Bundle(BundleKind.SURPLUS, job, everything, _sum(inside, zeros), None)]
    surplus = _surplus(job, inside)
    out = [Bundle(BundleKind.SURPLUS, job, surplus, _sum(surplus, zeros), None)] if surplus else []
    held = sum(1 for t in job.tasks.values() if t.status in ALLOCATED_STATUS)
    # Whole means every member still holding room, the surplus ones too (taking the rest while keeping a surplus
    # member — given back, or refused by a vote — would leave the gang short): one the eviction may not take keeps
    # the gang from going whole.
    if len(eligible) == held and len(surplus) < held:
        everyone = sorted(eligible, key=lambda t: (t.priority, t.uid))
        out.append(Bundle(BundleKind.WHOLE, job, everyone, _sum(inside, zeros), _sum(everyone, zeros)))
    return out


def allowed_bundles(bundles: list[Bundle], allowed: Collection[str], zeros: Vec, local: Collection[str]) -> list[
        Bundle]:
    """Volcano's `ApplyAllowedTasks`: a whole bundle stays only if the plugins let every member go; a surplus bundle
    shrinks to the members they let go."""
    out: list[Bundle] = []
    for bundle in bundles:
        kept = [t for t in bundle.tasks if t.uid in allowed]
        if bundle.kind is BundleKind.WHOLE:
            if len(kept) == len(bundle.tasks):
                out.append(bundle)
        elif kept:
            out.append(replace(bundle, tasks=kept, local=_sum((t for t in kept if t.node in local), zeros)))
    return out


def efficiency(bundle: Bundle, need: Vec, pods: int) -> float:
    """Volcano's `bundleROI`: Σ min(local, need)/need over the resources the gang asks for, divided by Σ cost/need
    (infinite for a surplus bundle, which breaks no gang)."""
    mask = need > 0
    mask[pods] = False
    if not mask.any():
        return math.inf
    gain = float(np.sum(np.minimum(bundle.local[mask], need[mask]) / need[mask]))
    if bundle.cost is None:
        return math.inf
    cost = float(np.sum(bundle.cost[mask] / need[mask]))
    return math.inf if cost == 0 else gain / cost


def start(job: Job) -> float:
    """When the gang started, as far as the snapshot tells: its earliest placed member's creation."""
    times = [t.creation for t in job.tasks.values() if t.status in ALLOCATED_STATUS]
    return min(times) if times else job.creation


def importance(job: Job) -> tuple[int, bool, int, float]:
    """Upstream's workload-aware preemption importance (KEP-5710), as a key that sorts the least important first:
    lower priority, single pods before gangs, smaller gangs, later start."""
    placed = sum(1 for t in job.tasks.values() if t.status in ALLOCATED_STATUS)
    return job.priority, job.min_member > 1, placed, -start(job)


def _tie(left: Bundle, right: Bundle, need: Vec, pods: int) -> int:
    li, ri = importance(left.job), importance(right.job)
    if li != ri:
        return -1 if li < ri else 1
    le, re = efficiency(left, need, pods), efficiency(right, need, pods)
    if le != re:
        return -1 if le > re else 1
    lk = (left.job.uid, left.tasks[0].uid if left.tasks else "", len(left.tasks))
    rk = (right.job.uid, right.tasks[0].uid if right.tasks else "", len(right.tasks))
    return (lk > rk) - (lk < rk)


def _first(left: Bundle, right: Bundle) -> int:
    """Idle-reclaimable bundles before busy ones (an idle job goes before any busy victim), then surplus before
    whole."""
    lidle, ridle = all(t.idle for t in left.tasks), all(t.idle for t in right.tasks)
    if lidle != ridle:
        return -1 if lidle else 1
    return int(left.kind) - int(right.kind)


def sort_for_preempt(bundles: list[Bundle], need: Vec, pods: int) -> list[Bundle]:
    """Volcano's `SortBundlesForPreempt` with upstream's importance in place of the reverse job order."""

    def compare(left: Bundle, right: Bundle) -> int:
        return _first(left, right) or _tie(left, right, need, pods)

    return sorted(bundles, key=cmp_to_key(compare))


def sort_for_reclaim(bundles: list[Bundle], need: Vec, pods: int, queue_of: Callable[[Job], Queue],
                     victim_queue_order: Callable[[Queue, Queue], int]) -> list[Bundle]:
    """Volcano's `SortBundlesForReclaim`: surplus first, then the victim queues' order, then importance and
    efficiency."""

    def compare(left: Bundle, right: Bundle) -> int:
        first = _first(left, right)
        if first:
            return first
        lq, rq = queue_of(left.job), queue_of(right.job)
        if lq is not rq:
            order = victim_queue_order(lq, rq)
            if order:
                return order
        return _tie(left, right, need, pods)

    return sorted(bundles, key=cmp_to_key(compare))


__all__ = ["Bundle", "BundleKind", "allowed_bundles", "efficiency", "importance", "job_bundles",
           "sort_for_preempt", "sort_for_reclaim", "start"]
