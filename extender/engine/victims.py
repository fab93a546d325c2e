"""Victim ordering and validation shared by preempt, reclaim and the plugins that choose victims.

Mirrors Volcano's `Session.BuildVictimsPriorityQueue` (`framework/session_plugins.go`) and
`util.ValidateVictims` (`scheduler/util/scheduler_helper.go`): victims of one job go in reverse task order, victims
of different queues in victim-queue order, otherwise in reverse job order — the task that matters least goes first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cmp_to_key
from typing import Protocol

import numpy as np

from extender.engine.interface import Mask, SessionView
from extender.engine.model import Node, Task
from lapilli.resources.vector import less_equal


def victim_order(ssn: SessionView, victims: Iterable[Task], preemptor: Task) -> list[Task]:
    """`victims` in the order they are evicted (first = least important)."""
    preemptor_queue = ssn.queues[ssn.jobs[preemptor.job].queue] if preemptor.job in ssn.jobs else None

    def compare(left: Task, right: Task) -> int:
        if left.job == right.job:
            result = -ssn.task_order(left, right)
        else:
            lj, rj = ssn.jobs[left.job], ssn.jobs[right.job]
            if preemptor_queue is not None and lj.queue != rj.queue:
                result = ssn.victim_queue_order(ssn.queues[lj.queue], ssn.queues[rj.queue], preemptor_queue)
            else:
                result = -ssn.job_order(lj, rj)
        # Volcano pops from a heap; ties there are arbitrary, here they go to the lowest uid.
        return result or (left.uid > right.uid) - (left.uid < right.uid)

    return sorted(victims, key=cmp_to_key(compare))


def validate_victims(ssn: SessionView, preemptor: Task, node: Node, victims: list[Task] | None) -> bool:
    """There are victims, and evicting all of them would let the preemptor fit the node's future idle."""
    if not victims:
        return False
    future = ssn.arrays.future_idle_row(node.idx) + np.sum([v.resreq for v in victims], axis=0)
    return less_equal(preemptor.resreq, future)


def with_idle(voted: list[Task] | None, candidates: list[Task]) -> list[Task] | None:
    """The plugins' victims plus every idle-reclaimable candidate (`Task.idle`), idle ones first, each group in the
    order given. An idle job's room is what its queue's idle-GPU policy gives up: neither its priority, nor its queue's
    deserved share, nor its gang's minimum protects it. The action's own candidate rules still apply."""
    idle = [t for t in candidates if t.idle]
    if not idle:
        return voted
    rest = [t for t in voted or () if not t.idle]
    return idle + rest


def idle_first(victims: list[Task]) -> list[Task]:
    """`victims` (in victim order) with the idle-reclaimable ones moved to the front: an idle job goes before a
    busy one."""
    return sorted(victims, key=lambda t: not t.idle)


class _Placing(Protocol):
    @property
    def nodes(self) -> Sequence[Node]: ...

    def preempt_mask(self, task: Task) -> Mask: ...


def candidate_nodes(ssn: _Placing, task: Task) -> list[Node]:
    """Nodes an eviction could open for `task`, in name order (Volcano's `PredicateForPreemptAction`).

    Only failures eviction cannot resolve rule a node out: the static predicates (selector, affinity, taints,
    unschedulable), required pod affinity and a missing spread key are UnschedulableAndUnresolvable upstream;
    port, pod anti-affinity, spread skew and pod-count conflicts and the resource fit may be fixed by evicting
    victims, so they are checked later, once victims are chosen.
    """
    mask = ssn.preempt_mask(task)
    return [ssn.nodes[int(i)] for i in np.flatnonzero(mask)]


__all__ = ["candidate_nodes", "idle_first", "validate_victims", "victim_order", "with_idle"]
