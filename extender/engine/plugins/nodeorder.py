"""nodeorder: kube-scheduler's score plugins, weighted (Volcano's `plugins/nodeorder/nodeorder.go`).

Row-local scores (LeastAllocated, MostAllocated, BalancedAllocation) are integers as upstream computes them and
depend only on the node's row, so the session caches them per task class. NodeAffinity (preferred terms) and
TaintToleration (PreferNoSchedule) are normalised over the candidate nodes, so they are computed at pick time, as
are InterPodAffinity (`interpodaffinity.py`) and PodTopologySpread's ScheduleAnyway constraints
(`podtopologyspread.py`) for the tasks they concern. Arguments (defaults): `leastrequested.weight` 1,
`mostrequested.weight` 0, `nodeaffinity.weight` 2, `balancedresource.weight` 1, `tainttoleration.weight` 3,
`podaffinity.weight` 2, `podtopologyspread.weight` 2. ImageLocality is not evaluated (its weight is accepted and
has no effect: the snapshot holds no images).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from extender.engine.arguments import Arguments, number
from extender.engine.interface import Index, SessionView
from extender.engine.model import Task
from extender.engine.plugins.podparts import ScorerPart, open_scorers
from extender.engine.registry import register_plugin
from extender.engine.rowmath import NodeRows, Num, Ops
from lapilli.nodematch import PREFER_NO_SCHEDULE
from lapilli.resources.units import CPU, GPU, MEMORY
from lapilli.resources.vector import Vec

# kube-scheduler counts a container without requests as 100m CPU / 200Mi memory when spreading load.
DEFAULT_MILLI_CPU: Final = 100.0
DEFAULT_MEMORY: Final = 200.0 * 1024 * 1024
MAX_SCORE: Final = 100.0

Scores = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class NodeOrderArgs:
    least: float = 1.0
    most: float = 0.0
    affinity: float = 2.0
    balanced: float = 1.0
    taint: float = 3.0
    pod_affinity: float = 2.0
    spread: float = 2.0


def parse_arguments(arguments: Arguments) -> NodeOrderArgs:
    return NodeOrderArgs(
        least=number(arguments, "leastrequested.weight", 1),
        most=number(arguments, "mostrequested.weight", 0),
        affinity=number(arguments, "nodeaffinity.weight", 2),
        balanced=number(arguments, "balancedresource.weight", 1),
        taint=number(arguments, "tainttoleration.weight", 3),
        pod_affinity=number(arguments, "podaffinity.weight", 2),
        spread=number(arguments, "podtopologyspread.weight", 2),
    )


def request_columns(index: Mapping[str, int], request: Vec) -> list[tuple[int, float]]:
    """cpu, memory (and GPU when the request asks for it) columns and what the request adds to each."""
    cpu, memory = index[CPU], index[MEMORY]
    columns = [(cpu, float(request[cpu]) or DEFAULT_MILLI_CPU), (memory, float(request[memory]) or DEFAULT_MEMORY)]
    gpu = index.get(GPU)
    if gpu is not None and request[gpu] > 0:
        columns.append((gpu, float(request[gpu])))
    return columns


def row_local_score(args: NodeOrderArgs, columns: list[tuple[int, float]], ops: Ops, rows: NodeRows) -> Num:
    """LeastAllocated, MostAllocated and BalancedAllocation, weighted, for the request `columns` were made for: the
    one formula, used by the plugin and by filter's pick of a pod that passes without a plan."""
    least: Num = 0.0  # Σ over cpu and memory
    most: Num = 0.0
    fractions: list[Num] = []
    for n, (col, want) in enumerate(columns):
        capacity = rows.allocatable[col]
        requested = rows.used[col] + want
        positive = capacity > 0
        safe = ops.where(positive, capacity, 1.0)
        # LeastAllocated and MostAllocated average cpu and memory only, in integers as upstream does.
        if n < 2 and (args.least or args.most):
            usable = positive & (requested <= capacity)
            if args.least:
                least = least + ops.where(usable, ops.floor((capacity - requested) * MAX_SCORE / safe), 0.0)
            if args.most:
                most = most + ops.where(usable, ops.floor(requested * MAX_SCORE / safe), 0.0)
        if args.balanced:
            fractions.append(ops.where(positive, ops.minimum(requested / safe, 1.0), 1.0))
    total: Num = 0.0
    if args.least:
        total = total + args.least * ops.floor(least / 2)
    if args.most:
        total = total + args.most * ops.floor(most / 2)
    if args.balanced:
        total = total + args.balanced * ops.floor((1.0 - _std(ops, fractions)) * MAX_SCORE)
    return total


