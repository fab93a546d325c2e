"""One engine session for the service, run off the event loop (in the session process by default): new gang plans,
evictions, the status writes that changed and are due, the PodGroup events that are due, and what the verbs need
after it (each node's room once the plan is counted, for prioritize and for re-planning one pod in filter)."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from extender.engine.conf import SchedulerConf
from extender.engine.framework import ACTIONS
from extender.engine.model import TaskStatus
from extender.engine.results import decisions
from extender.engine.run import collector_paused, open_session
from extender.engine.session import Session
from extender.engine.snapshot import Snapshot
from extender.service.pacing import Pacer
from extender.service.status import (
    READY_MESSAGE,
    UNSCHEDULABLE,
    UNSCHEDULABLE_PHASES,
    podgroup_event,
    podgroup_status,
    queue_status,
    unschedulable_message,
)
from lapilli.kube.events import EventType
from lapilli.meta import uid_of
from lapilli.resources.vector import Dims

_UNREADY = re.compile(r"^(\d+)/(\d+) tasks in gang unschedulable")


@dataclass(slots=True)
class Outcome:
    """What a session hands back to the verbs' process: small on purpose, since it crosses a pipe and is
    unpickled on the event loop that answers the verbs."""

    evictions: list[str]
    new_plans: dict[str, tuple[int, dict[str, str]]]  # gang -> (minMember, pod -> node)
    reasons: dict[str, str]  # gang without a plan -> the one-line reason filter gives
    status_writes: list[tuple[str, str, dict[str, Any]]]  # (kind, key, status or patch)
    events: list[tuple[str, str, EventType, str, str]]  # (PodGroup key, uid, type, reason, message), paced
    queues: dict[str, dict[str, Any]]
    dims: Dims
    node_index: dict[str, int]
    allocatable: npt.NDArray[np.float64]
    idle: npt.NDArray[np.float64]
    seconds: float = 0.0


def short_reason(status: dict[str, object], min_member: int, queue: str) -> str:
    """`3/4 pods placeable`, or why the gang was not admitted: the one line kube-scheduler shows."""
    if status.get("phase") == "Pending":
        return f"not admitted to queue {queue} yet (PodGroup Pending)"
    for cond in status.get("conditions") or []:  # type: ignore[attr-defined]
        match = _UNREADY.match(str(cond.get("message", "")))
        if cond.get("type") == "Unschedulable" and match:
            unready = int(match.group(1))
            return f"{max(min_member - unready, 0)}/{min_member} pods placeable"
    return "waiting for a scheduling session"


def bind_quorum(ssn: Session, gang: str, min_member: int) -> int:
    """How many members must be bound or at bind together before the permit cache lets any of them go.

    `minMember`, unless the session committed the gang with fewer: Volcano counts pending BestEffort tasks as ready
    (`IsReady`), so a gang whose tasks request nothing binds what backfill placed, and waiting at bind for
    members no session planned would hold the placed ones until the permit times out, every time. The members
    the session sees ready are the bound ones, the planned ones still on their way and the ones it just planned.
    """
    job = ssn.jobs.get(gang)
    return min_member if job is None else min(min_member, job.ready_num())


class CurrentStatus(Protocol):
    """The stored objects' statuses, to write only what changed (a reflector store fits)."""

    def get(self, key: str, /) -> Mapping[str, Any] | None: ...


def run(
    snap: Snapshot,
    conf: SchedulerConf,
    placements: Mapping[str, str],
    podgroups: CurrentStatus,
    queues: CurrentStatus,
    pacer: Pacer,
    now: float | None = None,
) -> Outcome:
    """`pacer` remembers earlier sessions' writes; `now` is its clock (monotonic seconds)."""
    start = time.perf_counter()
    now = time.monotonic() if now is None else now
    with collector_paused():
        ssn = open_session(snap, conf)
        for name in conf.actions:
            ACTIONS[name]().execute(ssn)
        ssn.close()
        result = decisions(ssn)
    new_plans: dict[str, tuple[int, dict[str, str]]] = {}
    for pod_key, node in result.binds.items():
        pod = snap.pods[pod_key]
        gang = f"{pod.namespace}/{pod.group}"
        if pod.group and gang in snap.podgroups:
            new_plans.setdefault(gang, (bind_quorum(ssn, gang, snap.podgroups[gang].min_member), {}))[1][
                pod_key
            ] = node
    planned = {f"{snap.pods[p].namespace}/{snap.pods[p].group}" for p in placements if p in snap.pods}
    planned |= set(new_plans)
    reasons, writes, events = _podgroups(ssn, result.podgroups, podgroups, planned, pacer, now)
    for name, computed in result.queues.items():
        patch = queue_status((queues.get(name) or {}).get("status") or {}, computed)
        if patch is not None and pacer.queue_due(name, patch, now):
            writes.append(("Queue", name, patch))
    pacer.retain(result.podgroups, result.queues)
    return Outcome(
        evictions=result.evictions,
        new_plans=new_plans,
        reasons=reasons,
        status_writes=writes,
        events=events,
        queues=result.queues,
        dims=ssn.dims,
        node_index={n.name: n.idx for n in ssn.nodes},
        allocatable=ssn.arrays.allocatable.copy(),
        idle=ssn.arrays.idle(),
        seconds=time.perf_counter() - start,
    )


def _podgroups(
    ssn: Session,
    computed_statuses: Mapping[str, Mapping[str, Any]],
    podgroups: CurrentStatus,
    planned: set[str],
    pacer: Pacer,
    now: float,
) -> tuple[dict[str, str], list[tuple[str, str, dict[str, Any]]], list[tuple[str, str, EventType, str, str]]]:
    """Filter's reasons for the gangs without a plan, the PodGroup status writes, and the events that are due."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    reasons: dict[str, str] = {}
    writes: list[tuple[str, str, dict[str, Any]]] = []
    events: list[tuple[str, str, EventType, str, str]] = []
    for key, computed in computed_statuses.items():
        job = ssn.jobs[key]
        if key not in planned:
            reasons[key] = short_reason(computed, job.min_member, job.queue)
        stored = podgroups.get(key) or {}
        current = stored.get("status") or {}
        new = podgroup_status(current, computed, stamp, planned=key in planned)
        if new is not None:
            writes.append(("PodGroup", key, new))
        phase = (new or current).get("phase") or ""
        # A planned gang not yet Running has its pods on their way through kube-scheduler's filter and bind and
        # the permit cache. Volcano warns here too ("0/4 tasks in gang unschedulable: …, 4 Binding"), its phase
        # counting only bound tasks; the extender's bind takes longer, so it waits for the API server's word
        # (Scheduled once the pods show bound) rather than call a binding gang unschedulable.
        if key in planned and phase in UNSCHEDULABLE_PHASES:
            continue
        event = _podgroup_event(ssn, key, phase, new is not None, pacer, now)
        if event is not None:
            uid = uid_of(stored)
            events.append((key, uid, *event))
    return reasons, writes, events


def _podgroup_event(
    ssn: Session, key: str, phase: str, updated: bool, pacer: Pacer, now: float
) -> tuple[EventType, str, str] | None:
    """(type, reason, message) of the event `key` gets this session, if one is due."""
    kind = podgroup_event(phase, updated)
    if kind is None:
        return None
    type_, reason = kind
    job = ssn.jobs[key]

    def message() -> str:
        if kind != UNSCHEDULABLE:
            return READY_MESSAGE
        return unschedulable_message(job.counts[TaskStatus.PENDING], len(job.tasks), ssn.job_fit_error(job))

    text = pacer.event_due(key, reason, now, message)
    return None if text is None else (type_, reason, text)
