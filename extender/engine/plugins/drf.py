"""drf: Dominant Resource Fairness between jobs (Volcano's `plugins/drf/drf.go`, flat mode).

A job's share is its largest fraction of any cluster resource (`pods` included); lower shares go first, and a
preemptor may take a victim only while its own share stays at or below the victim job's share after the loss.
With `enableHierarchy: true` queues are ordered by hierarchical DRF (`drf_hierarchy.py`).
"""

from __future__ import annotations

import numpy as np

from extender.engine.interface import EventHandler, KeyedOrder, SessionView
from extender.engine.model import Task
from extender.engine.plugins.drf_hierarchy import Hierarchy, dominant_share
from extender.engine.registry import register_plain_plugin
from lapilli.resources.vector import Vec

SHARE_DELTA = 1e-6


class DrfPlugin:
    name = "drf"

    def __init__(self) -> None:
        self.hierarchy: Hierarchy | None = None
        self.shares: dict[str, float] = {}
        # Volcano's drf counts pipelined tasks too, so it keeps its own allocation per job.
        self.allocated: dict[str, Vec] = {}
        self.stale: set[str] = set()
        self.total: Vec = np.zeros(0)

    def on_session_open(self, ssn: SessionView) -> None:
        total = self.total = ssn.total
        for job in ssn.jobs.values():
            self.allocated[job.uid] = job.allocated.copy()
            # Zero while nothing of the job is ready: nothing was added to its `allocated` as the session opened.
            self.shares[job.uid] = dominant_share(job.allocated, total) if job.ready else 0.0

        def victims(preemptor: Task, candidates: list[Task]) -> list[Task]:
            mine = dominant_share(self.allocated[preemptor.job] + preemptor.resreq, total)
            remaining: dict[str, Vec] = {}
            chosen = []
            for task in candidates:
                alloc = remaining.setdefault(task.job, self.allocated[task.job].copy())
                alloc -= task.resreq
                theirs = dominant_share(alloc, total)
                if mine < theirs or abs(mine - theirs) <= SHARE_DELTA:
                    chosen.append(task)
            return chosen

        # Shares are read only to order jobs, far less often than tasks move: recompute them when read.
        def allocate(task: Task) -> None:
            self.allocated[task.job] += task.resreq
            self.stale.add(task.job)

        def deallocate(task: Task) -> None:
            self.allocated[task.job] -= task.resreq
            self.stale.add(task.job)

        ssn.add_job_order(KeyedOrder(lambda job: self.share(job.uid)))  # lower share first
        ssn.add_preemptable(victims)
        ssn.add_event_handler(EventHandler(allocate=allocate, deallocate=deallocate))
        if ssn.current_flags().get("enableHierarchy", False):
            self._open_hierarchy(ssn)

    def share(self, job: str) -> float:
        if job in self.stale:
            self.stale.discard(job)
            self.shares[job] = dominant_share(self.allocated[job], self.total)
        return self.shares[job]

    def _open_hierarchy(self, ssn: SessionView) -> None:
        hierarchy = Hierarchy(ssn.total)
        hierarchy.build(ssn.queues, ssn.jobs)
        hierarchy.update()
        self.hierarchy = hierarchy

        def moved(task: Task, sign: int) -> None:
            leaf = hierarchy.job_leaf(ssn.jobs[task.job])
            if leaf is not None:
                leaf.allocated = leaf.allocated + task.resreq * sign
                hierarchy.update()

        ssn.add_queue_order(hierarchy.compare)
        ssn.add_event_handler(
            EventHandler(allocate=lambda task: moved(task, 1), deallocate=lambda task: moved(task, -1))
        )

    def on_session_close(self, ssn: SessionView) -> None:
        self.shares.clear()
        self.allocated.clear()
        self.stale.clear()


register_plain_plugin("drf", DrfPlugin)

