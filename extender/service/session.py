"""One engine session for the service, run off the event loop (in the session process by default): new gang plans,
evictions, the status writes that changed and are due, the PodGroup events that are due, and what the verbs need
after it (each node's room once the plan is counted, for prioritize and for re-planning one pod in filter)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from extender.engine.conf import SchedulerConf
from extender.engine.results import Decisions, PodGroupResult, QueueResult, resource_list
from extender.engine.run import run_session
from extender.engine.snapshot import Snapshot
from extender.engine.status import Code, Status
from extender.service.metrics import queue_job_counts
from extender.service.pacing import Pacer
from extender.service.parking import Parking
from extender.service.status import (
    READY_MESSAGE,
    UNSCHEDULABLE,
    UNSCHEDULABLE_PHASES,
    podgroup_event,
    podgroup_status,
    queue_status,
    unschedulable_message,
)
from lapilli.devices.assign import PodDevices
from lapilli.kube.events import EventType
from lapilli.meta import resource_version, uid_of
from lapilli.resources.vector import TOLERANCE, Dims
from lapilli.times import rfc3339
from lapilli.topology import CLUSTER_TOP


class GangPlan(NamedTuple):
    """A gang the session placed: its bind quorum, where each member goes, the HyperNode it was placed in ("" for
    none: a re-plan keeps every member inside it, `Outcome.domains` holds its nodes) and each member's vGPU cards."""

    min_member: int
    nodes: dict[str, str]  # pod key -> node
    domain: str = ""
    devices: dict[str, PodDevices] = {}  # pod key -> cards (members that ask for none are not in it)


class Eviction(NamedTuple):
    """One pod the session evicts: the metrics' labels and what its Events say."""

    action: str  # preempt | reclaim | gangpreempt | gangreclaim
    queue: str  # the evicted pod's queue
    reason: str = ""  # why, naming the gang the room is for (the Event's message)
    podgroup: str = ""  # the evicted pod's PodGroup (ns/name), which gets an Event too
    uid: str = ""  # the pod's uid, for its Event


class StatusWrite(NamedTuple):
    kind: str  # "PodGroup" | "Queue"
    key: str
    status: dict[str, Any]  # the status (PodGroup) or a merge patch of it (Queue)


class EventWrite(NamedTuple):
    """A PodGroup event that is due (already paced)."""

    key: str
    uid: str
    type: EventType
    reason: str
    message: str


@dataclass(slots=True)
class Outcome:
    """What a session hands back to the verbs' process: small on purpose, since it crosses a pipe and is
    unpickled on the event loop that answers the verbs."""

    evictions: list[str]
    new_plans: dict[str, GangPlan]
    reasons: dict[str, Status]  # gang without a plan -> the one-line reason filter gives, and its code
    status_writes: list[StatusWrite]
    events: list[EventWrite]
    queues: dict[str, QueueResult]  # vectors over `dims`
    dims: Dims
    node_index: dict[str, int]
    allocatable: npt.NDArray[np.float64]
    idle: npt.NDArray[np.float64]
    seconds: float = 0.0
    evicted_by: dict[str, Eviction] = field(default_factory=dict)  # pod -> which action, from which queue
    # (queue, phase) -> PodGroups, with the phases this session's status writes give: `lapilli_queue_jobs`.
    queue_jobs: dict[tuple[str, str], int] = field(default_factory=dict)
    domains: dict[str, frozenset[str]] = field(default_factory=dict)  # HyperNode of a new plan -> its nodes
    nominations: dict[str, dict[str, str]] = field(default_factory=dict)  # carried to the next session
    # Nodes where pipelined members wait for room (a gang that evicted for it waits for its victims to leave) ->
    # the room a pod that passes filter without a plan may still take there once they are gone (over `dims`).
    promised: dict[str, npt.NDArray[np.float64]] = field(default_factory=dict)


def row_names(outcome: Outcome) -> list[str]:
    """Each node row's name: the inverse of `outcome.node_index`, for answers that pick rows by number."""
    names = [""] * len(outcome.node_index)
    for node, row in outcome.node_index.items():
        names[row] = node
    return names


UNRESOLVED: Final = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
# A gang no session has judged yet: kube-scheduler's preemption would not place it either.
WAITING: Final = Status(UNRESOLVED, "waiting for a scheduling session")


