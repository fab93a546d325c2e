"""Replay a live cluster forward in simulated time with the scheduler's own engine: when would each job start?

The simulator (`simulate` with `LapilliScheduler`, the scheduler's conf) starts from the cluster as it is: its
Nodes, Queues (with their decayed-usage records) and PriorityClasses, and its unfinished Volcano Jobs, every one
submitted at the replay's start with its real creation time. The first cycle puts the pods that run now back on
their nodes, so the jobs running now start at 0 and end after their remaining time; each later job runs for its
expected duration once it starts. A job whose end cannot be estimated runs past any horizon (`UNKNOWN_S`): whatever
waits only for its room never starts in the replay, and the caller says "unknown". Pods that belong to no replayed
job (plain pods, jobs the replay could not read) keep their room on their node for the whole replay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from assembly.sim.lapilli_driver import CREATED_AT, LapilliScheduler
from assembly.sim.loop import simulate
from assembly.sim.state import Cluster
from assembly.sim.workload import DURATION, SUBMIT_AT, WorkloadError, load_workload, to_resource_list
from extender.engine.conf import SchedulerConf
from lapilli.meta import Obj, key_of, name_of
from lapilli.resources.units import Units, pod_request, resource_list_units

UNKNOWN_S: Final = 10 * 365 * 86400.0  # an end that cannot be estimated: after any horizon
HORIZON_S: Final = 30 * 86400.0  # how far ahead the replay looks


@dataclass(frozen=True, slots=True)
class LiveJob:
    """A Volcano Job to replay: `run_s` is how long it still runs once it (re)starts in the replay — what is left
    for a running job, its whole expected duration for a waiting one; None when that cannot be estimated."""

    doc: Obj
    run_s: float | None
    created: float  # wall-clock creation time


@dataclass(slots=True)
class Forecast:
    """Seconds from the replay's start (None: not within the horizon), per Volcano Job `ns/name`."""

    started: dict[str, float | None] = field(default_factory=dict)
    finished: dict[str, float | None] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # jobs the simulator could not read, with why


class _Resume(LapilliScheduler):
    """The first cycle puts the pods that run now back on their nodes; later cycles are the engine's."""

    def __init__(self, conf: SchedulerConf, epoch: float, placed: Mapping[str, str]) -> None:
        super().__init__(conf, epoch)
        self.placed = dict(placed)
        self.resumed = False

    def cycle(self, cluster: Cluster, now: float) -> bool:
        if not self.resumed:
            self.resumed = True
            changed = False
            for key, node in self.placed.items():
                pod = cluster.pods.get(key)
                if pod is not None and node in cluster.nodes:
                    pod.node = node
                    changed = True
            if changed:
                return True
        return super().cycle(cluster, now)


def _job_document(job: LiveJob, now: float) -> dict[str, Any]:
    meta = dict(job.doc.get("metadata") or {})
    run_s = UNKNOWN_S if job.run_s is None else max(job.run_s, 0.0)
    meta["annotations"] = {**(meta.get("annotations") or {}), SUBMIT_AT: "0", DURATION: repr(run_s),
                           CREATED_AT: repr(job.created - now)}
    return {"apiVersion": job.doc.get("apiVersion"), "kind": "Job", "metadata": meta, "spec": job.doc.get("spec")}


def _with_room_taken(nodes: Sequence[Obj], others: Sequence[Obj]) -> list[dict[str, Any]]:
    """Nodes less what pods outside the replay hold on them."""
    held: dict[str, Units] = {}
    for pod in others:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            per = held.setdefault(str(node), {})
            for name, value in pod_request(pod.get("spec") or {}).items():
                per[name] = per.get(name, 0.0) + value
    out = []
    for node in nodes:
        taken = held.get(name_of(node))
        if not taken:
            out.append(dict(node))
            continue
        status = dict(node.get("status") or {})
        room = resource_list_units(status.get("allocatable") or status.get("capacity"))
        left = {k: max(v - taken.get(k, 0.0), 0.0) for k, v in room.items()}
        status["allocatable"] = to_resource_list(left)
        out.append({**node, "status": status})
    return out


def forward(nodes: Sequence[Obj], queues: Sequence[Obj], priority_classes: Sequence[Obj], jobs: Sequence[LiveJob],
            pods: Sequence[Obj], conf: SchedulerConf, now: float, horizon_s: float = HORIZON_S) -> Forecast:
    """Replay from `now` (wall clock): `pods` are the cluster's pods; those placed on a node that belong to a
    replayed job are put back there, the others keep their room."""
    base = [*nodes, *queues, *priority_classes]
    forecast = Forecast()
    docs = []
    try:
        load_workload(base)
        fixed = [*queues, *priority_classes, *nodes[:1]]  # what a Job's validity depends on, read once
    except WorkloadError as exc:
        forecast.skipped = {key_of(job.doc): str(exc) for job in jobs}
        return forecast
    for job in jobs:
        doc = _job_document(job, now)
        try:
            load_workload([*fixed, doc])
        except WorkloadError as exc:
            forecast.skipped[key_of(job.doc)] = str(exc)
            continue
        docs.append(doc)
    work = load_workload([*base, *docs]) if docs else None
    sim_pods = {f"{j.namespace}/{p.name}" for j in (work.jobs if work else []) for p in j.pods}
    placed, others = {}, []
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if not node or phase not in ("Pending", "Running"):
            continue
        if key_of(pod) in sim_pods:
            placed[key_of(pod)] = str(node)
        else:
            others.append(pod)
    if work is None:
        return forecast
    work.nodes = _with_room_taken(work.nodes, others)
    result = simulate(work, _Resume(conf, now, placed), until=horizon_s)
    for key, outcome in result.jobs.items():
        forecast.started[key] = outcome.started
        forecast.finished[key] = outcome.finished
    return forecast


__all__ = ["HORIZON_S", "UNKNOWN_S", "Forecast", "LiveJob", "forward"]
