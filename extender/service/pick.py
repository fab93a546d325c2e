"""The node filter gives a pod that passes without a plan: the one a session would give it, by the conf's node order.

A pod of Volcano's scheduler that needs no plan (no PodGroup yet, or an admitted gang of one) used to pass filter
with every offered node: kube-scheduler then scored them all with its own plugins and asked prioritize, about as
much work again as the rest of the pod's scheduling. Volcano places such a pod by its session's node order, so filter
answers the node that order puts first among the offered ones, and kube-scheduler, left one feasible node, neither
scores nor asks prioritize. The order is the row-local part of the conf's `nodeorder` (LeastAllocated,
MostAllocated, BalancedAllocation) and `binpack` plugins, with the arguments the sessions run, over the room the
latest session left (less filter's moves since): the same formulas as the engine's, ties to the lowest node name,
as allocate picks. Only nodes with that room are picked, so a plain pod does not take what a plan holds.

Where a session's order would depend on more than a node's own numbers — the pod's preferred node affinity, pod
(anti-)affinity or spread terms, any pod's inter-pod terms (which score the pods they select), PreferNoSchedule
taints, HyperNode scores, vGPU cards — or no offered node has the room, there is nothing to pick and the pod passes
with every offered node, as before: kube-scheduler's own scores, with prioritize's binpack, decide.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from extender.engine.conf import SchedulerConf
from extender.engine.plugins import binpack, network_topology, nodeorder
from extender.engine.rowmath import SCALAR, VECTOR, MatrixRows, NodeRows, Num, Ops, ScalarRow
from extender.engine.snapshot import NodeRecord, PodRecord, Snapshot
from extender.service.session import Outcome, row_names
from lapilli.nodematch import PREFER_NO_SCHEDULE
from lapilli.resources.vector import TOLERANCE

NODE_ORDER_FLAG = "enableNodeOrder"
# Request classes whose scores filter keeps between two session outcomes (a workload's pods share one; a flood of
# distinct requests must not make every pick re-score hundreds of tables).
MAX_PICK_TABLES = 16


@dataclass(frozen=True, slots=True)
class NodeOrder:
    """The row-local node order of a conf: its enabled nodeorder and binpack entries' arguments, and whether it
    also scores by HyperNodes (which filter does not evaluate)."""

    nodeorders: tuple[nodeorder.NodeOrderArgs, ...]
    binpacks: tuple[binpack.BinpackArgs, ...]
    topology: bool  # network-topology-aware scores nodes (when the cluster has HyperNodes)

    @classmethod
    def of(cls, conf: SchedulerConf) -> NodeOrder:
        orders, packs, topology = [], [], False
        for tier in conf.tiers:
            for option in tier.plugins:
                if not option.enabled(NODE_ORDER_FLAG):
                    continue
                if option.name == "nodeorder":
                    orders.append(nodeorder.parse_arguments(option.arguments))
                elif option.name == "binpack":
                    packs.append(binpack.parse_arguments(option.arguments))
                elif option.name == network_topology.NAME:
                    topology = True
        return cls(tuple(orders), tuple(packs), topology)

    def scores(self, request: npt.NDArray[np.float64], index: Mapping[str, int], rows: NodeRows,
               ops: Ops = VECTOR) -> Num:
        """The summed row-local scores of the request over `rows` (numpy columns, or one row in Python floats with
        `SCALAR`: the same operations in the same order, so the same numbers)."""
        total: Num = 0.0
        if self.nodeorders:
            columns = nodeorder.request_columns(index, request)
            for args in self.nodeorders:
                total = total + nodeorder.row_local_score(args, columns, ops, rows)
        for pack in self.binpacks:
            total = total + binpack.binpack_score(ops, rows, binpack.binpack_terms(pack, index, request))
        return total


def own_terms(pod: Mapping[str, Any]) -> bool:
    """The pod scores nodes by more than their numbers: preferred node affinity, inter-pod terms, spread."""
    spec = pod.get("spec") or {}
    affinity = spec.get("affinity") or {}
    node_affinity = affinity.get("nodeAffinity") or {}
    return bool(affinity.get("podAffinity") or affinity.get("podAntiAffinity")
                or node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
                or spec.get("topologySpreadConstraints"))


class ClusterTerms:
    """What in the cluster scores nodes beyond their numbers for every pod, counted event by event (a
    `ClusterState` record listener): pods with inter-pod terms, which score the pods they select, and nodes with a
    PreferNoSchedule taint."""

    def __init__(self, snap: Snapshot) -> None:
        self.termed = sum(_termed(pod) for pod in snap.pods.values())
        self.prefer_not = sum(_prefers_not(node) for node in snap.nodes.values())

    def observe(self, kind: str, old: object | None, new: object | None, snap: Snapshot, /) -> None:
        if kind == "Pod":
            self.termed += _termed(new) - _termed(old)
        elif kind == "Node":
            self.prefer_not += _prefers_not(new) - _prefers_not(old)

    def present(self) -> bool:
        return self.termed > 0 or self.prefer_not > 0


def _termed(record: object | None) -> int:
    return int(isinstance(record, PodRecord) and record.terms is not None)


def _prefers_not(record: object | None) -> int:
    return int(isinstance(record, NodeRecord) and any(t.effect == PREFER_NO_SCHEDULE for t in record.taints))


class PickTables:
    """The order's score of every node row for each request asked since the last session outcome, over the room the
    verbs see: −∞ where the request does not fit. A pick is then a look-up over the offered rows instead of the
    order's formulas over them (kube-scheduler asks for one pod after another, and the pods of a workload ask for
    the same resources), and a pick that takes room changes one row of each table."""

    def __init__(self) -> None:
        self._for: tuple[Outcome, NodeOrder] | None = None
        self._tables: dict[bytes, tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]] = {}
        self._names: list[str] = []

    def best(self, order: NodeOrder, latest: Outcome, room: npt.NDArray[np.float64],
             request: npt.NDArray[np.float64], offered: Sequence[str]) -> str | None:
        """The offered node with room for `request` that `order` scores highest (ties to the lowest node row, the
        session's name order); None when no offered node the outcome knows has the room. `room` is the outcome's
        rows as the verbs see them, and changes only through `moved` until the next outcome."""
        if self._for is None or self._for[0] is not latest or self._for[1] is not order:
            self._for, self._tables = (latest, order), {}
            self._names = row_names(latest)
        key = request.tobytes()
        entry = self._tables.get(key)
        if entry is None:
            if len(self._tables) >= MAX_PICK_TABLES:  # each is re-scored on every pick: keep the latest few
                del self._tables[next(iter(self._tables))]
            entry = self._tables[key] = (request, _scores(order, latest, room, request))
        rows = _rows(latest.node_index, offered)
        if not len(rows):
            return None
        scores = entry[1][rows]
        top = scores.max()
        if top == -np.inf:
            return None
        return self._names[int(rows[scores == top].min())]

    def moved(self, latest: Outcome, room: npt.NDArray[np.float64], row: int) -> None:
        """Row `row` of `room` changed (a pick or a re-plan took or gave back room there): every table's score of
        it again, in Python floats."""
        if self._for is None or self._for[0] is not latest:
            return
        order = self._for[1]
        alloc = latest.allocatable[row]
        node = ScalarRow([*alloc.tolist(), *(alloc - room[row]).tolist(), *[0.0] * (2 * len(alloc))], len(alloc))
        free = room[row].tolist()
        for request, scores in self._tables.values():
            fits = all(want < left + TOLERANCE for want, left in zip(request.tolist(), free, strict=True))
            scores[row] = float(order.scores(request, latest.dims.index, node, SCALAR)) if fits else -np.inf


def _scores(order: NodeOrder, latest: Outcome, room: npt.NDArray[np.float64],
            request: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    alloc = latest.allocatable
    scores = np.array(np.broadcast_to(order.scores(request, latest.dims.index, MatrixRows(alloc, alloc - room)),
                                      len(room)), dtype=np.float64)
    scores[~np.all(request < room + TOLERANCE, axis=1)] = -np.inf
    return scores


def _rows(index: Mapping[str, int], offered: Sequence[str]) -> npt.NDArray[np.intp]:
    """The rows of the offered nodes the outcome knows (kube-scheduler offers its own node list, which may hold a
    node newer than the last session)."""
    try:
        return np.fromiter(map(index.__getitem__, offered), dtype=np.intp, count=len(offered))
    except KeyError:
        return np.fromiter((index[n] for n in offered if n in index), dtype=np.intp)
