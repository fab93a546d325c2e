"""One engine session for the service, run off the event loop: the decisions plus what the verbs need after it
(each node's room once the plan is counted, for prioritize and for re-planning one pod in filter)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from extender.engine.conf import SchedulerConf
from extender.engine.framework import ACTIONS
from extender.engine.results import Decisions, decisions
from extender.engine.run import open_session
from extender.engine.snapshot import Snapshot
from lapilli.resources.vector import Dims

_UNREADY = re.compile(r"^(\d+)/(\d+) tasks in gang unschedulable")


@dataclass(slots=True)
class Outcome:
    decisions: Decisions
    dims: Dims
    node_index: dict[str, int]
    allocatable: npt.NDArray[np.float64]
    idle: npt.NDArray[np.float64]
    gang_of_pod: dict[str, str]
    min_member: dict[str, int]
    reasons: dict[str, str] = field(default_factory=dict)
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


def run(snap: Snapshot, conf: SchedulerConf) -> Outcome:
    start = time.perf_counter()
    ssn = open_session(snap, conf)
    for name in conf.actions:
        ACTIONS[name]().execute(ssn)
    ssn.close()
    result = decisions(ssn)
    gang_of_pod = {f"{p.namespace}/{p.name}": f"{p.namespace}/{p.group}" for p in snap.pods.values() if p.group}
    min_member = {key: pg.min_member for key, pg in snap.podgroups.items()}
    outcome = Outcome(
        decisions=result,
        dims=ssn.dims,
        node_index={n.name: n.idx for n in ssn.nodes},
        allocatable=ssn.arrays.allocatable.copy(),
        idle=ssn.arrays.idle(),
        gang_of_pod=gang_of_pod,
        min_member=min_member,
    )
    for key, status in result.podgroups.items():
        pg = snap.podgroups[key]
        outcome.reasons[key] = short_reason(status, pg.min_member, pg.queue)
    outcome.seconds = time.perf_counter() - start
    return outcome
