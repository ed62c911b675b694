"""The compiled per-node passes (``teeboost.core.row_kernels``, ``histogram_kernel``) give
numpy's answers, and refuse rows numpy would refuse instead of reading past an array."""

import numpy as np
import pytest

from teeboost.core.histogram_kernel import sum_node, sum_node_aligned
from teeboost.core.row_kernels import node_totals, split_rows


def test_totals_and_children_are_numpys():
    rng = np.random.default_rng(4)
    g, h = rng.integers(-2**62, 2**62, 1000), rng.integers(0, 2**62, 1000)  # sums wrap, as numpy's do
    rows = rng.choice(1000, 400, replace=False)
    assert node_totals(g, h, rows) == (int(g[rows].sum()), int(h[rows].sum()))
    assert node_totals(g, h, rows[:0]) == (0, 0)
    went_left = rng.random(400) < 0.3
    left, right = split_rows(rows, went_left)
    assert np.array_equal(left, rows[went_left]) and np.array_equal(right, rows[~went_left])
    assert left.dtype == rows.dtype


@pytest.mark.parametrize("bad", [-1, 1000, 2**40])
def test_a_row_outside_the_arrays_is_refused_not_read(bad):
    g = h = np.zeros(1000, dtype=np.int64)
    bins = np.zeros((2, 1000), dtype=np.uint8)
    out = np.zeros((2, 4, 3), dtype=np.int64)
    rows = np.array([3, bad, 5])
    with pytest.raises(IndexError, match=f"row {bad} is outside"):
        node_totals(g, h, rows)
    with pytest.raises(IndexError, match=f"row {bad} is outside"):
        sum_node(out, bins, rows, g, h)
    with pytest.raises(IndexError, match=f"row {bad} is outside"):
        sum_node_aligned(out, bins, rows, g[:3], h[:3])
    with pytest.raises(IndexError, match="sides for"):
        split_rows(rows, np.ones(2, dtype=bool))
    assert not out.any()


def test_a_histogram_builder_refuses_bins_beyond_its_width():
    from teeboost.core.histogram import HistogramBuilder

    with pytest.raises(ValueError, match="bin 9, outside the histogram's 9 bins"):
        HistogramBuilder(np.array([[0, 9, 3]], dtype=np.uint8), 9)


def test_totals_of_the_chosen_rows_are_numpys_and_refuse_a_wrong_mask():
    from teeboost.core.row_kernels import masked_totals

    rng = np.random.default_rng(6)
    g, h = rng.integers(-2**40, 2**40, 300), rng.integers(0, 2**40, 300)
    rows = rng.choice(300, 120, replace=False)
    chosen = rng.random(120) < 0.5
    assert masked_totals(g, h, rows, chosen) == (int(g[rows[chosen]].sum()), int(h[rows[chosen]].sum()))
    with pytest.raises(IndexError, match="choices for"):
        masked_totals(g, h, rows, chosen[:-1])
    with pytest.raises(IndexError, match="row 300 is outside"):
        masked_totals(g, h, np.append(rows, 300), np.append(chosen, True))
