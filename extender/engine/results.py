"""What a session decided, as typed values: binds, evictions, pipelined tasks, PodGroup and Queue status, and the
room each node has left. Numbers stay numbers (resource vectors in Volcano units over `Decisions.dims`); quantity
strings are made only at the JSON/CLI edge (`to_json`, `resource_list`), so the service reads counts, codes and
vectors instead of parsing text back.

PodGroup phase follows Volcano's `getPodGroupPhase` (session close): Unknown when a gang with running tasks became
unschedulable this session; Running (or Completed when every scheduled task ended) once scheduled tasks reach
minMember; otherwise Inqueue stays Inqueue and anything else is Pending — except (Lapilli) a gang that ran and still
holds members: Unknown while it is short of minMember, its phase kept while the members it regained bind. Queue
`allocated` is the sum of requests of allocated tasks, propagated to every ancestor. A gang that lost pods to an
eviction gets condition `lapilli.io/Evicted` naming the gang the room went to.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final

import numpy as np
import numpy.typing as npt

from extender.engine.model import ALLOCATED_STATUS, SCHEDULED_STATUS, Condition, Job, TaskStatus
from extender.engine.parking import parkable
from extender.engine.session import EvictionNote, Session
from extender.engine.status import SUCCESS, Status
from lapilli.devices.assign import PodDevices, encode_pod_devices
from lapilli.meta import JSON
from lapilli.resources.quantity import format_quantity
from lapilli.resources.units import MEMORY, PODS
from lapilli.resources.vector import Dims, Vec, sequential_sum

# Lapilli's own PodGroup condition for the last time the scheduler evicted the gang's pods: status True from that
# session until the gang is ready again (then False, reason and message kept); reason = which eviction.
EVICTED_CONDITION: Final = "lapilli.io/Evicted"
EVICTED_REASONS: Final = {"gangpreempt": "GangPreempted", "gangreclaim": "GangReclaimed", "preempt": "Preempted",
                          "reclaim": "Reclaimed"}


@dataclass(frozen=True, slots=True)
class PodGroupResult:
    """A PodGroup after the session: what Volcano writes to its status, and what the service needs besides."""

    queue: str
    phase: str
    conditions: tuple[Condition, ...]  # carried over, then this session's (`condition`)
    condition: Condition | None  # Unschedulable or Scheduled, when the gang plugin judged the job this session
    running: int
    succeeded: int
    failed: int
    min_member: int
    ready: int  # tasks Volcano counts as ready (allocated, binding, bound, running, succeeded)
    pending: int
    tasks: int
    status: Status = SUCCESS  # for a job that is not ready: why not (code, Volcano's `JobInfo.FitError` text)
    hypernode: str = ""  # the HyperNode its placed tasks are under (a job with a network topology), "" for none

    @property
    def unschedulable(self) -> bool:
        return self.condition is not None and self.condition.type == "Unschedulable"

    def to_json(self) -> dict[str, JSON]:
        return {
            "phase": self.phase,
            "conditions": [c.to_json() for c in self.conditions],
            "running": self.running,
            "succeeded": self.succeeded,
            "failed": self.failed,
        }


@dataclass(frozen=True, slots=True)
class QueueResult:
    """A Queue after the session; vectors in Volcano units over the session's dims."""

    state: str
    allocated: Vec  # requests of allocated tasks, propagated to every ancestor
    deserved: Vec | None  # None when no queue-share plugin reported the queue
    share: float

    def to_json(self, dims: Dims) -> dict[str, JSON]:
        return {
            "state": self.state,
            "allocated": resource_list(dims, self.allocated),
            "deserved": resource_list(dims, self.deserved) if self.deserved is not None else None,
            "share": self.share,
        }


@dataclass(frozen=True, slots=True)
class NodeRoom:
    """Every ready node's allocatable and what is idle once the session's decisions are counted (rows by name
    order, as the session built them); `future`: the room once the releasing pods are gone, less what pipelined
    tasks wait for there (a gang that evicted for it); `pipelined`: what those tasks wait for."""

    names: tuple[str, ...]
    allocatable: npt.NDArray[np.float64]
    idle: npt.NDArray[np.float64]
    future: npt.NDArray[np.float64]
    pipelined: npt.NDArray[np.float64]


