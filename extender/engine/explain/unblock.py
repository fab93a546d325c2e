"""What could free room for a gang that does not fit: reclaim (from other queues) and preempt (lower-priority jobs
of the same queue), each asked of the session's own votes — Preemptive, Reclaimable, Preemptable — over the nodes
an eviction could open (Volcano's `PredicateForPreemptAction`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from extender.engine.explain.report import Kind, Reason
from extender.engine.explain.units import amount
from extender.engine.interface import ExplainView
from extender.engine.model import Job, Task, TaskStatus
from extender.engine.victims import candidate_nodes, victim_order
from lapilli.meta import JSON
from lapilli.resources.vector import TOLERANCE


def _running_elsewhere(ssn: ExplainView, task: Task, same_queue: bool, queue: str) -> list[Task]:
    out = []
    for node in candidate_nodes(ssn, task):
        for other in node.tasks.values():
            if other.status is not TaskStatus.RUNNING or not other.preemptable or other.job not in ssn.jobs:
                continue
            if (ssn.jobs[other.job].queue == queue) == same_queue and other.job != task.job:
                out.append(other)
    return out


def reclaim(ssn: ExplainView, actions: Sequence[str], job: Job, task: Task) -> Reason:
    queue = ssn.queues[job.queue]
    if "reclaim" not in actions and "gangreclaim" not in actions:
        return Reason(Kind.RECLAIM, "reclaim is not enabled in the scheduler conf: nothing takes room back from "
                      "other queues", {"allowed": False, "why": "not configured"})
    if task.preemption_never:
        return Reason(Kind.RECLAIM, "reclaim not allowed: the pods have preemptionPolicy Never",
                      {"allowed": False, "why": "preemptionPolicy"})
    if not ssn.preemptive(queue, task):
        return Reason(Kind.RECLAIM, f"reclaim not allowed: queue {queue.name} already holds its deserved share of "
                      "what these pods ask for", {"allowed": False, "why": "queue within deserved"})
    others = _running_elsewhere(ssn, task, same_queue=False, queue=queue.name)
    closed = sorted({ssn.jobs[t.job].queue for t in others if not ssn.queues[ssn.jobs[t.job].queue].reclaimable})
    open_ = [t for t in others if ssn.queues[ssn.jobs[t.job].queue].reclaimable]
    if not open_:
        if closed:
            return Reason(Kind.RECLAIM, "reclaim not allowed: the room is held by queue(s) "
                          f"{', '.join(closed)} with reclaimable: false",
                          {"allowed": False, "why": "reclaimable false", "queues": closed})
        return Reason(Kind.RECLAIM, "nothing to reclaim: no running pod of another queue on a node these pods "
                      "may use", {"allowed": False, "why": "no victims"})
    victims = ssn.reclaimable(task, victim_order(ssn, open_, task)) or []
    if not victims:
        holders = sorted({ssn.jobs[t.job].queue for t in open_})
        also = f"; {', '.join(closed)} {'is' if len(closed) == 1 else 'are'} not reclaimable" if closed else ""
        return Reason(Kind.RECLAIM, f"reclaim not allowed: queue(s) {', '.join(holders)} hold no more than "
                      f"their deserved share{also}", {"allowed": False, "why": "victims within deserved",
                                                      "queues": holders, "notReclaimable": closed})
    queues = sorted({ssn.jobs[t.job].queue for t in victims})
    return Reason(Kind.RECLAIM, f"reclaim allowed: {len(victims)} pod(s) of queue(s) {', '.join(queues)} above "
                  "their deserved share can be evicted", {"allowed": True, "victims": [t.key for t in victims]})


def preempt(ssn: ExplainView, actions: Sequence[str], job: Job, task: Task) -> Reason | None:
    if "preempt" not in actions and "gangpreempt" not in actions:
        return None
    same = _running_elsewhere(ssn, task, same_queue=True, queue=job.queue)
    if not same:
        return None
    victims = ssn.preemptable(task, victim_order(ssn, same, task)) or []
    if not victims:
        return Reason(Kind.PREEMPT, f"no preemption: the running jobs of queue {job.queue} are not of lower "
                      "priority", {"candidates": []})
    text = f"preemption candidates: {len(victims)} pod(s) of lower-priority jobs in queue {job.queue}"
    data: dict[str, JSON] = {"candidates": [t.key for t in victims]}
    # The session preempts only for a whole gang: when the candidates it may evict free room for fewer pods than
    # the gang still needs, it evicts nothing (had it preempted, the answer would be "starting soon").
    # (A task that asks for nothing is never short of room: the clause is for resources.)
    needed = job.min_member - job.ready_num()
    room = _room_after_eviction(ssn, task, victims) if (task.resreq > 0).any() else needed
    if room < needed:
        text += (f", but evicting them all frees room for {room} of the {needed} pod(s) the gang still needs, "
                 "and the scheduler preempts only for a whole gang")
        data.update({"podsAfterEviction": room, "podsNeeded": needed})
    return Reason(Kind.PREEMPT, text, data)


def _room_after_eviction(ssn: ExplainView, task: Task, victims: Sequence[Task]) -> int:
    """How many pods like `task` (which asks for some resource) the nodes an eviction could open would hold with
    every victim gone."""
    ask = task.resreq > 0
    pods = 0
    for node in candidate_nodes(ssn, task):
        freed = [v.resreq for v in victims if v.uid in node.tasks]
        room = ssn.arrays.future_idle_row(node.idx) + (np.sum(freed, axis=0) if freed else 0.0)
        pods += max(int(np.min(np.floor((room[ask] + TOLERANCE) / task.resreq[ask]))), 0)
    return pods


def request_text(ssn: ExplainView, task: Task) -> str:
    return ", ".join(f"{n} {amount(n, float(task.resreq[i]))}" for i, n in enumerate(ssn.dims.names)
                     if task.resreq[i] > 0 and n != "pods")
