"""The answer to "why is my job pending?" as plain data: what the scheduler does with one PodGroup, and each reason
that applies, most important first.

Every number is in Kubernetes' own units by the time it is here (`Amount`: cpu in cores, memory in bytes, devices
whole), so the CLI, the dashboard, the PodGroup condition and `-o json` print the same values.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum

from lapilli.meta import JSON

# The PodGroup condition the service writes the explanation under (`kubectl describe pg` shows it).
WHY_CONDITION = "lapilli.io/Why"


class Kind(StrEnum):
    """Reason kinds, in the order a researcher should read them (the first one that applies is the headline)."""

    QUEUE_MISSING = "QueueMissing"
    QUEUE_CLOSED = "QueueClosed"
    DEGRADED = "Degraded"  # a gang that ran lost members and is regaining them (or its Job's policies decide)
    UNRESOLVABLE = "Unresolvable"  # nothing in the cluster can ever fit this gang
    OVER_CAPABILITY = "OverCapability"  # enqueue: minResources over what the queue may still take
    CLUSTER_FULL = "ClusterFull"  # enqueue: the (overcommitted) cluster has no room for minResources
    FAIR_SHARE = "FairShare"  # allocate: the queue holds its deserved share
    WAITING_PODS = "WaitingPods"  # fewer pods than minMember exist
    ORDER = "Order"  # the room goes to jobs or queues ordered first
    TOPOLOGY = "Topology"  # no HyperNode its network topology allows has the room (or the tree is unusable)
    PLACEMENT = "Placement"  # the gang does not fit the nodes' free room or predicates now
    RECLAIM = "Reclaim"  # taking room back from other queues: allowed or not, and why
    PREEMPT = "Preempt"  # evicting lower-priority jobs of the same queue: possible or not
    STARTING = "Starting"  # this session places the gang
    RUNNING = "Running"


@dataclass(slots=True)
class Reason:
    kind: Kind
    message: str  # one short line a researcher understands
    data: dict[str, JSON] = field(default_factory=dict)  # the numbers behind the message

    def to_json(self) -> dict[str, JSON]:
        return {"kind": str(self.kind), "message": self.message, **({"data": self.data} if self.data else {})}


@dataclass(slots=True)
class Explanation:
    podgroup: str  # ns/name
    queue: str
    phase: str  # the PodGroup phase this session computes
    min_member: int
    pods: int
    running: int
    reasons: list[Reason] = field(default_factory=list)

    @property
    def kind(self) -> Kind:
        return self.reasons[0].kind if self.reasons else Kind.RUNNING

    @property
    def headline(self) -> str:
        """One line: the most important reason."""
        return self.reasons[0].message if self.reasons else f"{self.phase}"

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = asdict(self)
        out["reasons"] = [r.to_json() for r in self.reasons]
        out["kind"] = str(self.kind)
        out["headline"] = self.headline
        return out

    def render(self, job: str = "") -> str:
        """The text `lapilli job why` prints."""
        what = f"Job {job} (PodGroup {self.podgroup})" if job else f"PodGroup {self.podgroup}"
        head = (f"{what} in queue {self.queue}: {self.phase}, "
                f"{self.running}/{self.min_member} running, {self.pods} pod(s)")
        lines = [head]
        lines += [f"  {i}. {r.message}" for i, r in enumerate(self.reasons, 1)]
        return "\n".join(lines) + "\n"
