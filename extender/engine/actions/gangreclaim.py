"""gangreclaim: a queue owed room takes it back from other queues — their gangs' surplus members, or whole gangs —
never single pods of many gangs (Volcano's `actions/gangreclaim/gangreclaim.go`, v1.15+).

Queues holding a valid, admitted job go in QueueOrder; an overused queue is skipped (as reclaim). Each starving job
of the queue (JobOrder) gets one Statement, committed only if the job is then pipelined; a job whose queue may not
reclaim its whole need (Preemptive, asked with the gang as one request) or whose pods say `preemptionPolicy: Never`
evicts nothing. Candidates in a domain are Running, preemptable pods of jobs of *other*, reclaimable queues whose
PodGroup may lose pods to gang eviction. Bundles go in victim-queue order (`VictimQueueOrderFn`, else reverse queue
order) after surplus-before-whole; the plugins' UnifiedEvictable vote decides, and the queue-share plugins
(proportion, capacity) guard it whatever tier decides: a gang goes only while its queue holds more than its deserved
share, as their reclaim vote says. Victim bundles, the domain search, the simulated placement and the reprieve are
`gang_evict.evict_for_gang`; each evicted pod carries a note naming the gang it makes room for.

Usable beside `reclaim` or instead of it (see gangpreempt).
"""

from __future__ import annotations

from typing import Final

from extender.engine.actions.bundles import Bundle, BundleKind, sort_for_reclaim
from extender.engine.actions.gang_evict import Policy, parse_arguments, run, victim_members
from extender.engine.actions.registry import register_action
from extender.engine.interface import EvictionKind
from extender.engine.model import Job, Queue, Task, TaskStatus
from extender.engine.session import EvictionNote, Session
from lapilli.resources.vector import Vec

NAME = "gangreclaim"
RUNNING_ONLY: Final = frozenset({TaskStatus.RUNNING})  # reclaim takes Running pods only (Volcano)


def reclaim_note(job: Job, bundle: Bundle) -> EvictionNote:
    victim = bundle.job
    pods = f"{len(bundle.tasks)} pod(s)"
    for_whom = f"for gang {job.uid} of queue {job.queue}"
    if all(t.idle for t in bundle.tasks):
        text = f"{pods} of gang {victim.uid} of queue {victim.queue} idle past its idle-GPU grace evicted {for_whom}"
    elif bundle.kind is BundleKind.WHOLE:
        text = f"gang {victim.uid} of queue {victim.queue} evicted whole ({pods}) {for_whom}"
    else:
        text = f"{pods} of gang {victim.uid} of queue {victim.queue} evicted (its gang keeps running) {for_whom}"
    return EvictionNote(NAME, job.uid, f"{NAME}: {text}")


def _victims(ssn: Session, job: Job) -> list[tuple[Job, list[Task]]]:
    """The gangs of other queues and their Running, preemptable pods `job` may take: a reclaimable queue's, and any
    queue's idle-reclaimable ones (reclaimable or not)."""
    return victim_members(ssn, job, RUNNING_ONLY,
                          lambda victim: ssn.queues[victim.queue].reclaimable if victim.queue != job.queue else None)


def _sort(ssn: Session, queue: Queue, bundles: list[Bundle], need: Vec) -> list[Bundle]:
    return sort_for_reclaim(bundles, need, ssn.dims.pods, ssn.queue_of,
                            lambda left, right: ssn.victim_queue_order(left, right, queue))


POLICY = Policy(NAME, EvictionKind.GANG_RECLAIM, skip_overused=True, victims=_victims, sort=_sort,
                note=reclaim_note, may=lambda ssn, queue, actor: ssn.preemptive(queue, actor))


class GangReclaim:
    name = NAME

    def execute(self, ssn: Session) -> None:
        run(ssn, POLICY)


register_action(NAME, parse_arguments)(GangReclaim)