@dataclass(slots=True)
class Decisions:
    dims: Dims
    binds: dict[str, str] = field(default_factory=dict)
    evictions: list[str] = field(default_factory=list)
    pipelined: dict[str, str] = field(default_factory=dict)
    podgroups: dict[str, PodGroupResult] = field(default_factory=dict)
    queues: dict[str, QueueResult] = field(default_factory=dict)
    nodes: NodeRoom | None = None
    evicted_by: dict[str, str] = field(default_factory=dict)  # pod -> the action that evicted it (run_session)
    eviction_notes: dict[str, EvictionNote] = field(default_factory=dict)  # pod -> why (who the room is for)
    # Jobs judged this session that may be left out of the next ones (`parking.parkable`); parked jobs, which the
    # session left out, have no entry in `podgroups`.
    parkable: list[str] = field(default_factory=list)
    # PodGroup -> sub-gang -> HyperNode gang eviction nominated and allocate has not redeemed yet: the next
    # session's `Snapshot.nominations`.
    nominations: dict[str, dict[str, str]] = field(default_factory=dict)
    domains: dict[str, frozenset[str]] = field(default_factory=dict)  # a PodGroup's `hypernode` -> its nodes
    # bound or pipelined pod -> the vGPU cards it was given (deviceshare), per asking container
    devices: dict[str, PodDevices] = field(default_factory=dict)
    # node -> its vGPU cards once the session's decisions are counted: (uuid, MB in use, MB, pods, split) per card
    cards: Mapping[str, tuple[tuple[str, int, int, int, int], ...]] = field(default_factory=dict)

    def to_json(self) -> dict[str, JSON]:
        """The `lapilli schedule -o json` document (DESIGN.md); `devices` (each placed pod's cards, as the
        `volcano.sh/vgpu-ids-new` annotation writes them) only when some pod was given cards."""
        extra: dict[str, JSON] = {}
        if self.devices:
            extra["devices"] = {k: encode_pod_devices(v) for k, v in sorted(self.devices.items())}
        return {
            **extra,
            "binds": dict(sorted(self.binds.items())),
            "evictions": sorted(self.evictions),
            "pipelined": dict(sorted(self.pipelined.items())),
            "podgroups": {k: v.to_json() for k, v in sorted(self.podgroups.items())},
            "queues": {k: v.to_json(self.dims) for k, v in sorted(self.queues.items())},
            **({"nominations": {k: dict(sorted(v.items())) for k, v in sorted(self.nominations.items()) if v}}
               if any(self.nominations.values()) else {}),
        }


def resource_list(dims: Dims, vec: Vec) -> dict[str, str]:
    """A vector in Volcano units back to a Kubernetes ResourceList (zeros and infinities left out)."""
    out: dict[str, str] = {}
    for name, units in resource_units(dims, vec).items():
        if name in (MEMORY, PODS):
            out[name] = format_quantity(Fraction(units), binary=name == MEMORY)
        else:
            out[name] = format_quantity(Fraction(units) / 1000)
    return out


def resource_amounts(dims: Dims, vec: Vec) -> dict[str, float]:
    """The value of each `resource_list` quantity as a number (cores, bytes, a count), for metrics."""
    units = resource_units(dims, vec)
    return {name: value if name in (MEMORY, PODS) else value / 1000 for name, value in units.items()}


def resource_units(dims: Dims, vec: Vec) -> dict[str, int]:
    """The entries `resource_list` shows, in Volcano units rounded as it rounds them (milli-units; bytes for
    memory; a count for pods)."""
    out: dict[str, int] = {}
    for name, value in zip(dims.names, vec, strict=True):
        if not math.isfinite(value) or abs(value) < 1e-9:
            continue
        out[name] = round(value)
    return out


def podgroup_phase(ssn: Session, job: Job) -> str:
    condition = ssn.conditions.get(job.uid)
    if job.counts[TaskStatus.RUNNING] and condition is not None and condition[0] == "Unschedulable":
        return "Unknown"
    # Scheduled: Running, Bound, Succeeded, Failed, or Releasing on a node (counted from the job's counters).
    counts = job.counts
    releasing = 0
    if counts[TaskStatus.RELEASING]:
        releasing = sum(1 for t in job.tasks.values() if t.status is TaskStatus.RELEASING and t.node)
    scheduled = job.count(SCHEDULED_STATUS) + releasing
    if scheduled >= job.min_member and (scheduled or job.min_member == 0) and job.tasks:
        if scheduled and not (counts[TaskStatus.RUNNING] or counts[TaskStatus.BOUND] or releasing):
            return "Completed"  # every scheduled task has ended
        return "Running"
    if job.phase in ("Running", "Unknown") and job.count(ALLOCATED_STATUS):
        # A gang that ran and still holds members stays admitted while it regains the ones it lost (Unknown) or
        # binds them (its phase as it was): back in Pending it would wait for admission beside new work.
        return "Unknown" if job.degraded() else job.phase
    return "Inqueue" if job.phase == "Inqueue" else "Pending"


def evicted_condition(ssn: Session, job: Job) -> Condition | None:
    """This session's `lapilli.io/Evicted` for a gang that lost pods to it (the words of its pods' notes, which name
    the gang the room is for), or the carried-over one turned False once the gang is ready again; None when neither
    applies."""
    evicted = ssn.records.eviction_notes
    notes = [evicted[t.key] for t in job.tasks.values() if t.key in evicted] if evicted else []
    if notes:
        first = min(notes, key=lambda n: (n.action, n.preemptor, n.message))
        reason = EVICTED_REASONS.get(first.action, "Evicted")
        return Condition(EVICTED_CONDITION, "True", reason, first.message)
    old = next((c for c in job.conditions if c.type == EVICTED_CONDITION), None)
    if old is not None and old.status == "True" and job.is_ready():
        return Condition(old.type, "False", old.reason, old.message, old.extra)
    return None


