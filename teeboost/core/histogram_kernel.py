"""A node's histogram in one compiled pass over its rows, in exact int64.

numpy needs three ``bincount`` calls per feature per node, each with its own temporaries; at
100 trees of depth 6 that is tens of thousands of calls, and their fixed cost, not the
arithmetic, was most of a tree's time (cProfile of plain at 1e5 rows, docs/benchmarks.md).
The sums are integers, so the order they are added in does not change them: this kernel and
``histogram.add_block`` give the same histograms bit for bit.

Compiled once per process and cached on disk where the module is a file; an enclave's
measured loader runs the source (no file), so there it is compiled at the first call.
"""

from __future__ import annotations

import numba
import numpy as np

from .compiled import ON_HOST

from .row_kernels import checked_rows

__all__ = ["sum_node", "sum_node_aligned"]



@numba.njit(cache=ON_HOST, nogil=True)
def _sum(bins, rows, g, h, aligned, out):
    """``g``, ``h`` indexed by dataset row (a tree's gradients, zero outside its sample), or
    ``aligned`` with ``rows`` (each node carries its own)."""
    for f in range(bins.shape[0]):
        column = bins[f]
        hist = out[f]
        for i in range(rows.size):
            r = rows[i]
            k = i if aligned else r
            b = column[r]
            hist[b, 0] += g[k]
            hist[b, 1] += h[k]
            hist[b, 2] += 1


def sum_node(out: np.ndarray, bins: np.ndarray, rows: np.ndarray, g: np.ndarray, h: np.ndarray) -> None:
    """Add the rows ``rows`` of (n_features, n_rows) ``bins`` into ``out`` (n_features, width,
    3) int64, with gradients ``g``, ``h`` (int64) indexed by dataset row. Every bin must be
    below ``width`` (``HistogramBuilder`` checks its bins once)."""
    _sum(bins, checked_rows(rows, min(bins.shape[1], g.size, h.size)), _int64(g), _int64(h), False, out)


def sum_node_aligned(out: np.ndarray, bins: np.ndarray, rows: np.ndarray, g: np.ndarray, h: np.ndarray) -> None:
    """``sum_node`` with ``g``, ``h`` aligned with ``rows``."""
    rows = checked_rows(rows, bins.shape[1])
    if g.size != rows.size or h.size != rows.size:
        raise IndexError(f"{g.size} and {h.size} gradients for {rows.size} rows")
    _sum(bins, rows, _int64(g), _int64(h), True, out)


def _int64(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.int64)
