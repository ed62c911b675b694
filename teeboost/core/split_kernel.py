"""The best split of each node in one compiled pass over its histogram, for the common case.

``split.best_splits`` scores every (node, feature, bin, missing side) with numpy: a dozen
temporaries of that size per level, which at 256 bins was half of a small run's time (cProfile
of plain at 1e4 rows x 100 trees x depth 6, docs/benchmarks.md). Here the same candidates are
scored by the same formula, operation for operation in the same order (IEEE-754 float64, no
fused or reordered arithmetic: numba's default), so every gain and every winner is the one
numpy finds, ties to the first candidate in (feature, bin, side) order as ``np.argmax`` breaks
them. Only runs without categorical features, monotone constraints, interaction constraints or
a capped leaf weight come here; the rest keep numpy.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from .compiled import ON_HOST

__all__ = ["best_candidates"]



@numba.njit(cache=ON_HOST, nogil=True, error_model="numpy")  # x / 0 is inf or nan, as in numpy
def _score(g, h, reg_lambda, reg_alpha):
    if reg_alpha != 0.0:
        g = np.sign(g) * max(abs(g) - reg_alpha, 0.0)
    return g * g / (h + reg_lambda)


@numba.njit(cache=ON_HOST, nogil=True, error_model="numpy")  # x / 0 is inf or nan, as in numpy
def _best(hist, n_value_bins, sampled, scale, reg_lambda, reg_alpha, min_child_weight, min_samples_leaf, threshold,
          gains, indices):
    n_nodes, n_features, width, _ = hist.shape
    value_bins = width - 1
    for node in range(n_nodes):
        best = -np.inf
        where = 0
        for f in range(n_features):
            m_g = hist[node, f, value_bins, 0]
            m_h = hist[node, f, value_bins, 1]
            m_n = hist[node, f, value_bins, 2]
            t_g = m_g
            t_h = m_h
            for b in range(value_bins):  # the node's total, as the last cumulative sum plus missing
                t_g += hist[node, f, b, 0]
                t_h += hist[node, f, b, 1]
            total_score = _score(t_g * scale, t_h * scale, reg_lambda, reg_alpha)
            t_n = m_n
            for b in range(value_bins):
                t_n += hist[node, f, b, 2]
            c_g = np.int64(0)
            c_h = np.int64(0)
            c_n = np.int64(0)
            usable = sampled[f]
            last = n_value_bins[f] - 1
            for b in range(value_bins):
                e_g, e_h, e_n = hist[node, f, b, 0], hist[node, f, b, 1], hist[node, f, b, 2]
                if b > 0 and e_g == 0 and e_h == 0 and e_n == 0:
                    continue  # the same sums as bin b - 1, so the same gains: never strictly better
                c_g += e_g
                c_h += e_h
                c_n += e_n
                for side in range(2):
                    if side == 0:
                        l_g, l_h, l_n = c_g, c_h, c_n
                    else:
                        l_g, l_h, l_n = c_g + m_g, c_h + m_h, c_n + m_n
                    r_g, r_h, r_n = t_g - l_g, t_h - l_h, t_n - l_n
                    gl, hl = l_g * scale, l_h * scale
                    gr, hr = r_g * scale, r_h * scale
                    gain = (_score(gl, hl, reg_lambda, reg_alpha) + _score(gr, hr, reg_lambda, reg_alpha)
                            - total_score)
                    valid = (usable and b < last and hl >= min_child_weight and hr >= min_child_weight
                             and l_n >= min_samples_leaf and r_n >= min_samples_leaf and gain > threshold)
                    if valid and gain > best:
                        best = gain
                        where = (f * value_bins + b) * 2 + side
        gains[node] = best
        indices[node] = where


def best_candidates(hist: np.ndarray, n_value_bins: np.ndarray, frac_bits: int, criteria, sampled: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(best gain per node, -inf if none; its index in (feature, bin, side) order) for int64
    histograms (nodes, features, width, 3) whose last bin holds missing values."""
    n_nodes = hist.shape[0]
    gains = np.empty(n_nodes, dtype=np.float64)
    indices = np.empty(n_nodes, dtype=np.int64)
    threshold = max(criteria.min_split_gain, 1e-6)  # split.GAIN_EPSILON
    _best(np.ascontiguousarray(hist, dtype=np.int64), np.asarray(n_value_bins, dtype=np.int64),
          np.asarray(sampled, dtype=np.bool_), math.ldexp(1.0, -int(frac_bits)), float(criteria.reg_lambda),
          float(criteria.reg_alpha), float(criteria.min_child_weight), int(criteria.min_samples_leaf), threshold,
          gains, indices)
    return gains, indices
