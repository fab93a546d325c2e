"""Parked gangs: which gangs a session may leave out because nothing they depend on has changed since a session
judged them unschedulable (kube-scheduler's unschedulable pods and queueing hints, by gang; Volcano re-tries every
gang every session, its #5551).

A gang is *parkable* at the end of a session when it was admitted (Inqueue), allocate tried it (its tasks found no
node, or its queue could not take them), it is neither ready nor pipelined, and none of its tasks is on a node or
best-effort (`parkable`). The caller
(the service) then leaves it out of later sessions — no action tries it, its PodGroup result is the one it got when
parked — until an event on one of the *channels* its answer reads says it must be tried again. What each channel
covers, for the rule that un-parks (`extender/service/parking.py`):

* `nodes` — a Node added, removed or changed (allocatable, labels, taints, readiness, anything the snapshot reads).
* `room` — room that may have grown: a pod that held room left its node, ended, began terminating or changed its
  request; a planned placement dropped or moved.
* `queues` — a Queue or PriorityClass added, removed or changed.
* `own` — the gang's own PodGroup (but the scheduler's own Unschedulable/Scheduled condition) or one of its pods.
* `conf` — the scheduler configuration changed.
* `requests` — what other gangs ask: a pod or PodGroup added, changed or removed, in any queue. Plugins that share
  queues by requests (proportion, capacity, hierarchical drf) read it. It un-parks every gang, not only the queue's:
  a new request moves what every queue deserves and so the order queues take turns in, and a gang judged before a
  parked one (in any queue) may then place less and leave it room.
* `placed` — pods on nodes: a pod placed (bound or planned) or a placed pod changed. Preempt and reclaim read it
  (a new possible victim), as would a predicate over other pods (inter-pod affinity).
* `time` — the session's clock. A plugin whose answer moves with time alone turns parking off.

Why the base channels suffice for allocate: a parked gang failed with the room it met at its turn; its turn now
meets no more room, since room only shrinks without a `room` event and jobs ordered before it can only have placed
more (planned placements stay assumed), and its own tasks, the nodes and queues are as they were; what its queue may
still take only shrinks as the queue's allocation grows, unless what the queue deserves grows (nodes, queues, and
for plugins that share by requests, `requests`). Skipping it changes nothing for the others: a gang that fails is
discarded whole and moves no queue's share.

`READS` names the channels each plugin and action reads beyond the base. **A plugin or action missing from it turns
parking off for any conf that names it**: a new plugin is safe by default and declares its channels to benefit. The
service's rule is checked against sessions without parking by a property test over random event sequences
(tests/service/test_parking_property.py).
"""

from __future__ import annotations

from typing import Final

from extender.engine.conf import SchedulerConf
from extender.engine.model import Job, Task, TaskStatus

NODES: Final = "nodes"
ROOM: Final = "room"
QUEUES: Final = "queues"
OWN: Final = "own"
CONF: Final = "conf"
REQUESTS: Final = "requests"
PLACED: Final = "placed"
TIME: Final = "time"

BASE: Final = frozenset({NODES, ROOM, QUEUES, OWN, CONF})

READS: Final[dict[str, frozenset[str]]] = {
    # plugins
    "binpack": frozenset(),
    "capacity": frozenset({REQUESTS}),
    "conformance": frozenset(),
    "deviceshare": frozenset(),  # cards free up only when pods leave (room) or a node's register changes (nodes)
    "drf": frozenset({REQUESTS}),  # hierarchical drf shares queues by requests
    "fairshare": frozenset({TIME}),  # usage decays with the session's clock
    "gang": frozenset(),
    # Where a gang may go is the HyperNodes with room for it (nodes, room), under the one it holds already (own);
    # the tree is HyperNodes, a kind the rule un-parks every gang for; gang eviction's nominations are an input.
    "network-topology-aware": frozenset(),
    "nodeorder": frozenset(),
    "overcommit": frozenset(),  # enqueue only: parked gangs are admitted already
    # host ports and what pod anti-affinity keeps away free up only when pods leave (room); a gang whose pods need
    # pods placed first (required affinity, spread) is never parked (`parkable`)
    "predicates": frozenset(),
    "priority": frozenset(),
    "proportion": frozenset({REQUESTS}),
    "task-topology": frozenset(),
    # actions
    "enqueue": frozenset(),
    "allocate": frozenset(),
    "backfill": frozenset(),  # a gang with best-effort tasks is never parked
    "preempt": frozenset({PLACED}),
    "reclaim": frozenset({PLACED}),
    # like preempt and reclaim: a pod placed is a new possible victim (gangpreempt's admission of a Pending gang
    # concerns gangs that were never admitted, so never parked)
    "gangpreempt": frozenset({PLACED}),
    "gangreclaim": frozenset({PLACED}),
}


def channels(conf: SchedulerConf) -> frozenset[str] | None:
    """The channels a parked gang's answer reads under `conf`, or None when parking is off (a plugin or action
    that declared nothing, or one that reads the clock)."""
    out = set(BASE)
    for name in (*conf.actions, *conf.plugin_names()):
        reads = READS.get(name)
        if reads is None or TIME in reads:
            return None
        out |= reads
    return frozenset(out)


def parkable(job: Job, tried: bool) -> bool:
    """Whether `job`, as a session leaves it, may be parked: allocate tried it (`tried`) and it got nowhere. A gang
    whose pods require affinity to other pods or spread over topology domains is never parked: a pod placed
    anywhere may let it in, even one placed earlier in the very session that would judge it (no channel says so
    beforehand), so it is judged every session, as before parking."""
    if not tried or job.phase != "Inqueue" or not job.tasks:
        return False
    if job.is_ready() or job.is_pipelined():
        return False
    tasks = job.tasks.values()
    if any(_waits_for_placed_pods(t) for t in tasks):
        return False
    return all(t.status is TaskStatus.PENDING and t.node is None and not t.best_effort for t in tasks)


def _waits_for_placed_pods(task: Task) -> bool:
    """Its required pod affinity or its spread constraints read where other pods are: a pod placed may satisfy
    them (a pod leaving, which anti-affinity waits for, is a `room` event)."""
    terms = task.terms
    return terms is not None and bool(terms.affinity or terms.spread)
