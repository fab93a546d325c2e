"""gangpreempt: a starving gang takes room from lower-priority gangs of its own queue — their surplus members, or
whole gangs — never single pods of many gangs (Volcano's `actions/gangpreempt/gangpreempt.go`, v1.15+).

Preemptors are the valid, admitted, starving jobs; queues go in QueueOrder and each queue's preemptors in JobOrder,
each with one Statement, committed only if the job is then pipelined (as legacy preempt). Candidates in a domain
are Bound or Running, preemptable pods of other jobs of the same queue whose job priority is below the preemptor's
and whose PodGroup may lose pods to gang eviction (`volcano.sh/preemptable` unset or true); the BestEffort rule of
legacy preempt is not applied (as Volcano). The plugins' UnifiedEvictable vote (priority, gang, conformance) decides
which of them go. Victim bundles, the domain search, the simulated placement and the reprieve are
`gang_evict.evict_for_gang`; each evicted pod carries a note naming the gang it makes room for.

With `enqueue` configured, a Pending gang that enqueue refused for want of room its queue's lower-priority gangs
hold is admitted first (`admit_for_preemption`): Volcano leaves it Pending, where no preemption looks at it (#4679).

Usable beside `preempt` or instead of it: Volcano's design says not to configure both; Lapilli runs whichever the
conf lists, in order, the later one on what the earlier left.
"""

from __future__ import annotations

import numpy as np

from extender.engine.actions.bundles import Bundle, BundleKind, sort_for_preempt
from extender.engine.actions.gang_evict import Policy, parse_arguments, run, victim_members
from extender.engine.actions.ordering import PriorityQueue
from extender.engine.actions.registry import register_action
from extender.engine.interface import EvictionKind
from extender.engine.model import PREEMPTABLE_STATUS, Job, Queue, Task
from extender.engine.session import EvictionNote, Session
from lapilli.resources.vector import Vec, less_equal_on

NAME = "gangpreempt"


def preempt_note(job: Job, bundle: Bundle) -> EvictionNote:
    victim = bundle.job
    pods = f"{len(bundle.tasks)} pod(s)"
    for_whom = f"for gang {job.uid} (priority {job.priority} > {victim.priority})"
    if all(t.idle for t in bundle.tasks):
        text = f"{pods} of gang {victim.uid} idle past its queue's idle-GPU grace evicted for gang {job.uid}"
    elif bundle.kind is BundleKind.WHOLE:
        text = f"gang {victim.uid} evicted whole ({pods}) {for_whom}"
    elif victim.ready_num() < victim.min_member:
        text = f"{pods} of gang {victim.uid}, already below its minAvailable {victim.min_member}, evicted {for_whom}"
    else:
        text = f"{pods} of gang {victim.uid} above its minAvailable {victim.min_member} evicted {for_whom}"
    return EvictionNote(NAME, job.uid, f"{NAME}: {text}")


def _victims(ssn: Session, job: Job) -> list[tuple[Job, list[Task]]]:
    """The other gangs of `job`'s queue and their Bound or Running, preemptable pods it may take: a lower-priority
    gang's, and any gang's idle-reclaimable ones."""
    return victim_members(ssn, job, PREEMPTABLE_STATUS,
                          lambda victim: victim.priority < job.priority if victim.queue == job.queue else None)


def _sort(ssn: Session, _queue: Queue, bundles: list[Bundle], need: Vec) -> list[Bundle]:
    return sort_for_preempt(bundles, need, ssn.dims.pods)


POLICY = Policy(NAME, EvictionKind.GANG_PREEMPT, skip_overused=False, victims=_victims, sort=_sort,
                note=preempt_note, may=lambda _ssn, _queue, _actor: True)


def admit_for_preemption(ssn: Session) -> list[Job]:
    """Admit the Pending gangs that enqueue refused for want of room their queue's lower-priority gangs hold
    (Volcano #4679, #4756: a job enqueue keeps Pending is never a preemptor, so a full queue never preempts).

    A gang is admitted (Inqueue, its minResources reserved as enqueue does) when the nodes' future idle room plus
    what the evictable members of lower-priority gangs of its queue hold covers its minResources, less what gangs
    admitted before it in this pass took. Nothing is evicted for it now: a Volcano Job's pods are made only once its
    PodGroup is admitted, and the whole placement is simulated on them in a later session before any eviction."""
    if "enqueue" not in ssn.conf.actions:
        return []  # allocate admits every Pending gang itself
    idle = ssn.arrays.future_idle().sum(axis=0) if ssn.nodes else ssn.dims.zeros()
    claimed: dict[str, Vec] = {}
    admitted: list[Job] = []
    waiting = PriorityQueue(ssn.job_order, [j for j in sorted(ssn.jobs.values(), key=lambda j: j.uid)
                                            if j.is_pending() and j.min_resources is not None])
    while not waiting.empty():
        job = waiting.pop()
        need = job.min_resources
        if need is None or ssn.queues[job.queue].state != "Open":
            continue
        held = [t.resreq for _, members in _victims(ssn, job) for t in members]
        if not held:
            continue
        room = idle + np.sum(held, axis=0) - claimed.get(job.queue, ssn.dims.zeros())
        if less_equal_on(need, room, need, ssn.dims.pods):
            ssn.job_enqueued(job)
            job.phase = "Inqueue"
            claimed[job.queue] = claimed.get(job.queue, ssn.dims.zeros()) + need
            admitted.append(job)
    return admitted


class GangPreempt:
    name = NAME

    def execute(self, ssn: Session) -> None:
        admit_for_preemption(ssn)
        run(ssn, POLICY)


register_action(NAME, parse_arguments)(GangPreempt)
