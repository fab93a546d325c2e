"""Why no node accepts a task: Volcano's FitErrors histogram (`api/unschedule_info.go`: `0/N nodes are
unavailable: 3 Insufficient cpu, 1 node(s) had untolerated taint {gpu: yes}.`), with kube-scheduler's Status code.

Each node is counted once per reason: resources short of the node's future idle (one numpy pass), then the
predicates' and node-local callbacks' reasons, asked only of the nodes some predicate refuses (`Predicate.explain`'s
contract) and, when no dynamic mask constrains the task, kept per pod template. The same class asking again before
any node changed (gangs of identical pods that all found nowhere) gets the same Status. UnschedulableAndUnresolvable
when no eviction could open any node (the placement's `preempt_mask`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from extender.engine.interface import Code, Index, Mask, NodeLocal, Predicate, Status
from extender.engine.model import Node, NodeArrays, Task
from lapilli.resources.vector import TOLERANCE, Dims


class Masks(Protocol):
    """What of the placement a fit error reads."""

    @property
    def changes(self) -> int:
        """How many node rows changed so far (a kept answer stands while this does not move)."""
        ...

    def static_mask(self, task: Task) -> Mask: ...

    def dynamic_mask(self, task: Task, idx: Index) -> Mask | None: ...

    def preempt_mask(self, task: Task) -> Mask: ...


class FitErrors:
    """The placement's fit errors, with what it keeps between asks."""

    def __init__(self, masks: Masks, nodes: list[Node], arrays: NodeArrays, dims: Dims) -> None:
        self.masks, self.nodes, self.arrays, self.dims = masks, nodes, arrays, dims
        self._predicates: list[Predicate] = []
        self._locals: list[NodeLocal] = []
        self._kept: dict[tuple[bytes, str], tuple[int, Status]] = {}  # class -> (changes then, its fit error)
        self._static_reasons: dict[str, dict[str, int]] = {}  # pod template -> predicate reasons where static refuses

    def plug(self, predicates: list[Predicate], locals_: list[NodeLocal]) -> None:
        self._predicates, self._locals = predicates, locals_
        self._kept.clear()
        self._static_reasons.clear()

    def of(self, task: Task, rows: Index | None = None, hypernode: str = "") -> Status:
        """Over every node, or over the nodes `rows` of HyperNode `hypernode` only (`In hyperNode leaf-3: 0/4 nodes
        are unavailable: …`): allocate's view when a gang must stay inside one HyperNode."""
        if rows is not None:
            return self._within(task, rows, hypernode)
        masks = self.masks
        dynamic = masks.dynamic_mask(task, np.arange(len(self.nodes))) if self.nodes else None
        key = (task.resreq.tobytes(), task.predicate_key)
        known = self._kept.get(key) if dynamic is None and not task.device_ask else None
        if known is not None and known[0] == masks.changes:
            return known[1]  # kept only where no dynamic mask applied: the same for every task of the class
        reasons = self._short(task, self.arrays.future_idle())
        static = masks.static_mask(task)
        locals_ = [local for local in self._locals if local.applies(task)]
        if locals_:  # node-local state (vGPU cards) may refuse any node: ask about each
            refused = self._explain(task, np.arange(len(self.nodes)), locals_)
        elif dynamic is None:
            kept = self._static_reasons.get(task.predicate_key)
            if kept is None:
                kept = self._static_reasons[task.predicate_key] = self._explain(task, np.flatnonzero(~static))
            refused = kept
        else:
            refused = self._explain(task, np.flatnonzero(~(static & dynamic)))
        status = _status(len(self.nodes), reasons, refused, bool(masks.preempt_mask(task).any()))
        if dynamic is None and not locals_:
            self._kept[key] = (masks.changes, status)
        return status

    def _within(self, task: Task, rows: Index, hypernode: str) -> Status:
        arrays, masks = self.arrays, self.masks
        future = arrays.allocatable[rows] - arrays.used[rows] + arrays.releasing[rows] - arrays.pipelined[rows]
        reasons = self._short(task, future)
        static = masks.static_mask(task)[rows]
        dynamic = masks.dynamic_mask(task, rows)
        locals_ = [local for local in self._locals if local.applies(task)]
        passing = static if dynamic is None else static & dynamic
        refused = self._explain(task, rows if locals_ else rows[~passing], locals_)
        status = _status(len(rows), reasons, refused, bool(masks.preempt_mask(task)[rows].any()))
        return Status(status.code, f"In hyperNode {hypernode}: {status.message}") if hypernode and (
            reasons or refused) else status

    def _short(self, task: Task, future: npt.NDArray[np.float64]) -> dict[str, int]:
        """`Insufficient <resource>`: how many of the nodes (rows of `future`) lack room for the task's request."""
        short = task.resreq >= future + TOLERANCE
        return {f"Insufficient {dim}": count
                for dim, count in zip(self.dims.names, short.sum(axis=0).tolist(), strict=True) if count}

    def _explain(self, task: Task, rows: Index, locals_: Sequence[NodeLocal] = ()) -> dict[str, int]:
        """How many of the nodes `rows` each predicate (and node-local) reason refuses, a node counted once per
        reason."""
        reasons: dict[str, int] = {}
        for row in rows.tolist():
            node = self.nodes[row]
            found: dict[str, None] = {}
            for pred in self._predicates:
                found.update(dict.fromkeys(pred.explain(task, node)))
            for local in locals_:
                found.update(dict.fromkeys(local.explain(task, node)))
            for reason in found:
                reasons[reason] = reasons.get(reason, 0) + 1
        return reasons


def _status(nodes: int, short: dict[str, int], refused: dict[str, int], resolvable: bool) -> Status:
    reasons = dict(short)
    for reason, count in refused.items():
        reasons[reason] = reasons.get(reason, 0) + count
    histogram = ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items()))
    text = f"0/{nodes} nodes are unavailable"
    code = Code.UNSCHEDULABLE if resolvable else Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    return Status(code, f"{text}: {histogram}." if histogram else text)


__all__ = ["FitErrors", "Masks"]
