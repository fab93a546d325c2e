"""binpack: prefer nodes that are already full, GPU-weighted (Volcano's `plugins/binpack/binpack.go`).

For every resource the task requests (≥ 0.1, `pods` included) that has a weight w_r:
s_r = w_r·(request_r + used_r)/allocatable_r (0 where allocatable is 0; the whole score is 0 if the request does
not fit), score = 100·W·Σ s_r / Σ w_r. Arguments: `binpack.weight` (W, 1), `binpack.cpu` (1), `binpack.memory` (1),
`binpack.resources` (comma list) and `binpack.resources.<name>` (1; negative → 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from extender.engine.arguments import Arguments, number, text
from extender.engine.interface import Index, SessionView
from extender.engine.model import Task
from extender.engine.registry import register_plugin
from extender.engine.rowmath import Bool, NodeRows, Num, Ops
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


# Per request vector: [(column, requested amount, weight)] and 100·W/Σw; None when every node scores 0.
BinpackTerms = tuple[list[tuple[int, float, float]], float] | None


def binpack_terms(args: BinpackArgs, index: Mapping[str, int], request: Vec) -> BinpackTerms:
    """The terms of the score for one request vector over dimensions `index`."""
    terms = []
    for name, w in args.weights:
        d = index.get(name)
        if d is not None and request[d] >= TOLERANCE:
            terms.append((d, float(request[d]), w))
    weight_sum = sum(w for _, _, w in terms)
    if args.weight == 0 or weight_sum <= 0:
        return None
    return terms, 100.0 * args.weight / weight_sum


def binpack_score(ops: Ops, rows: NodeRows, terms: BinpackTerms) -> Num:
    """The binpack score (0–100·W) of the request `terms` were made for, over `rows`: the one formula, used by the
    plugin and by the extender's prioritize verb."""
    if terms is None:
        return 0.0
    columns, factor = terms
    fits: Bool = True
    total: Num = 0.0
    for col, request, weight in columns:
        alloc = rows.allocatable[col]
        after = rows.used[col] + request
        fits = fits & ((alloc == 0) | (after <= alloc))
        total = total + after / ops.where(alloc > 0, alloc, np.inf) * weight  # a resource the node lacks scores 0
    return ops.where(fits, total * factor, 0.0)


class BinpackScorer:
    def __init__(self, args: BinpackArgs) -> None:
        self.args = args
        self.weight, self.weights = args.weight, dict(args.weights)
        self.ssn: SessionView | None = None
        self._classes: dict[bytes, BinpackTerms] = {}
        self._last: tuple[Vec | None, BinpackTerms] = (None, None)

    def open(self, ssn: SessionView) -> None:
        self.ssn = ssn
        self._classes.clear()
        self._last = (None, None)

    def _class(self, task: Task) -> BinpackTerms:
        if task.resreq is self._last[0]:  # siblings share their request vector
            return self._last[1]
        entry = self._lookup(task)
        self._last = (task.resreq, entry)
        return entry

    def _lookup(self, task: Task) -> BinpackTerms:
        key = task.resreq.tobytes()
        if key in self._classes:
            return self._classes[key]
        assert self.ssn is not None
        entry = self._classes[key] = binpack_terms(self.args, self.ssn.dims.index, task.resreq)
        return entry

    def row_score(self, task: Task, ops: Ops, rows: NodeRows) -> Num:
        return binpack_score(ops, rows, self._class(task))

    def normalized(self, task: Task, idx: Index) -> npt.NDArray[np.float64] | None:
        return None

    def normalizes(self, task: Task) -> bool:
        return False


class BinpackPlugin:
    name = "binpack"

    def __init__(self, args: BinpackArgs) -> None:
        self.scorer = BinpackScorer(args)

    def on_session_open(self, ssn: SessionView) -> None:
        self.scorer.open(ssn)
        ssn.add_node_order(self.scorer)

    def on_session_close(self, ssn: SessionView) -> None:
        self.scorer.ssn = None


register_plugin("binpack", parse_arguments, BinpackPlugin)
