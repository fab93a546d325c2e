"""The queue accounting behind the capacity plugin (Volcano's `plugins/capacity/capacity.go`: `queueAttr`,
`buildQueueAttrs`, `buildHierarchicalQueueAttrs`, `checkHierarchicalQueue`, `updateQueueAttrShare`).

Flat: each queue with jobs gets realCapability = min(ExceededPart(total, Σ guarantee) + guarantee, capability) and
deserved = max(min(spec.deserved, realCapability), guarantee). Hierarchical: every queue is a node under `root`
(capability ∞ unless set); a child inherits capability dimensions it leaves unset (or sets ≤ 0 for cpu/memory) from
its parent, its realCapability is min(ExceededPart(parent.realCapability, Σ sibling guarantees) + guarantee,
capability), its deserved is max(deserved, guarantee); root's deserved and guarantee are the sums of its children's.
Volcano's controller always creates `root`; a snapshot without it gets a virtual one here instead of refusing to
schedule. With fairshare's `shareWeight` the share counts allocated + `Queue.share_bias` (that weight × the decayed
average usage; every level has its own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt

from extender.engine.interface import SessionView
from extender.engine.model import Job, Queue, TaskStatus
from lapilli.resources.vector import CPU, MEMORY, TOLERANCE, Vec, exceeded_part, is_empty

ROOT: Final = "root"


@dataclass(slots=True, eq=False)
class QueueAttr:
    name: str
    deserved: Vec
    guarantee: Vec
    capability: Vec  # +inf where unconstrained
    own_capability: npt.NDArray[np.bool_]  # dimensions the queue itself constrains (hierarchy inheritance)
    real_capability: Vec
    allocated: Vec
    request: Vec
    elastic: Vec
    inqueue: Vec
    share: float = 0.0
    ancestors: list[str] = field(default_factory=list)  # root first, parent last
    bias: Vec | None = None  # fairshare's shareWeight × average decayed usage, counted into the share only
    children: list[str] = field(default_factory=list)

    @property
    def is_leaf(self) -> bool:
        return not self.children


def update_share(attr: QueueAttr, pods: int) -> None:
    """max over deserved dimensions of allocated/deserved; a queue without deserved is best effort (share 1)."""
    if is_empty(attr.deserved, pods):
        attr.share = 1.0
        return
    dims = attr.deserved >= TOLERANCE
    held = attr.allocated if attr.bias is None else attr.allocated + attr.bias
    attr.share = float(np.max(held[dims] / attr.deserved[dims]))


def _new_attr(ssn: SessionView, queue: Queue | None, name: str) -> QueueAttr:
    zeros = ssn.dims.zeros()
    capability = queue.capability.copy() if queue is not None else np.full(ssn.dims.size, np.inf)
    own = np.zeros(ssn.dims.size, dtype=bool)
    if queue is not None:
        for resource in queue.has_capability:
            own[ssn.dims.index[resource]] = True
    for resource in (CPU, MEMORY):
        i = ssn.dims.index[resource]
        # Volcano reads cpu/memory capability ≤ 0 as "not set".
        if capability[i] <= 0:
            capability[i] = np.inf
            own[i] = False
    deserved = queue.deserved_spec if queue is not None and queue.deserved_spec is not None else zeros
    return QueueAttr(
        name=name,
        deserved=deserved.copy(),
        guarantee=queue.guarantee.copy() if queue is not None else zeros.copy(),
        capability=capability,
        own_capability=own,
        real_capability=capability.copy(),
        allocated=zeros.copy(),
        request=zeros.copy(),
        elastic=zeros.copy(),
        inqueue=zeros.copy(),
        bias=queue.share_bias if queue is not None else None,
    )


def job_usage(job: Job, zeros: Vec) -> tuple[Vec, Vec, Vec, Vec]:
    """(allocated, request, inqueue, elastic) a job adds to its queue."""
    pending = [t.resreq for t in job.tasks.values() if t.status is TaskStatus.PENDING]
    request = job.allocated + (np.sum(pending, axis=0) if pending else zeros)
    inqueue = job.inqueue_reservation()
    minimum = job.min_resources if job.min_resources is not None else zeros
    return job.allocated.copy(), request, zeros if inqueue is None else inqueue, exceeded_part(job.allocated, minimum)


def _add_usage(attr: QueueAttr, usage: tuple[Vec, Vec, Vec, Vec]) -> None:
    allocated, request, inqueue, elastic = usage
    attr.allocated += allocated
    attr.request += request
    attr.inqueue += inqueue
    attr.elastic += elastic


def build_flat(ssn: SessionView) -> dict[str, QueueAttr]:
    total_guarantee = ssn.dims.zeros()
    for queue in ssn.queues.values():
        total_guarantee += queue.guarantee
    base = exceeded_part(ssn.total, total_guarantee)
    attrs: dict[str, QueueAttr] = {}
    zeros = ssn.dims.zeros()
    for job in sorted(ssn.jobs.values(), key=lambda j: j.uid):
        attr = attrs.get(job.queue)
        if attr is None:
            attr = _new_attr(ssn, ssn.queues[job.queue], job.queue)
            attr.real_capability = np.minimum(base + attr.guarantee, attr.capability)
            attrs[job.queue] = attr
        _add_usage(attr, job_usage(job, zeros))
    # A scalar realCapability lacks in Volcano (no cluster surplus, no guarantee) leaves deserved as written.
    present = (ssn.total > total_guarantee) | (total_guarantee > 0)
    present[[ssn.dims.index[CPU], ssn.dims.index[MEMORY]]] = True
    for attr in attrs.values():
        capped = np.where(present, np.minimum(attr.deserved, attr.real_capability), attr.deserved)
        attr.deserved = np.maximum(capped, attr.guarantee)
        update_share(attr, ssn.dims.pods)
    return attrs


def _link(attrs: dict[str, QueueAttr], ssn: SessionView, name: str, path: list[str]) -> bool:
    """Fill `ancestors` of `name` (and of its ancestors); False on a cycle or an unknown parent."""
    if name == ROOT or attrs[name].ancestors:
        return True
    if name in path:
        return False
    parent = ssn.queues[name].parent or ROOT
    if parent not in attrs or not _link(attrs, ssn, parent, [*path, name]):
        return False
    attrs[name].ancestors = [*attrs[parent].ancestors, parent]
    attrs[parent].children.append(name)
    return True


def _check_tree(attrs: dict[str, QueueAttr], attr: QueueAttr) -> None:
    """Volcano's `checkHierarchicalQueue`: inheritance and realCapability, top-down. Inconsistencies (children
    asking for more than the parent) are only logged upstream, so they are tolerated here."""
    total_guarantee = np.zeros_like(attr.guarantee)
    total_deserved = np.zeros_like(attr.deserved)
    children = [attrs[c] for c in sorted(attr.children)]
    for child in children:
        child.deserved = np.maximum(child.deserved, child.guarantee)
        total_deserved += child.deserved
        total_guarantee += child.guarantee
        child.capability = np.where(child.own_capability, child.capability, attr.capability)
    if attr.name == ROOT:
        attr.guarantee = total_guarantee
        attr.deserved = total_deserved
    for child in children:
        real = exceeded_part(attr.real_capability, total_guarantee) + child.guarantee
        child.real_capability = np.minimum(real, child.capability)
        _check_tree(attrs, child)


def build_tree(ssn: SessionView) -> tuple[dict[str, QueueAttr], bool]:
    """Every queue under `root`; the bool is Volcano's readyToSchedule (False: a cycle, an unknown parent, or a
    job in a non-leaf queue — then capacity refuses everything this session)."""
    attrs = {name: _new_attr(ssn, ssn.queues[name], name) for name in sorted(ssn.queues)}
    if ROOT not in attrs:
        attrs[ROOT] = _new_attr(ssn, None, ROOT)
    for name in sorted(ssn.queues):
        if not _link(attrs, ssn, name, []):
            return attrs, False
    zeros = ssn.dims.zeros()
    for job in sorted(ssn.jobs.values(), key=lambda j: j.uid):
        attr = attrs[job.queue]
        if not attr.is_leaf:
            return attrs, False
        usage = job_usage(job, zeros)
        for name in [job.queue, *attr.ancestors]:
            _add_usage(attrs[name], usage)
    root = attrs[ROOT]
    if is_empty(np.where(root.own_capability, root.capability, 0.0), ssn.dims.pods):
        root.capability = np.full(ssn.dims.size, np.inf)
    root.real_capability = root.capability.copy()
    _check_tree(attrs, root)
    for attr in attrs.values():
        update_share(attr, ssn.dims.pods)
    return attrs, True


__all__ = ["ROOT", "QueueAttr", "build_flat", "build_tree", "job_usage", "update_share"]
