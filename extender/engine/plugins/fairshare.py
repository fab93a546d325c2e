"""fairshare: queues ordered by their decayed usage, lowest first (Kueue's admission fair sharing; Volcano has none).

Each queue's usage share is its weighted decayed usage over what the whole cluster would have used in that time,

    s = Σ_r w_r · U_r / (C_r · τ)  /  Σ_r w_r        (C_r: the cluster's total of r, τ = halfLife / ln 2)

so 0.25 reads "a quarter of the cluster on average, recent use counting most". QueueOrder (`queueOrder: true`):
higher `spec.priority` first, then the lower usage share; in a tree two queues compare at the level where their
paths part (lab-a's usage against lab-b's, then alice's against bob's within a lab), one key for every queue: the
shares along its path, top-down. `shareWeight` is read by the session (`Queue.share_bias`), not here. The
arguments and the decay are in `extender/engine/usage.py`.
"""

from __future__ import annotations

from extender.engine.interface import KeyedOrder, SessionView
from extender.engine.model import Queue
from extender.engine.registry import register_plugin
from extender.engine.usage import FairShareArgs, parse_arguments
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
        self.paths: dict[str, tuple[float, ...]] = {}  # queue -> usage shares top-down along its path

    def on_session_open(self, ssn: SessionView) -> None:
        queues = ssn.queues
        self.shares = {name: usage_share(q.usage, ssn.total, ssn.dims, self.args) for name, q in queues.items()}
        for name in queues:
            chain = [name]
            parent = queues[name].parent
            while parent and parent in queues and parent not in chain:
                chain.append(parent)
                parent = queues[parent].parent
            self.paths[name] = tuple(self.shares[q] for q in reversed(chain))
        if self.args.queue_order:
            paths = self.paths
            zero = (0.0,)

            def key(queue: Queue) -> tuple[float, ...]:
                return (float(-queue.priority), *paths.get(queue.name, zero))

            ssn.add_queue_order(KeyedOrder(key))

    def on_session_close(self, ssn: SessionView) -> None:
        return None


register_plugin("fairshare", parse_arguments, FairSharePlugin)
