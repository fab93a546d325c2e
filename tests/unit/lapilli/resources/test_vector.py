"""The resource-vector comparisons and sums the engine's votes use, against their plain numpy definitions."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from lapilli.resources.vector import less_equal_on, sequential_sum

values = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False) | st.sampled_from([0.0, 0.1, np.inf])
vectors = st.lists(values, min_size=4, max_size=4).map(np.array)


@given(vectors, vectors, vectors, st.integers(0, 3))
def test_less_equal_on_compares_the_requested_dimensions_but_pods(a, b, req, pods) -> None:
    mask = req > 0
    mask[pods] = False
    assert less_equal_on(a, b, req, pods) == bool(np.all(a[mask] <= b[mask]))


@given(vectors, st.lists(vectors, max_size=12))
def test_sequential_sum_adds_row_after_row(start, rows) -> None:
    expected = start.copy()
    for row in rows:
        expected += row  # the loop it replaces, whose floats (order of additions included) it must give
    assert sequential_sum(start, rows).tobytes() == expected.tobytes()


def test_sequential_sum_is_not_pairwise() -> None:
    # 1e16 + 1 + 1 … one at a time loses every 1 (the spacing of floats there is 2); a pairwise sum would keep them.
    rows = [np.array([1e16])] + [np.array([1.0])] * 8
    assert sequential_sum(np.zeros(1), rows)[0] == 1e16
