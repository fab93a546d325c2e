"""kube-scheduler's own per-pod behaviour, the baseline: no gang, no queues, no PodGroups.

Mirrors the default profile's scheduling cycle for what a simulation needs: pods leave the queue one at a time in
creation order (ties: the controller's creation round, then the name); `NodeUnschedulable`, Ready, `NodeAffinity`
(nodeSelector and required node affinity), `TaintToleration` (NoSchedule / NoExecute) and `NodeResourcesFit`
(every requested resource, including `pods` and `nvidia.com/gpu`) filter nodes; `NodeResourcesFit` with the
`LeastAllocated` strategy (cpu and memory, weight 1 each, non-zero defaults of 100m / 200Mi for pods that request
none) scores them, ties going to the lowest node name.
A placed pod keeps its resources whether or not its job can start.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from assembly.sim.state import Cluster, PodState
from extender.engine.snapshot import NodeRecord
from lapilli.nodematch import PodPlacement
from lapilli.resources.units import CPU, MEMORY, Units

MAX_NODE_SCORE: Final = 100
DEFAULT_MILLI_CPU: Final = 100.0  # kube-scheduler's non-zero default for scoring (schedutil.DefaultMilliCPURequest)
DEFAULT_MEMORY: Final = 200.0 * 1024 * 1024  # schedutil.DefaultMemoryRequest
EPSILON: Final = 1e-6


def node_admits(node: NodeRecord, spec: Mapping[str, Any]) -> bool:
    """Every filter except resource fit."""
    placement = PodPlacement.of(spec)
    if not node.ready or (node.unschedulable and not placement.tolerates_unschedulable()):
        return False
    return placement.matches_node(node.labels, node.name) and not placement.untolerated(node.taints)


def fits(request: Units, allocatable: Units, used: Units) -> bool:
    return all(
        value <= 0 or used.get(name, 0.0) + value <= allocatable.get(name, 0.0) + EPSILON
        for name, value in request.items()
    )


def non_zero(request: Units) -> tuple[float, float]:
    cpu, memory = request.get(CPU, 0.0), request.get(MEMORY, 0.0)
    return (cpu if cpu > 0 else DEFAULT_MILLI_CPU, memory if memory > 0 else DEFAULT_MEMORY)


def least_allocated(allocatable: Units, requested: tuple[float, float]) -> int:
    """`leastResourceScorer`: per resource (capacity − requested) × 100 / capacity, averaged (integer maths)."""
    total = 0
    for name, want in zip((CPU, MEMORY), requested, strict=True):
        capacity = int(allocatable.get(name, 0.0))
        need = int(want)
        if capacity > 0 and need <= capacity:
            total += (capacity - need) * MAX_NODE_SCORE // capacity
    return total // 2


class DefaultScheduler:
    """Places pending pods one by one; a cycle places everything placeable given what is already placed."""

    name: Final = "default"

    def elapse(self, cluster: Cluster, start: float, end: float) -> None:
        """kube-scheduler keeps nothing that depends on time."""

    def cycle(self, cluster: Cluster, now: float) -> bool:
        used: dict[str, Units] = {name: {} for name in cluster.nodes}
        scored: dict[str, list[float]] = {name: [0.0, 0.0] for name in cluster.nodes}
        pending: list[PodState] = []
        for pod in cluster.pods.values():
            if pod.node is None:
                pending.append(pod)
            elif pod.node in used:
                self._account(pod, used[pod.node], scored[pod.node])
        changed = False
        for pod in sorted(pending, key=lambda p: (p.order, p.name)):
            best: tuple[int, str] | None = None
            cpu, memory = non_zero(pod.request)
            for name, node in cluster.nodes.items():  # sorted by name
                if not node_admits(node, pod.spec) or not fits(pod.request, node.allocatable, used[name]):
                    continue
                score = least_allocated(node.allocatable, (scored[name][0] + cpu, scored[name][1] + memory))
                if best is None or score > best[0]:
                    best = (score, name)
            if best is not None:
                pod.node = best[1]
                self._account(pod, used[best[1]], scored[best[1]])
                changed = True
        return changed

    @staticmethod
    def _account(pod: PodState, used: Units, scored: list[float]) -> None:
        for name, value in pod.request.items():
            used[name] = used.get(name, 0.0) + value
        cpu, memory = non_zero(pod.request)
        scored[0] += cpu
        scored[1] += memory