def short_reason(pg: PodGroupResult) -> Status:
    """`3/4 pods placeable` (Unschedulable unless no eviction could help, see `Session.job_status`), or why the gang
    was not admitted: the one line kube-scheduler shows."""
    if pg.phase == "Pending":
        return Status(UNRESOLVED, f"not admitted to queue {pg.queue} yet (PodGroup Pending)")
    if pg.unschedulable:
        return Status(pg.status.code, f"{pg.ready}/{pg.min_member} pods placeable")
    return WAITING


def bind_quorum(pg: PodGroupResult | None, min_member: int) -> int:
    """How many members must be bound or at bind together before the permit cache lets any of them go.

    `minMember`, unless the session committed the gang with fewer: Volcano counts pending BestEffort tasks as ready
    (`IsReady`), so a gang whose tasks request nothing binds what backfill placed, and waiting at bind for
    members no session planned would hold the placed ones until the permit times out, every time. The members
    the session sees ready are the bound ones, the planned ones still on their way and the ones it just planned.
    """
    return min_member if pg is None else min(min_member, pg.ready)


class CurrentStatus(Protocol):
    """The stored objects' statuses, to write only what changed (a reflector store fits)."""

    def get(self, key: str, /) -> Mapping[str, Any] | None: ...


def decide(snap: Snapshot, conf: SchedulerConf, placements: Mapping[str, str], parking: Parking | None,
           base: Snapshot | None, quiet: bool | None = None, inputs: object = None) -> Decisions:
    """The engine's decisions over `snap` (the cluster with `placements` overlaid). With `parking` (and `base`, the
    cluster state's own snapshot the rule reads), parked gangs are left out, and a session in which nothing changed
    since the last one is not run again: its result is the last one (`extender/service/parking.py`). `quiet`: what
    the caller found `parking.quiet` to say (None: ask it now); `inputs`: the session's other inputs (idle pods,
    nominations, planned cards), compared whole."""
    if parking is None:
        # The session's clock is the wall clock: what decays with time (fairshare's usage records) is stamped so.
        return run_session(snap, conf, time.time())
    if parking.quiet(conf, placements, inputs) if quiet is None else quiet:
        assert parking.last is not None
        return parking.last
    left_out = parking.before(conf, placements, base if base is not None else snap, inputs)
    parked = parking.results(left_out)
    return parking.adopt(run_session(snap, conf, time.time(), parked=frozenset(parked)), parked)


def run(
    snap: Snapshot,
    conf: SchedulerConf,
    placements: Mapping[str, str],
    podgroups: CurrentStatus,
    queues: CurrentStatus,
    pacer: Pacer,
    now: float | None = None,
    parking: Parking | None = None,
    base: Snapshot | None = None,
    quiet: bool | None = None,
    inputs: object = None,
) -> Outcome:
    """`pacer` remembers earlier sessions' writes; `now` is its clock (monotonic seconds); `parking`, `base`,
    `quiet` and `inputs`: see `decide`."""
    start = time.perf_counter()
    now = time.monotonic() if now is None else now
    result = decide(snap, conf, placements, parking, base, quiet, inputs)
    evicted_by: dict[str, Eviction] = {}
    for key, action in result.evicted_by.items():  # which action evicted it, and its queue: the metrics' labels
        pod = snap.pods.get(key)
        pg = snap.podgroups.get(f"{pod.namespace}/{pod.group}") if pod is not None else None
        note = result.eviction_notes.get(key)
        evicted_by[key] = Eviction(action, pg.queue if pg is not None else "", note.message if note else "",
                                   pg.key if pg is not None else "", pod.uid if pod is not None else "")
    new_plans: dict[str, GangPlan] = {}
    for pod_key, node in result.binds.items():
        pod = snap.pods[pod_key]
        gang = f"{pod.namespace}/{pod.group}"
        if pod.group and gang in snap.podgroups:
            if gang not in new_plans:
                judged = result.podgroups.get(gang)
                quorum = bind_quorum(judged, snap.podgroups[gang].min_member)
                domain = judged.hypernode if judged is not None and judged.hypernode != CLUSTER_TOP else ""
                new_plans[gang] = GangPlan(quorum, {}, domain, {})
            new_plans[gang].nodes[pod_key] = node
            if pod_key in result.devices:
                new_plans[gang].devices[pod_key] = result.devices[pod_key]
    planned = {f"{snap.pods[p].namespace}/{snap.pods[p].group}" for p in placements if p in snap.pods}
    planned |= set(new_plans)
    settled = parking.settled if parking is not None else None
    reasons, writes, events, phases = _podgroups(result, podgroups, planned, pacer, now, settled)
    for name, computed in result.queues.items():
        current = (queues.get(name) or {}).get("status") or {}
        patch = queue_status(current, resource_list(result.dims, computed.allocated))
        if patch is not None and pacer.queue_due(name, patch, now):
            writes.append(StatusWrite("Queue", name, patch))
    pacer.retain(result.podgroups, result.queues)
    room = result.nodes
    assert room is not None  # decisions() always reports the nodes
    return Outcome(
        evictions=result.evictions,
        new_plans=new_plans,
        reasons=reasons,
        status_writes=writes,
        events=events,
        queues=result.queues,
        dims=result.dims,
        node_index={name: row for row, name in enumerate(room.names)},
        allocatable=room.allocatable,
        # What filter's re-plans may give away: not the room promised to pipelined members.
        idle=np.minimum(room.idle, room.future),
        seconds=time.perf_counter() - start,
        evicted_by=evicted_by,
        promised={room.names[row]: np.maximum(room.future[row], 0.0)
                  for row in np.flatnonzero(np.any(room.pipelined > TOLERANCE, axis=1))},
        queue_jobs=queue_job_counts((pg.queue, phases.get(key, pg.phase)) for key, pg in snap.podgroups.items()),
        domains={p.domain: result.domains[p.domain] for p in new_plans.values() if p.domain in result.domains},
        nominations=result.nominations,
    )


