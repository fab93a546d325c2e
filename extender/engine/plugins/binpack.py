"""binpack: prefer nodes that are already full, GPU-weighted (Volcano's `plugins/binpack/binpack.go`).

For every resource the task requests (≥ 0.1, `pods` included) that has a weight w_r:
s_r = w_r·(request_r + used_r)/allocatable_r (0 where allocatable is 0; the whole score is 0 if the request does
not fit), score = 100·W·Σ s_r / Σ w_r. Arguments: `binpack.weight` (W, 1), `binpack.cpu` (1), `binpack.memory` (1),
`binpack.resources` (comma list) and `binpack.resources.<name>` (1; negative → 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from extender.engine.arguments import Arguments, number, text
from extender.engine.framework import Fn, register_plugin
from extender.engine.model import Task
from extender.engine.rowmath import Bool, NodeRows, Num, Ops
from extender.engine.session import Index, Session
from lapilli.resources.units import CPU, MEMORY
from lapilli.resources.vector import TOLERANCE, Vec


@dataclass(frozen=True, slots=True)
class BinpackArgs:
    """The plugin weight W and the weight of each resource (cpu and memory always; then `binpack.resources`)."""

    weight: float = 1.0
    weights: tuple[tuple[str, float], ...] = ((CPU, 1.0), (MEMORY, 1.0))


def parse_arguments(arguments: Arguments) -> BinpackArgs:
    weights = {CPU: number(arguments, "binpack.cpu", 1), MEMORY: number(arguments, "binpack.memory", 1)}
    for name in text(arguments, "binpack.resources", "").split(","):
        name = name.strip()
        if not name:
            continue
        value = number(arguments, f"binpack.resources.{name}", 1)
        weights[name] = 1.0 if value < 0 else value
    if weights[CPU] < 0:
        weights[CPU] = 1.0
    if weights[MEMORY] < 0:
        weights[MEMORY] = 1.0
    return BinpackArgs(weight=number(arguments, "binpack.weight", 1), weights=tuple(weights.items()))


class BinpackScorer:
    def __init__(self, args: BinpackArgs) -> None:
        self.weight, self.weights = args.weight, dict(args.weights)
        self.ssn: Session | None = None
        # Per request vector: [(column, requested amount, weight)] and 100·W/Σw, or None when the score is 0.
        self._classes: dict[bytes, tuple[list[tuple[int, float, float]], float] | None] = {}
        self._last: tuple[Vec | None, tuple[list[tuple[int, float, float]], float] | None] = (None, None)

    def open(self, ssn: Session) -> None:
        self.ssn = ssn
        self._classes.clear()
        self._last = (None, None)

    def _class(self, task: Task) -> tuple[list[tuple[int, float, float]], float] | None:
        if task.resreq is self._last[0]:  # siblings share their request vector
            return self._last[1]
        entry = self._lookup(task)
        self._last = (task.resreq, entry)
        return entry

    def _lookup(self, task: Task) -> tuple[list[tuple[int, float, float]], float] | None:
        key = task.resreq.tobytes()
        if key in self._classes:
            return self._classes[key]
        assert self.ssn is not None
        terms = []
        for name, w in self.weights.items():
            d = self.ssn.dims.index.get(name)
            if d is not None and task.resreq[d] >= TOLERANCE:
                terms.append((d, float(task.resreq[d]), w))
        weight_sum = sum(w for _, _, w in terms)
        entry = None
        if self.weight != 0 and weight_sum > 0:
            entry = (terms, 100.0 * self.weight / weight_sum)
        self._classes[key] = entry
        return entry

    def row_score(self, task: Task, ops: Ops, rows: NodeRows) -> Num:
        entry = self._class(task)
        if entry is None:
            return 0.0
        terms, factor = entry
        fits: Bool = True
        total: Num = 0.0
        for col, request, weight in terms:
            alloc = rows.allocatable[col]
            after = rows.used[col] + request
            fits = fits & ((alloc == 0) | (after <= alloc))
            total = total + after / ops.where(alloc > 0, alloc, np.inf) * weight  # a resource the node lacks scores 0
        return ops.where(fits, total * factor, 0.0)

    def normalized(self, task: Task, idx: Index) -> npt.NDArray[np.float64] | None:
        return None

    def normalizes(self, task: Task) -> bool:
        return False


class BinpackPlugin:
    name = "binpack"

    def __init__(self, args: BinpackArgs) -> None:
        self.scorer = BinpackScorer(args)

    def on_session_open(self, ssn: Session) -> None:
        self.scorer.open(ssn)
        ssn.add_fn(Fn.NODE_ORDER, self.scorer)

    def on_session_close(self, ssn: Session) -> None:
        self.scorer.ssn = None


register_plugin("binpack", parse_arguments, BinpackPlugin)
