"""The live scheduler's session, run with a recorder: the same snapshot, conf, actions and plugins (`run_session`
itself), so what it reports is what the scheduler decides, not a second opinion.

`Recorder` is the session's `SessionProbe`: it notes the moments an explanation needs: each enqueue vote with the
admission numbers the plugins held when they voted, each queue that allocate skipped as overused, each task a queue
refused as not allocatable. Before the actions run it also records the order every queue's jobs and the queues
themselves had when the session opened. It reads the session only through `ExplainView`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cmp_to_key
from typing import Protocol

import numpy as np

from extender.engine.conf import SchedulerConf
from extender.engine.explain.fit import GangFit, gang_fit
from extender.engine.interface import ExplainView
from extender.engine.model import Job, Queue, Task
from extender.engine.plugins.overcommit import OvercommitPlugin
from extender.engine.results import Decisions
from extender.engine.run import open_view, run_session
from extender.engine.snapshot import Snapshot
from lapilli.resources.vector import Vec

# Plugins whose per-queue accounting decides admission and fair share (Volcano's proportion and capacity).
QUOTA_PLUGINS = ("proportion", "capacity")


class QueueAccount(Protocol):
    """What proportion's and capacity's per-queue records both hold."""

    allocated: Vec
    inqueue: Vec
    elastic: Vec
    guarantee: Vec
    real_capability: Vec
    deserved: Vec
    share: float


@dataclass(slots=True, frozen=True)
class QuotaView:
    """One quota plugin's numbers for one queue at one moment (copies)."""

    plugin: str
    allocated: Vec
    inqueue: Vec
    elastic: Vec
    guarantee: Vec
    real_capability: Vec
    deserved: Vec
    share: float


@dataclass(slots=True, frozen=True)
class ClusterView:
    """overcommit's numbers at one moment: idle = total × factor − used, inqueue = what admitted jobs reserve."""

    factor: float
    idle: Vec
    inqueue: Vec


@dataclass(slots=True)
class EnqueueVote:
    admitted: bool
    quotas: list[QuotaView]
    cluster: ClusterView | None


@dataclass(slots=True)
class OrderEntry:
    uid: str
    rank: int  # 1-based
    key: dict[str, float]  # what orders it: priority, share or drf_share, created


@dataclass(slots=True)
class Recorded:
    enqueue: dict[str, EnqueueVote] = field(default_factory=dict)  # job uid -> its vote
    overused: set[str] = field(default_factory=set)  # queues allocate skipped
    refused: dict[str, list[QuotaView]] = field(default_factory=dict)  # job uid -> quota numbers when refused
    queue_order: list[OrderEntry] = field(default_factory=list)
    job_order: dict[str, list[OrderEntry]] = field(default_factory=dict)  # queue -> its waiting jobs in order
    fit_after: dict[str, GangFit] = field(default_factory=dict)  # job uid -> where its pods could go after actions


def quota_views(ssn: ExplainView, queue: str) -> list[QuotaView]:
    out = []
    for name in QUOTA_PLUGINS:
        instance = ssn.plugin(name)
        attrs = getattr(instance, "attrs", None) if instance is not None else None
        attr: QueueAccount | None = attrs.get(queue) if isinstance(attrs, dict) else None
        if attr is None:
            continue
        out.append(QuotaView(name, attr.allocated.copy(), attr.inqueue.copy(), attr.elastic.copy(),
                             attr.guarantee.copy(), attr.real_capability.copy(), attr.deserved.copy(),
                             float(attr.share)))
    return out


def cluster_view(ssn: ExplainView) -> ClusterView | None:
    instance = ssn.plugin("overcommit")
    if not isinstance(instance, OvercommitPlugin) or not len(instance.idle):
        return None
    return ClusterView(float(instance.factor), np.array(instance.idle, copy=True),
                       np.array(instance.inqueue, copy=True))


def queue_share(ssn: ExplainView, queue: str) -> float | None:
    views = quota_views(ssn, queue)
    return views[0].share if views else None


