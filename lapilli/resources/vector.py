"""Resource vectors with Volcano's comparison semantics, as numpy arrays over a fixed set of dimensions.

A `Dims` fixes the order of resource names for one session, so a vector is a 1-D float array and many nodes form a
2-D array that one comparison checks at once. Missing resources are 0; "unconstrained" (a capability that does not
name a resource) is +inf.

* `less_equal(a, b)`: Volcano's `LessEqual` — every dimension `a < b` or within 0.1 of it.
* `less_equal_on(a, b, req)`: `LessEqualWithDimensionAndResourcesName` — only dimensions requested (> 0) by
  `req`, strictly (no tolerance), ignoring `pods`.
* `is_empty(a)`: every dimension but `pods` below 0.1.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from lapilli.resources.units import CPU, MEMORY, PODS, names_in

Vec = npt.NDArray[np.float64]
TOLERANCE = 0.1


class Dims:
    """The ordered resource names of one session."""

    __slots__ = ("index", "names", "pods", "size")

    def __init__(self, names: list[str]) -> None:
        self.names: tuple[str, ...] = tuple(names_in(names))
        self.index: dict[str, int] = {n: i for i, n in enumerate(self.names)}
        self.size = len(self.names)
        self.pods = self.index[PODS]

    def zeros(self) -> Vec:
        return np.zeros(self.size)

    def vector(self, units: Mapping[str, float], missing: float = 0.0) -> Vec:
        out = np.full(self.size, missing)
        for name, value in units.items():
            out[self.index[name]] = value
        return out


def less_equal(a: Vec, b: Vec) -> bool:
    return bool(np.all(a < b + TOLERANCE))


def less_equal_rows(a: Vec, b: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """`less_equal(a, row)` for every row of a 2-D array."""
    out: npt.NDArray[np.bool_] = np.all(a < b + TOLERANCE, axis=1)
    return out


def less_equal_on(a: Vec, b: Vec, req: Vec, pods: int) -> bool:
    # Over Python floats (the same comparisons): numpy's per-call cost dominates on a handful of resources, and the
    # enqueue and allocate votes ask this once per job.
    left, right = a.tolist(), b.tolist()
    for d, want in enumerate(req.tolist()):  # noqa: SIM110 (a generator costs more)
        if want > 0 and d != pods and not left[d] <= right[d]:
            return False
    return True


def is_empty(a: Vec, pods: int) -> bool:
    mask = a >= TOLERANCE
    mask[pods] = False
    return not bool(mask.any())


def sequential_sum(start: Vec, rows: list[Vec]) -> Vec:
    """`start + rows[0] + rows[1] + …`, added one after another as a loop of `+=` would (the same floats: no pairwise
    summation), in one numpy call instead of one per row."""
    if not rows:
        return start.copy()
    table = np.concatenate([start, *rows]).reshape(len(rows) + 1, len(start))  # vstack is 4x slower here
    out: Vec = np.add.accumulate(table, axis=0)[-1]
    return out


def exceeded_part(a: Vec, b: Vec) -> Vec:
    return np.maximum(a - b, 0.0)


__all__ = [
    "CPU",
    "MEMORY",
    "PODS",
    "TOLERANCE",
    "Dims",
    "Vec",
    "exceeded_part",
    "is_empty",
    "less_equal",
    "less_equal_on",
    "less_equal_rows",
    "sequential_sum",
]
