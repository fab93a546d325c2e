"""drf: Dominant Resource Fairness between jobs (Volcano's `plugins/drf/drf.go`, flat mode).

A job's share is its largest fraction of any cluster resource (`pods` included); lower shares go first, and a
preemptor may take a victim only while its own share stays at or below the victim job's share after the loss.
With `enableHierarchy: true` queues are ordered by hierarchical DRF (`drf_hierarchy.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extender.engine.framework import Fn, register_plugin
from extender.engine.model import Job, Task
from extender.engine.plugins.drf_hierarchy import Hierarchy, dominant_share
from extender.engine.session import EventHandler, Session
from lapilli.resources.vector import Vec

SHARE_DELTA = 1e-6


class DrfPlugin:
    name = "drf"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        self.arguments = arguments
        self.hierarchy: Hierarchy | None = None
        self.shares: dict[str, float] = {}
        # Volcano's drf counts pipelined tasks too, so it keeps its own allocation per job.
        self.allocated: dict[str, Vec] = {}

    def on_session_open(self, ssn: Session) -> None:
        total = ssn.total
        for job in ssn.jobs.values():
            self.allocated[job.uid] = job.allocated.copy()
            self.shares[job.uid] = dominant_share(job.allocated, total)

        def order(left: Job, right: Job) -> int:
            ls, rs = self.shares[left.uid], self.shares[right.uid]
            return (ls > rs) - (ls < rs)

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

        def allocate(task: Task) -> None:
            alloc = self.allocated[task.job]
            alloc += task.resreq
            self.shares[task.job] = dominant_share(alloc, total)

        def deallocate(task: Task) -> None:
            alloc = self.allocated[task.job]
            alloc -= task.resreq
            self.shares[task.job] = dominant_share(alloc, total)

        ssn.add_fn(Fn.JOB_ORDER, order)
        ssn.add_fn(Fn.PREEMPTABLE, victims)
        ssn.add_event_handler(EventHandler(allocate=allocate, deallocate=deallocate))
        if ssn.current_option().flags.get("enableHierarchy", False):
            self._open_hierarchy(ssn)

    def _open_hierarchy(self, ssn: Session) -> None:
        hierarchy = Hierarchy(ssn.total)
        hierarchy.build(ssn.queues, ssn.jobs)
        hierarchy.update()
        self.hierarchy = hierarchy

        def moved(task: Task, sign: int) -> None:
            leaf = hierarchy.job_leaf(ssn.jobs[task.job])
            if leaf is not None:
                leaf.allocated = leaf.allocated + task.resreq * sign
                hierarchy.update()

        ssn.add_fn(Fn.QUEUE_ORDER, hierarchy.compare)
        ssn.add_event_handler(
            EventHandler(allocate=lambda task: moved(task, 1), deallocate=lambda task: moved(task, -1))
        )

    def on_session_close(self, ssn: Session) -> None:
        self.shares.clear()
        self.allocated.clear()


register_plugin("drf")(DrfPlugin)