def job_share(ssn: ExplainView, job: Job) -> float | None:
    drf = ssn.plugin("drf")
    share = getattr(drf, "share", None)
    return float(share(job.uid)) if callable(share) and job.uid in getattr(drf, "shares", {}) else None


class Recorder:
    """The `SessionProbe` that records what an explanation needs while the session runs."""

    def __init__(self, keys: Iterable[str] | None) -> None:
        self.recorded = Recorded()
        self._keys = keys
        self._ssn: ExplainView | None = None
        self._asked: tuple[list[QuotaView], ClusterView | None] = ([], None)

    @property
    def ssn(self) -> ExplainView:
        if self._ssn is None:
            raise RuntimeError("the session has not opened")
        return self._ssn

    def opened(self, ssn: ExplainView) -> None:
        self._ssn = ssn
        _record_order(ssn, self.recorded)

    def enqueue_asked(self, job: Job) -> None:
        self._asked = quota_views(self.ssn, job.queue), cluster_view(self.ssn)

    def enqueue_answered(self, job: Job, admitted: bool) -> None:
        quotas, cluster = self._asked
        self.recorded.enqueue[job.uid] = EnqueueVote(admitted, quotas, cluster)

    def queue_overused(self, queue: Queue) -> None:
        self.recorded.overused.add(queue.name)

    def task_refused(self, queue: Queue, task: Task) -> None:
        if task.job not in self.recorded.refused:
            self.recorded.refused[task.job] = quota_views(self.ssn, queue.name)

    def closing(self, ssn: ExplainView) -> None:
        # Before the plugins drop their state: where the pending pods of the admitted jobs asked about could go.
        for key in ssn.jobs if self._keys is None else self._keys:
            job = ssn.jobs.get(key)
            if job is not None and not job.is_pending() and job.pending_tasks():
                self.recorded.fit_after[key] = gang_fit(ssn, job)


def _record_order(ssn: ExplainView, recorded: Recorded) -> None:
    """The order allocate starts from: queues by QueueOrder, each queue's admitted-or-pending jobs by JobOrder."""
    waiting: dict[str, list[Job]] = {}
    for job in ssn.jobs.values():
        if job.pending_tasks() or job.is_pending():
            waiting.setdefault(job.queue, []).append(job)
    queues = sorted((ssn.queues[name] for name in waiting), key=cmp_to_key(ssn.queue_order))
    for rank, queue in enumerate(queues, 1):
        key: dict[str, float] = {"priority": queue.priority}
        share = queue_share(ssn, queue.name)
        if share is not None:
            key["share"] = round(share, 6)
        recorded.queue_order.append(OrderEntry(queue.name, rank, key))
        jobs = sorted(waiting[queue.name], key=cmp_to_key(ssn.job_order))
        entries = []
        for jrank, job in enumerate(jobs, 1):
            jkey: dict[str, float] = {"priority": job.priority}
            dominant = job_share(ssn, job)
            if dominant is not None:
                jkey["drf_share"] = round(dominant, 6)
            jkey["created"] = job.creation
            entries.append(OrderEntry(job.uid, jrank, jkey))
        recorded.job_order[queue.name] = entries


@dataclass(slots=True, frozen=True)
class Probed:
    """A session run as the scheduler runs it: the closed session's view, what was recorded, what it decided."""

    ssn: ExplainView
    recorded: Recorded
    result: Decisions


def probe(snap: Snapshot, conf: SchedulerConf, now: float = 0.0, keys: Iterable[str] | None = None) -> Probed:
    """Run one session exactly as the scheduler does (`run.run_session`), recording as it goes, and before it
    closes (the plugins drop their state then) ask where the pending pods of the admitted jobs among `keys` could
    still go."""
    recorder = Recorder(keys)
    result = run_session(snap, conf, now, recorder)
    return Probed(recorder.ssn, recorder.recorded, result)


def opened(snap: Snapshot, conf: SchedulerConf, now: float = 0.0) -> ExplainView:
    """A session as it stands when it opens, before any action: the cluster as the scheduler finds it."""
    return open_view(snap, conf, now)
