"""The per-node passes over rows a tree makes at every split, compiled: a node's gradient
totals and its rows cut into its children.

numpy does each with temporaries (a gather, then a sum; a boolean index per child), and at
100 trees of depth 6 they ran tens of thousands of times: 0.5 s and 0.3 s of plain's 2.1 s at
1e5 rows (cProfile, docs/benchmarks.md). Integer sums and copies: the results are numpy's.
"""

from __future__ import annotations

import numba
import numpy as np

from .compiled import ON_HOST

__all__ = ["node_totals", "masked_totals", "split_rows", "checked_rows"]



@numba.njit(cache=ON_HOST, nogil=True)
def first_outside(rows, n_rows):
    """The first row outside [0, n_rows), or -1: a compiled kernel does not check its indices,
    so a row outside would read memory instead of raising as numpy does."""
    for i in range(rows.size):
        if rows[i] < 0 or rows[i] >= n_rows:
            return i
    return -1


@numba.njit(cache=ON_HOST, nogil=True)
def _totals(g, h, rows):
    total_g = np.int64(0)
    total_h = np.int64(0)
    for i in range(rows.size):
        total_g += g[rows[i]]
        total_h += h[rows[i]]
    return total_g, total_h


@numba.njit(cache=ON_HOST, nogil=True)
def _masked_totals(g, h, rows, chosen):
    total_g = np.int64(0)
    total_h = np.int64(0)
    for i in range(rows.size):
        if chosen[i]:
            total_g += g[rows[i]]
            total_h += h[rows[i]]
    return total_g, total_h


@numba.njit(cache=ON_HOST, nogil=True)
def _split(values, went_left, left, right):
    a = 0
    b = 0
    for i in range(values.size):
        if went_left[i]:
            left[a] = values[i]
            a += 1
        else:
            right[b] = values[i]
            b += 1


def node_totals(g: np.ndarray, h: np.ndarray, rows: np.ndarray) -> tuple[int, int]:
    """Exact int64 (sum of g, sum of h) over ``rows`` (wrapping as numpy's sums wrap)."""
    rows = checked_rows(rows, min(g.size, h.size))
    total_g, total_h = _totals(g, h, rows)
    return int(total_g), int(total_h)


def masked_totals(g: np.ndarray, h: np.ndarray, rows: np.ndarray, chosen: np.ndarray) -> tuple[int, int]:
    """``node_totals`` of ``rows[chosen]``, without gathering them first."""
    rows = checked_rows(rows, min(g.size, h.size))
    if chosen.shape != rows.shape:
        raise IndexError(f"{chosen.size} choices for {rows.size} rows")
    total_g, total_h = _masked_totals(g, h, rows, np.ascontiguousarray(chosen, dtype=np.bool_))
    return int(total_g), int(total_h)


def checked_rows(rows: np.ndarray, n_rows: int) -> np.ndarray:
    """``rows`` as int64, each in [0, n_rows) (``first_outside``), else IndexError."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    bad = first_outside(rows, n_rows)
    if bad >= 0:
        raise IndexError(f"row {int(rows[bad])} is outside 0..{n_rows - 1}")
    return rows


def split_rows(values: np.ndarray, went_left: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values[went_left], values[~went_left]) in one pass, order kept."""
    if went_left.shape != values.shape:
        raise IndexError(f"{went_left.size} sides for {values.size} values")
    n_left = int(np.count_nonzero(went_left))
    left = np.empty(n_left, dtype=values.dtype)
    right = np.empty(values.size - n_left, dtype=values.dtype)
    _split(values, went_left, left, right)
    return left, right