def _podgroups(
    result: Decisions, podgroups: CurrentStatus, planned: set[str], pacer: Pacer, now: float,
    settled: dict[str, tuple[PodGroupResult, str, bool, str]] | None = None,
) -> tuple[dict[str, Status], list[StatusWrite], list[EventWrite], dict[str, str]]:
    """Filter's reasons for the gangs without a plan, the PodGroup status writes, the events that are due, and
    each PodGroup's phase once its write lands. `settled` (kept across sessions) remembers the gangs whose status
    is stored as computed, so the same result over the same stored object is not compared again."""
    stamp = rfc3339(time.time())
    reasons: dict[str, Status] = {}
    writes: list[StatusWrite] = []
    events: list[EventWrite] = []
    phases: dict[str, str] = {}
    if settled is not None:
        for key in [k for k in settled if k not in result.podgroups]:
            del settled[key]
    for key, computed in result.podgroups.items():
        if key not in planned:
            reasons[key] = short_reason(computed)
        stored = podgroups.get(key) or {}
        is_planned = key in planned
        known = settled.get(key) if settled is not None else None
        if known is not None and known[0] is computed and known[1] == resource_version(stored) and (
                known[2] == is_planned):
            new, phase = None, known[3]
        else:
            current = stored.get("status") or {}
            new = podgroup_status(current, computed.to_json(), stamp, planned=is_planned)
            version = resource_version(stored)
            sent = new is not None and pacer.in_flight(key, new, version, now)
            held = new is not None and (sent or not pacer.podgroup_due(key, current, new, now, version))
            phase = ((new if sent else None) or current).get("phase") or ""  # what lands with a write on its way
            if held:
                new = None  # a later session writes it; not remembered as stored
            if new is not None:
                writes.append(StatusWrite("PodGroup", key, new))
                phase = new.get("phase") or ""
            if settled is not None and new is None and not held:
                settled[key] = (computed, version, is_planned, phase)
        phases[key] = phase
        # A planned gang not yet Running has its pods on their way through kube-scheduler's filter and bind and
        # the permit cache. Volcano warns here too ("0/4 tasks in gang unschedulable: …, 4 Binding"), its phase
        # counting only bound tasks; the extender's bind takes longer, so it waits for the API server's word
        # (Scheduled once the pods show bound) rather than call a binding gang unschedulable.
        if key in planned and phase in UNSCHEDULABLE_PHASES:
            continue
        event = _podgroup_event(computed, key, phase, new is not None, pacer, now)
        if event is not None:
            events.append(EventWrite(key, uid_of(stored), *event))
    return reasons, writes, events, phases


def _podgroup_event(
    pg: PodGroupResult, key: str, phase: str, updated: bool, pacer: Pacer, now: float
) -> tuple[EventType, str, str] | None:
    """(type, reason, message) of the event `key` gets this session, if one is due."""
    kind = podgroup_event(phase, updated)
    if kind is None:
        return None
    type_, reason = kind

    def message() -> str:
        if kind != UNSCHEDULABLE:
            return READY_MESSAGE
        return unschedulable_message(pg.pending, pg.tasks, pg.status.message)

    text = pacer.event_due(key, reason, now, message)
    return None if text is None else (type_, reason, text)
