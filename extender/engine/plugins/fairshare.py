"""fairshare: queues ordered by their decayed usage, lowest first (Kueue's admission fair sharing; Volcano has none).

Each queue's usage share is its weighted decayed usage over what the whole cluster would have used in that time,

    s = Σ_r w_r · U_r / (C_r · τ)  /  Σ_r w_r        (C_r: the cluster's total of r, τ = halfLife / ln 2)

so 0.25 reads "a quarter of the cluster on average, recent use counting most". QueueOrder (`queueOrder: true`):
higher `spec.priority` first; then, level by level from the top of the queue tree (lab against lab, then user
against user within a lab; a flat queue is its own only level), a queue that holds less than its `spec.deserved`
of a weighted resource before one that holds all of it (it borrows: as capacity orders by share, so what reclaim
frees goes to the queue that reclaimed it, not back to the borrower), then the lower usage share. The key is one
tuple per queue, (−priority, borrows, usage share) along its path, kept current as the session places tasks.
`shareWeight` is read by the session (`Queue.share_bias`), not here. The arguments and the decay are in
`extender/engine/usage.py`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from extender.engine.interface import EventHandler, KeyedOrder, SessionView
from extender.engine.model import Queue
from extender.engine.registry import register_plugin
from extender.engine.usage import FairShareArgs, ancestors_of, parse_arguments
from lapilli.resources.vector import Dims, Vec
from lapilli.usage import mean_life


def usage_share(usage: Vec | None, total: Vec, dims: Dims, args: FairShareArgs) -> float:
    """The weighted decayed usage as a fraction of the cluster over the decay's mean life (0 with no usage)."""
    if usage is None:
        return 0.0
    tau = mean_life(args.half_life)
    weighted = weights = 0.0
    for i, name in enumerate(dims.names):
        weight = args.weight(name)
        if weight <= 0 or total[i] <= 0:
            continue
        weighted += weight * float(usage[i]) / (float(total[i]) * tau)
        weights += weight
    return weighted / weights if weights > 0 else 0.0


class FairSharePlugin:
    name = "fairshare"

    def __init__(self, args: FairShareArgs) -> None:
        self.args = args
        self.shares: dict[str, float] = {}  # queue -> usage share (explain reads it)
        self.paths: dict[str, list[str]] = {}  # queue -> the queues from the top of its tree down to it
        self.held: dict[str, Vec] = {}  # queue -> what it (with its descendants) holds now in this session
        self._weighted: npt.NDArray[np.bool_] | None = None  # where a resource's weight counts
        self.queues_seen: Mapping[str, Queue] = {}

    def on_session_open(self, ssn: SessionView) -> None:
        queues = self.queues_seen = ssn.queues
        self.shares = {name: usage_share(q.usage, ssn.total, ssn.dims, self.args) for name, q in queues.items()}
        self._weighted = np.array([self.args.weight(n) > 0 for n in ssn.dims.names])
        for name, ancestors in ancestors_of({name: q.parent for name, q in queues.items()}).items():
            self.paths[name] = [*ancestors, name]
            self.held[name] = ssn.dims.zeros()
        for job in ssn.jobs.values():
            self._move(job.queue, job.allocated, 1.0)
        if not self.args.queue_order:
            return
        jobs = ssn.jobs
        ssn.add_queue_order(KeyedOrder(self.key))
        ssn.add_event_handler(EventHandler(
            allocate=lambda task: self._move(jobs[task.job].queue, task.resreq, 1.0),
            deallocate=lambda task: self._move(jobs[task.job].queue, task.resreq, -1.0)))

    def _move(self, queue: str, amount: Vec, sign: float) -> None:
        for name in self.paths.get(queue, ()):
            self.held[name] += amount * sign

    def borrowing(self, queue: Queue) -> bool:
        """The queue holds its whole `spec.deserved` of a weighted resource: it borrows (or is about to)."""
        deserved = queue.deserved_spec
        if deserved is None or self._weighted is None:
            return False
        defined = self._weighted & (deserved > 0)
        return bool(np.any(self.held[queue.name][defined] >= deserved[defined]))

    def key(self, queue: Queue) -> tuple[float, ...]:
        """-priority, then for each level from the top: (1 if that level borrows, its usage share)."""
        out = [float(-queue.priority)]
        for name in self.paths.get(queue.name, [queue.name]):
            level = self.queues_seen.get(name)
            out += [1.0 if level is not None and self.borrowing(level) else 0.0, self.shares.get(name, 0.0)]
        return tuple(out)

    def on_session_close(self, ssn: SessionView) -> None:
        return None


register_plugin("fairshare", parse_arguments, FairSharePlugin)
