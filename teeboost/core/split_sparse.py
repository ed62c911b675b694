"""The best split of each node in numpy, scoring only the bins a node's rows fall in.

Enclaves run measured source and keep numpy (``core/compiled.py``), where ``split.best_splits``
scores every (node, feature, bin, missing side): 2 x 255 candidates per feature at 256 bins,
although a deep node's few rows fill few bins. An empty bin's cut has the sums of the bin
before it, so the same gain, never strictly better; the compiled kernel
(``core/split_kernel``) skips it, and so does this: candidates are the non-empty bins (and bin
0) inside the feature's range, of the sampled features, scored by the one gain formula
(``split.split_gains``) on the same int64 sums, so every gain is the dense search's to the last
bit and ties go to the first candidate in (feature, bin, side) order, as ``np.argmax`` breaks
them. Only the runs the kernel takes come here: no categorical features, monotone or
interaction constraints, or capped leaf weight.
"""

from __future__ import annotations

import numpy as np

__all__ = ["best_candidates_numpy"]


def best_candidates_numpy(hist: np.ndarray, n_value_bins: np.ndarray, frac_bits: int, criteria, sampled: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray]:
    """(best gain per node, -inf if none; its index in (feature, bin, side) order) for int64
    histograms (nodes, features, width, 3) whose last bin holds missing values: what
    ``split_kernel.best_candidates`` returns."""
    from .gradients import GradientCodec
    from .split import split_gains  # split imports this module

    codec = GradientCodec(int(frac_bits))
    n_nodes, n_features, width, _ = hist.shape
    value_bins = width - 1
    values = hist[:, :, :value_bins, :]
    missing = hist[:, :, value_bins, :]  # (nodes, features, 3)
    left_cum = np.cumsum(values, axis=2)  # exact int64
    total = left_cum[:, :, -1, :] + missing
    keep = values.any(axis=3)
    keep[:, :, 0] = True  # bin 0 is always a candidate (with missing left, it may be the best one)
    keep &= np.arange(value_bins)[None, None, :] < (np.asarray(n_value_bins)[None, :, None] - 1)
    keep &= np.asarray(sampled, dtype=bool)[None, :, None]
    node, feature, bin_ = np.nonzero(keep)  # in (node, feature, bin) order
    gains = np.full(n_nodes, -np.inf)
    indices = np.zeros(n_nodes, dtype=np.int64)
    if node.size == 0:
        return gains, indices
    cut = left_cum[node, feature, bin_]  # (k, 3)
    gone = missing[node, feature]
    left = np.stack([cut, cut + gone], axis=1)  # (k, side, 3): missing right, then left
    gain = split_gains(left, total[node, feature][:, None, :], codec, criteria).reshape(-1)  # (k * 2,)
    owner = np.repeat(node, 2)
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])  # owner is sorted: one run per node
    best = np.maximum.reduceat(gain, starts)
    gains[owner[starts]] = best
    first = np.flatnonzero((gain == np.repeat(best, np.diff(np.r_[starts, gain.size]))) & np.isfinite(gain))
    first = first[np.r_[True, owner[first[1:]] != owner[first[:-1]]]] if first.size else first  # each node's first
    indices[owner[first]] = (np.repeat(feature * value_bins + bin_, 2) * 2 + np.tile([0, 1], node.size))[first]
    return gains, indices