def podgroup_result(ssn: Session, job: Job) -> PodGroupResult:
    evicted = evicted_condition(ssn, job)
    dropped = ("Unschedulable", "Scheduled", EVICTED_CONDITION) if evicted is not None else (
        "Unschedulable", "Scheduled")
    conditions = [c for c in job.conditions if c.type not in dropped]
    if evicted is not None:
        conditions.append(evicted)
    current = ssn.conditions.get(job.uid)
    condition = None
    if current is not None:
        kind, reason, message = current
        condition = Condition(kind, "True", reason, message)
        conditions.append(condition)
    ready = job.ready_num()
    return PodGroupResult(
        queue=job.queue,
        phase=podgroup_phase(ssn, job),
        conditions=tuple(conditions),
        condition=condition,
        running=job.counts[TaskStatus.RUNNING],
        succeeded=job.counts[TaskStatus.SUCCEEDED],
        failed=job.counts[TaskStatus.FAILED],
        min_member=job.min_member,
        ready=ready,
        pending=job.counts[TaskStatus.PENDING],
        tasks=len(job.tasks),
        # A ready gang needs no reason (the one without tasks still gets its fit error text, as Volcano's event).
        status=SUCCESS if job.is_ready() and job.tasks else ssn.job_status(job),
        hypernode=job.allocated_hypernode,
    )


def queue_results(ssn: Session) -> dict[str, QueueResult]:
    requests: dict[str, list[Vec]] = {name: [] for name in ssn.queues}  # in job and task order
    for job in ssn.jobs.values():
        placed = job.count(ALLOCATED_STATUS)
        if not placed:
            continue
        tasks = job.tasks.values()
        if placed == len(tasks):  # the usual placed gang: every task counts, no status to test
            requests[job.queue] += [task.resreq for task in tasks]
        else:
            requests[job.queue] += [task.resreq for task in tasks if task.status in ALLOCATED_STATUS]
    allocated = {name: sequential_sum(ssn.dims.zeros(), rows) for name, rows in requests.items()}
    # Volcano propagates a queue's allocation to every ancestor up to root.
    totals = {name: vec.copy() for name, vec in allocated.items()}
    for name, vec in allocated.items():
        seen = {name}
        parent = ssn.queues[name].parent or ("root" if name != "root" else "")
        while parent and parent in totals and parent not in seen:
            totals[parent] += vec
            seen.add(parent)
            parent = ssn.queues[parent].parent or ("root" if parent != "root" else "")
    out: dict[str, QueueResult] = {}
    for name, queue in ssn.queues.items():
        report = ssn.queue_reports.get(name)
        out[name] = QueueResult(
            state=queue.state,
            allocated=totals[name],
            deserved=report.deserved.copy() if report is not None else None,
            share=round(float(report.share), 6) if report is not None else 0.0,
        )
    return out


def decisions(ssn: Session) -> Decisions:
    out = Decisions(dims=ssn.dims, binds=dict(ssn.records.binds), evictions=list(ssn.records.evictions),
                    eviction_notes=dict(ssn.records.eviction_notes),
                    nominations={k: dict(v) for k, v in ssn.records.nominations.items() if v})
    for job in ssn.jobs.values():
        if job.uid in ssn.parked:
            continue
        if parkable(job, job.uid in ssn.tried):
            out.parkable.append(job.uid)
        if job.counts[TaskStatus.PIPELINED]:
            for task in job.tasks.values():
                if task.status is TaskStatus.PIPELINED and task.node:
                    out.pipelined[task.key] = task.node
        out.podgroups[job.uid] = podgroup_result(ssn, job)
        held = ssn.topology.tree.hypernodes.get(job.allocated_hypernode) if job.allocated_hypernode else None
        if held is not None and not held.virtual:
            out.domains[held.name] = held.nodes
    if ssn.assignments:
        tasks, binds, pipelined = ssn.tasks, out.binds, out.pipelined
        for uid, devices in ssn.assignments.items():
            placed = tasks.get(uid)
            if placed is not None:
                key = placed.key
                if key in binds or key in pipelined:
                    out.devices[key] = devices
    out.cards = ssn.card_report  # read lazily (deviceshare's `CardReport`): most callers never do
    out.queues = queue_results(ssn)
    out.nodes = NodeRoom(
        names=tuple(n.name for n in ssn.nodes), allocatable=ssn.arrays.allocatable.copy(), idle=ssn.arrays.idle(),
        future=ssn.arrays.future_idle(), pipelined=ssn.arrays.pipelined.copy()
    )
    return out
