"""overcommit: admit jobs into `Inqueue` while the cluster, overcommitted by a factor, has room for their minimum.

Mirrors Volcano's `plugins/overcommit/overcommit.go`. idle = total × factor − Σ node used (less what
idle-reclaimable tasks hold, a Lapilli addition: `lapilli.idlegpu`); inqueue = Σ minResources
of Inqueue jobs + Σ max(minResources − allocated, 0) of Running jobs that already hold their gang minimum. A job
with minResources is enqueueable iff inqueue + minResources ≤ idle on the dimensions minResources requests (strict,
`pods` ignored); once enqueued its minResources count as inqueue for the rest of the session.

Arguments: `overcommit-factor` (default 1.2) and, as in Volcano, `overcommit-factor.<resource>` per resource;
any factor below 1 falls back to 1.2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np

from extender.engine.arguments import Arguments, ConfError, number
from extender.engine.interface import PERMIT, REJECT, SessionView, Vote
from extender.engine.model import ALLOCATED_STATUS, Job
from extender.engine.registry import register_plugin
from lapilli.resources.vector import Vec, less_equal_on

FACTOR_KEY: Final = "overcommit-factor"
FACTOR_PREFIX: Final = "overcommit-factor."
DEFAULT_FACTOR: Final = 1.2
OVERUSED_MESSAGE: Final = "resource in cluster is overused"


def _factor(arguments: Arguments, key: str) -> float:
    value = number(arguments, key, DEFAULT_FACTOR)
    # Volcano logs and falls back rather than failing: a factor below 1 would shrink the cluster.
    return value if value >= 1.0 else DEFAULT_FACTOR


@dataclass(frozen=True, slots=True)
class OvercommitArgs:
    factor: float = DEFAULT_FACTOR
    resource_factors: tuple[tuple[str, float], ...] = ()


def parse_arguments(arguments: Arguments) -> OvercommitArgs:
    resource_factors: dict[str, float] = {}
    for key in arguments:
        if key.startswith(FACTOR_PREFIX):
            resource = key[len(FACTOR_PREFIX) :]
            if not resource:
                raise ConfError(f"argument {key}: names no resource")
            resource_factors[resource] = _factor(arguments, key)
    return OvercommitArgs(factor=_factor(arguments, FACTOR_KEY), resource_factors=tuple(resource_factors.items()))


class OvercommitPlugin:
    name = "overcommit"

    def __init__(self, args: OvercommitArgs) -> None:
        self.factor = args.factor
        self.resource_factors = dict(args.resource_factors)
        self.idle: Vec = np.zeros(0)
        self.inqueue: Vec = np.zeros(0)
        # PodGroup events this plugin raised, when the session has no event hook of its own.
        self.rejected: dict[str, str] = {}

    def on_session_open(self, ssn: SessionView) -> None:
        factors = np.full(ssn.dims.size, self.factor)
        for resource, factor in self.resource_factors.items():
            if resource in ssn.dims.index:
                factors[ssn.dims.index[resource]] = factor
        used = ssn.arrays.used.sum(axis=0) if len(ssn.nodes) else ssn.dims.zeros()
        # What idle-reclaimable tasks hold counts as room: a job admitted into it gets it through preempt or reclaim
        # (`Task.idle`); without this, a cluster full of idle GPUs would admit nobody who could take them.
        for task in ssn.idle_tasks:
            used = used - task.resreq
        self.idle = ssn.total * factors - used
        self.inqueue = ssn.dims.zeros()
        for job in ssn.jobs.values():
            if job.min_resources is None:
                continue
            if job.phase == "Inqueue":
                self.inqueue += job.min_resources
            elif (job.phase == "Running" and job.count(ALLOCATED_STATUS) >= job.min_member) or job.degraded():
                # A running gang keeps the part of its minimum it has not been given yet; so does one regaining
                # members it lost (model.Job.degraded), before new work.
                self.inqueue += np.maximum(job.min_resources - job.allocated, 0.0)
        ssn.add_job_enqueueable(lambda job: self._enqueueable(ssn, job))
        ssn.add_job_enqueued(self._enqueued)

    def _enqueueable(self, ssn: SessionView, job: Job) -> Vote:
        if job.min_resources is None:
            return PERMIT
        wanted = self.inqueue + job.min_resources
        if less_equal_on(wanted, self.idle, job.min_resources, ssn.dims.pods):
            return PERMIT
        self.rejected[job.uid] = OVERUSED_MESSAGE
        ssn.record_event(job.uid, "Normal", "Unschedulable", OVERUSED_MESSAGE)
        return REJECT

    def _enqueued(self, job: Job) -> None:
        if job.min_resources is not None:
            self.inqueue = self.inqueue + job.min_resources

    def on_session_close(self, ssn: SessionView) -> None:
        self.idle = np.zeros(0)
        self.inqueue = np.zeros(0)


register_plugin("overcommit", parse_arguments, OvercommitPlugin)
