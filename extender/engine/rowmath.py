"""Node-row formulas written once, evaluated over every node or over the one row a placement changed.

A scorer or fit check is written against `Ops` and `NodeRows` (`rows.used[col]`: one resource over the rows):
plain arithmetic (`+ - * / < <= & |`) works the same on numpy arrays and on Python floats, and the few functions
that do not (`where`, `floor`, `minimum`, `sqrt`) come from `ops`. `VECTOR` evaluates a formula over numpy columns
(a session builds a task class's scores for all nodes in one pass); `SCALAR` evaluates the same formula over Python
floats, because after a placement only that node's row changed and numpy's per-call overhead (~1 µs) dwarfs a
handful of float operations. Both evaluators do the same IEEE operations in the same order, so they agree bit for
bit (tests/unit/extender/engine/test_placement_fastpath.py checks). Reductions are spelled out left to right
(`a + b + c`), which is also how numpy sums a short row.
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


class Columns(Protocol):
    """One resource matrix of the node arrays, indexed by column: `m[col]` is that resource over the rows."""

    def __getitem__(self, col: int) -> Num: ...


class NodeRows(Protocol):
    """The node arrays over the rows being evaluated."""

    @property
    def allocatable(self) -> Columns: ...

    @property
    def used(self) -> Columns: ...

    @property
    def releasing(self) -> Columns: ...

    @property
    def pipelined(self) -> Columns: ...


class _VectorColumns:
    __slots__ = ("_idx", "_matrix")

    def __init__(self, matrix: npt.NDArray[np.float64], idx: npt.NDArray[np.intp] | None) -> None:
        self._matrix = matrix
        self._idx = idx

    def __getitem__(self, col: int) -> Num:
        return self._matrix[:, col] if self._idx is None else self._matrix[self._idx, col]


class VectorRows:
    """The rows `idx` (every row when `idx` is None); a column is a numpy array over them."""

    __slots__ = ("allocatable", "pipelined", "releasing", "used")

    def __init__(self, arrays: NodeArrays, idx: npt.NDArray[np.intp] | None) -> None:
        self.allocatable = _VectorColumns(arrays.allocatable, idx)
        self.used = _VectorColumns(arrays.used, idx)
        self.releasing = _VectorColumns(arrays.releasing, idx)
        self.pipelined = _VectorColumns(arrays.pipelined, idx)


class MatrixRows:
    """Rows given as an allocatable and a used matrix (nothing releasing or pipelined): the node room a session
    outcome reports, scored outside a session (the extender's prioritize)."""

    __slots__ = ("allocatable", "pipelined", "releasing", "used")

    def __init__(self, allocatable: npt.NDArray[np.float64], used: npt.NDArray[np.float64]) -> None:
        nothing = np.zeros_like(used)
        self.allocatable = _VectorColumns(allocatable, None)
        self.used = _VectorColumns(used, None)
        self.releasing = _VectorColumns(nothing, None)
        self.pipelined = _VectorColumns(nothing, None)


class ScalarRow:
    """One node's row as lists of Python floats (read once per refresh, shared by every formula of that refresh)."""

    __slots__ = ("allocatable", "pipelined", "releasing", "used")

    def __init__(self, values: list[float], dims: int) -> None:
        # values: NodeArrays.state[row].tolist(), i.e. allocatable, used, releasing, pipelined one after another
        self.allocatable = values[:dims]
        self.used = values[dims : 2 * dims]
        self.releasing = values[2 * dims : 3 * dims]
        self.pipelined = values[3 * dims :]

    @classmethod
    def of(cls, arrays: NodeArrays, row: int) -> ScalarRow:
        return cls(arrays.state[row].tolist(), arrays.allocatable.shape[1])


__all__ = ["SCALAR", "VECTOR", "Bool", "Columns", "MatrixRows", "NodeRows", "Num", "Ops", "ScalarRow", "VectorRows"]
