"""Hierarchical DRF between queues (Volcano's `plugins/drf/drf.go` with `enableHierarchy: true`).

Queues sit in a tree given by their `volcano.sh/hierarchy` annotation (`root/eng/prod`) with weights from
`volcano.sh/hierarchy-weights` (`1/2/8`; values below 1 count as 1). Jobs are leaves of weight 1 under their
queue's node. Bottom-up, a node's allocation is the sum of its non-empty children's allocations, each
non-saturated child scaled to the smallest dominant share among them (saturated children count as they are); its
share is the dominant share of that sum. Queues are ordered by comparing their paths level by level:
non-saturated before saturated, then the smaller share/weight. With fairshare's `shareWeight`, a queue's node has
one more child holding that weight × its decayed average usage (`Queue.share_bias`), saturated, so it counts whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from extender.engine.model import ALLOCATED_STATUS, Job, Queue, TaskStatus
from extender.engine.rowmath import Flags
from lapilli.resources.vector import Vec

HIERARCHY = "volcano.sh/hierarchy"
HIERARCHY_WEIGHTS = "volcano.sh/hierarchy-weights"
USAGE_CHILD = "usage:"  # fairshare's share bias under a queue's node


def dominant_share(allocated: Vec, total: Vec) -> float:
    """max_r allocated_r / total_r with Volcano's `helpers.Share`: 0/0 = 0 and x/0 = 1."""
    share = 0.0
    for a, t in zip(allocated.tolist(), total.tolist(), strict=True):  # floats: numpy scalars cost more here
        s = (0.0 if a == 0 else 1.0) if t == 0 else a / t
        share = max(share, s)
    return share


@dataclass(slots=True, eq=False)
class HNode:
    name: str
    weight: float
    allocated: Vec
    request: Vec
    share: float = 0.0
    saturated: bool = False
    children: dict[str, HNode] = field(default_factory=dict)


def queue_path(queue: Queue) -> list[tuple[str, float]]:
    """[(segment, weight)] from root to the queue; a queue without annotations hangs under root by name."""
    names = (queue.annotations.get(HIERARCHY) or f"root/{queue.name}").split("/")
    raw_weights = (queue.annotations.get(HIERARCHY_WEIGHTS) or "/".join(["1"] * len(names))).split("/")
    weights = []
    for value in raw_weights + ["1"] * (len(names) - len(raw_weights)):
        try:
            weights.append(max(float(value), 1.0))
        except ValueError:
            weights.append(1.0)
    return list(zip(names, weights, strict=False))


def _saturated(allocated: Vec, request: Vec, demanded: Flags) -> bool:
    asked = request > 0
    if np.any(asked & (allocated > 0) & (allocated >= request)):
        return True
    return bool(np.any(asked & ~demanded))


class Hierarchy:
    def __init__(self, total: Vec) -> None:
        self.total = total
        self.root = HNode("root", 1.0, np.zeros_like(total), np.zeros_like(total))
        self.leaf_of_queue: dict[str, HNode] = {}

    def build(self, queues: Mapping[str, Queue], jobs: Mapping[str, Job]) -> None:
        for queue in queues.values():
            node = self.root
            for segment, weight in queue_path(queue)[1:]:
                node = node.children.setdefault(
                    segment, HNode(segment, weight, np.zeros_like(self.total), np.zeros_like(self.total))
                )
            self.leaf_of_queue[queue.name] = node
        for job in jobs.values():
            parent = self.leaf_of_queue.get(job.queue)
            if parent is None:
                continue
            request = sum((t.resreq for t in job.tasks.values() if t.status is TaskStatus.PENDING),
                          start=np.zeros_like(self.total))
            allocated = sum((t.resreq for t in job.tasks.values() if t.status in ALLOCATED_STATUS),
                            start=np.zeros_like(self.total))
            parent.children[f"job:{job.uid}"] = HNode(job.uid, 1.0, allocated, allocated + request)
        for queue in queues.values():
            # fairshare's shareWeight: the queue's decayed average usage counts as one more, saturated, child.
            if queue.share_bias is not None and queue.name in self.leaf_of_queue:
                bias = queue.share_bias.copy()
                self.leaf_of_queue[queue.name].children[USAGE_CHILD] = HNode(USAGE_CHILD, 1.0, bias, bias)

    def job_leaf(self, job: Job) -> HNode | None:
        parent = self.leaf_of_queue.get(job.queue)
        return None if parent is None else parent.children.get(f"job:{job.uid}")

    def update(self) -> None:
        demanded = self._demanded()
        self._update(self.root, demanded)

    def _demanded(self) -> Flags:
        # A resource is still demanded while the cluster has some of it free.
        used = self.root.allocated if self.root.children else np.zeros_like(self.total)
        return used < self.total

    def _update(self, node: HNode, demanded: Flags) -> None:
        if not node.children:
            node.share = dominant_share(node.allocated, self.total)
            node.saturated = _saturated(node.allocated, node.request, demanded)
            return
        for child in node.children.values():
            self._update(child, demanded)
        non_empty = [c for c in node.children.values() if c.share > 0 or np.any(c.allocated > 0)]
        open_children = [c for c in non_empty if not c.saturated]
        floor = min((c.share for c in open_children), default=0.0)
        allocated = np.zeros_like(self.total)
        for child in non_empty:
            if child.saturated or child.share == 0:
                allocated += child.allocated
            else:
                allocated += child.allocated * (floor / child.share)
        node.allocated = allocated
        node.request = sum((c.request for c in node.children.values()), start=np.zeros_like(self.total))
        node.share = dominant_share(allocated, self.total)
        node.saturated = bool(node.children) and all(c.saturated for c in node.children.values())

    def compare(self, left: Queue, right: Queue) -> int:
        lnode, rnode = self.root, self.root
        for (lname, _), (rname, _) in zip(queue_path(left)[1:], queue_path(right)[1:], strict=False):
            if lname == rname:
                lnode, rnode = lnode.children[lname], rnode.children[rname]
                continue
            lc, rc = lnode.children[lname], rnode.children[rname]
            if lc.saturated != rc.saturated:
                return 1 if lc.saturated else -1
            lv, rv = lc.share / lc.weight, rc.share / rc.weight
            return (lv > rv) - (lv < rv)
        return 0