class NodeOrderScorer:
    def __init__(self, args: NodeOrderArgs) -> None:
        self.args = args
        self.affinity, self.taint = args.affinity, args.taint
        self.pod_affinity, self.spread = args.pod_affinity, args.spread
        self.ssn: SessionView | None = None
        self.parts: list[ScorerPart] = []  # pod affinity and spread, when some pod has such terms
        # Raw NodeAffinity / TaintToleration counts over all nodes, per pod template (predicate key).
        self._raw_affinity: dict[str, Scores] = {}
        self._raw_taints: dict[str, Scores] = {}
        self._any_prefer_no_schedule = False
        self._cols: dict[bytes, list[tuple[int, float]]] = {}
        self._last: tuple[npt.NDArray[np.float64] | None, list[tuple[int, float]]] = (None, [])

    def open(self, ssn: SessionView) -> None:
        self.ssn = ssn
        self._raw_affinity.clear()
        self._raw_taints.clear()
        self._cols.clear()
        self._last = (None, [])
        self._any_prefer_no_schedule = any(
            t.effect == PREFER_NO_SCHEDULE for n in ssn.nodes for t in n.taints
        )
        self.parts = open_scorers(ssn, self.pod_affinity, self.spread)

    def _columns(self, task: Task) -> list[tuple[int, float]]:
        if task.resreq is self._last[0]:  # siblings share their request vector
            return self._last[1]
        key = task.resreq.tobytes()
        cached = self._cols.get(key)
        if cached is None:
            assert self.ssn is not None
            cached = self._cols[key] = request_columns(self.ssn.dims.index, task.resreq)
        self._last = (task.resreq, cached)
        return cached

    def row_score(self, task: Task, ops: Ops, rows: NodeRows) -> Num:
        return row_local_score(self.args, self._columns(task), ops, rows)

    def normalizes(self, task: Task) -> bool:
        return bool(self.affinity and task.placement.preferred) or bool(self.taint and self._any_prefer_no_schedule)

    def normalized(self, task: Task, idx: Index) -> Scores | None:
        assert self.ssn is not None
        nodes = self.ssn.nodes
        extra: Scores | None = None
        placement = task.placement
        if self.affinity and placement.preferred:
            all_raw = self._raw_affinity.get(task.predicate_key)
            if all_raw is None:
                all_raw = np.array([placement.preferred_weight(n.labels, n.name) for n in nodes], dtype=float)
                self._raw_affinity[task.predicate_key] = all_raw
            raw = all_raw[idx]
            top = raw.max(initial=0.0)
            if top > 0:
                extra = self.affinity * np.floor(raw * MAX_SCORE / top)
        # Without PreferNoSchedule taints every node scores the same here, which cannot change the choice.
        if self.taint and self._any_prefer_no_schedule:
            all_raw = self._raw_taints.get(task.predicate_key)
            if all_raw is None:
                all_raw = np.array([placement.prefer_no_schedule_count(n.taints) for n in nodes], dtype=float)
                self._raw_taints[task.predicate_key] = all_raw
            raw = all_raw[idx]
            top = raw.max(initial=0.0)
            taint_scores = np.full(len(idx), MAX_SCORE) if top == 0 else np.floor((top - raw) * MAX_SCORE / top)
            taint_scores = self.taint * taint_scores
            extra = taint_scores if extra is None else extra + taint_scores
        for part in self.parts:
            more = part.normalized(task, idx)
            if more is not None:
                extra = more if extra is None else extra + more
        return extra


def _std(ops: Ops, values: list[Num]) -> Num:
    """Population standard deviation, summed left to right as numpy's `std(axis=1)` does for a short row."""
    mean = values[0]
    for value in values[1:]:
        mean = mean + value
    mean = mean / len(values)
    square = (values[0] - mean) * (values[0] - mean)
    for value in values[1:]:
        square = square + (value - mean) * (value - mean)
    return ops.sqrt(square / len(values))


class NodeOrderPlugin:
    name = "nodeorder"

    def __init__(self, args: NodeOrderArgs) -> None:
        self.scorer = NodeOrderScorer(args)

    def on_session_open(self, ssn: SessionView) -> None:
        self.scorer.open(ssn)
        ssn.add_node_order(self.scorer)

    def on_session_close(self, ssn: SessionView) -> None:
        self.scorer.ssn = None
        self.scorer.parts = []


register_plugin("nodeorder", parse_arguments, NodeOrderPlugin)
