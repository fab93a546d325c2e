"""What a session decided, as plain data: binds, evictions, pipelined tasks, PodGroup status and Queue status.

PodGroup phase follows Volcano's `getPodGroupPhase` (session close): Unknown when a gang with running tasks became
unschedulable this session; Running (or Completed when every scheduled task ended) once scheduled tasks reach
minMember; otherwise Inqueue stays Inqueue and anything else is Pending. Queue `allocated` is the sum of requests
of allocated tasks, propagated to every ancestor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from extender.engine.model import ALLOCATED_STATUS, SCHEDULED_STATUS, Job, TaskStatus
from extender.engine.session import Session
from lapilli.resources.quantity import format_quantity
from lapilli.resources.units import MEMORY, PODS
from lapilli.resources.vector import Dims, Vec


@dataclass(slots=True)
class Decisions:
    binds: dict[str, str] = field(default_factory=dict)
    evictions: list[str] = field(default_factory=list)
    pipelined: dict[str, str] = field(default_factory=dict)
    podgroups: dict[str, dict[str, Any]] = field(default_factory=dict)
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "binds": dict(sorted(self.binds.items())),
            "evictions": sorted(self.evictions),
            "pipelined": dict(sorted(self.pipelined.items())),
            "podgroups": dict(sorted(self.podgroups.items())),
            "queues": dict(sorted(self.queues.items())),
        }


def resource_list(dims: Dims, vec: Vec) -> dict[str, str]:
    """A vector in Volcano units back to a Kubernetes ResourceList (zeros and infinities left out)."""
    out: dict[str, str] = {}
    for name, value in zip(dims.names, vec, strict=True):
        if not math.isfinite(value) or abs(value) < 1e-9:
            continue
        if name in (MEMORY, PODS):
            out[name] = format_quantity(Fraction(round(value)), binary=name == MEMORY)
        else:
            out[name] = format_quantity(Fraction(round(value)) / 1000)
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
    return "Inqueue" if job.phase == "Inqueue" else "Pending"


def podgroup_status(ssn: Session, job: Job) -> dict[str, Any]:
    conditions = [c for c in job.conditions if c.get("type") not in ("Unschedulable", "Scheduled")]
    current = ssn.conditions.get(job.uid)
    if current is not None:
        kind, reason, message = current
        conditions.append({"type": kind, "status": "True", "reason": reason, "message": message})
    return {
        "phase": podgroup_phase(ssn, job),
        "conditions": conditions,
        "running": job.counts[TaskStatus.RUNNING],
        "succeeded": job.counts[TaskStatus.SUCCEEDED],
        "failed": job.counts[TaskStatus.FAILED],
    }


def queue_status(ssn: Session) -> dict[str, dict[str, Any]]:
    allocated: dict[str, Vec] = {name: ssn.dims.zeros() for name in ssn.queues}
    for job in ssn.jobs.values():
        if not job.count(ALLOCATED_STATUS):
            continue
        for task in job.tasks.values():
            if task.status in ALLOCATED_STATUS:
                allocated[job.queue] += task.resreq
    # Volcano propagates a queue's allocation to every ancestor up to root.
    totals = {name: vec.copy() for name, vec in allocated.items()}
    for name, vec in allocated.items():
        seen = {name}
        parent = ssn.queues[name].parent or ("root" if name != "root" else "")
        while parent and parent in totals and parent not in seen:
            totals[parent] += vec
            seen.add(parent)
            parent = ssn.queues[parent].parent or ("root" if parent != "root" else "")
    out: dict[str, dict[str, Any]] = {}
    for name, queue in ssn.queues.items():
        report = ssn.queue_reports.get(name)
        out[name] = {
            "state": queue.state,
            "allocated": resource_list(ssn.dims, totals[name]),
            "deserved": resource_list(ssn.dims, report.deserved) if report is not None else None,
            "share": round(float(report.share), 6) if report is not None else 0.0,
        }
    return out


def decisions(ssn: Session) -> Decisions:
    out = Decisions(binds=dict(ssn.records.binds), evictions=list(ssn.records.evictions))
    for job in ssn.jobs.values():
        if job.counts[TaskStatus.PIPELINED]:
            for task in job.tasks.values():
                if task.status is TaskStatus.PIPELINED and task.node:
                    out.pipelined[task.key] = task.node
        out.podgroups[job.uid] = podgroup_status(ssn, job)
    out.queues = queue_status(ssn)
    return out


