"""Node-row formulas written once, evaluated over every node or over the one row a placement changed.

A scorer or fit check is written against `Ops` and `NodeRows`: plain arithmetic (`+ - * / < <= & |`) works the same
on numpy arrays and on Python floats, and the few functions that do not (`where`, `floor`, `minimum`, `sqrt`) come
from `ops`. `VECTOR` evaluates a formula over numpy columns (a session builds a task class's scores for all nodes
in one pass); `SCALAR` evaluates the same formula over Python floats, because after a placement only that node's row
changed and numpy's per-call overhead (~1 µs) dwarfs a handful of float operations. Both evaluators do the same
IEEE operations in the same order, so they agree bit for bit (tests/unit/engine/test_placement_fastpath.py checks).
Reductions are spelled out left to right (`a + b + c`), which is also how numpy sums a short row.
"""

from __future__ import annotations

import math
from typing import Final, Protocol

import numpy as np
import numpy.typing as npt

from extender.engine.model import NodeArrays

Column = npt.NDArray[np.float64]
Flags = npt.NDArray[np.bool_]
# A formula's values: float / bool for one row, or numpy arrays over many rows.
Num = float | Column
Bool = bool | Flags


class Ops(Protocol):
    def where(self, cond: Bool, a: Num, b: Num) -> Num: ...

    def floor(self, x: Num) -> Num: ...

    def minimum(self, a: Num, b: Num) -> Num: ...

    def sqrt(self, x: Num) -> Num: ...


class _VectorOps:
    @staticmethod
    def where(cond: Bool, a: Num, b: Num) -> Num:
        return np.where(cond, a, b)

    @staticmethod
    def floor(x: Num) -> Num:
        return np.floor(x)

    @staticmethod
    def minimum(a: Num, b: Num) -> Num:
        return np.minimum(a, b)

    @staticmethod
    def sqrt(x: Num) -> Num:
        return np.sqrt(x)


class _ScalarOps:
    # Inputs are finite (node resources and requests), so min/floor/sqrt need no NaN handling to match numpy.
    @staticmethod
    def where(cond: Bool, a: Num, b: Num) -> Num:
        return a if cond else b

    @staticmethod
    def floor(x: Num) -> Num:
        return float(math.floor(x))  # type: ignore[arg-type]

    @staticmethod
    def minimum(a: Num, b: Num) -> Num:
        return a if a <= b else b  # type: ignore[operator]

    @staticmethod
    def sqrt(x: Num) -> Num:
        return math.sqrt(x)  # type: ignore[arg-type]


VECTOR: Final[Ops] = _VectorOps()
SCALAR: Final[Ops] = _ScalarOps()


class NodeRows(Protocol):
    """One resource column of the node arrays, over the rows being evaluated."""

    def allocatable(self, col: int) -> Num: ...

    def used(self, col: int) -> Num: ...

    def releasing(self, col: int) -> Num: ...

    def pipelined(self, col: int) -> Num: ...


class VectorRows:
    """Columns over the rows `idx` (every row when `idx` is None) as numpy arrays."""

    __slots__ = ("_arrays", "_idx")

    def __init__(self, arrays: NodeArrays, idx: npt.NDArray[np.intp] | None) -> None:
        self._arrays = arrays
        self._idx = idx

    def _col(self, matrix: npt.NDArray[np.float64], col: int) -> Column:
        return matrix[:, col] if self._idx is None else matrix[self._idx, col]

    def allocatable(self, col: int) -> Num:
        return self._col(self._arrays.allocatable, col)

    def used(self, col: int) -> Num:
        return self._col(self._arrays.used, col)

    def releasing(self, col: int) -> Num:
        return self._col(self._arrays.releasing, col)

    def pipelined(self, col: int) -> Num:
        return self._col(self._arrays.pipelined, col)


class ScalarRow:
    """One node's row as Python floats (read once per refresh, shared by every formula of that refresh)."""

    __slots__ = ("_dims", "_values")

    def __init__(self, values: list[float], dims: int) -> None:
        self._values = values  # NodeArrays.state[row].tolist(): allocatable, used, releasing, pipelined
        self._dims = dims

    @classmethod
    def of(cls, arrays: NodeArrays, row: int) -> ScalarRow:
        return cls(arrays.state[row].tolist(), arrays.allocatable.shape[1])

    def allocatable(self, col: int) -> Num:
        return self._values[col]

    def used(self, col: int) -> Num:
        return self._values[self._dims + col]

    def releasing(self, col: int) -> Num:
        return self._values[2 * self._dims + col]

    def pipelined(self, col: int) -> Num:
        return self._values[3 * self._dims + col]


__all__ = ["SCALAR", "VECTOR", "Bool", "NodeRows", "Num", "Ops", "ScalarRow", "VectorRows"]
