"""Histograms and partitions whose memory accesses do not depend on secrets (strict mode).

Inside a strict enclave the secrets are which node each row is in (it follows every party's
splits) and the gradients (they follow the labels). A party's own bins are not secret from its
own host, so code may index by them. Every function here therefore visits every row, in row
order, whatever node it is in: node membership enters only as 0/1 factors multiplied into the
weights (``position == k``), never as an index, a branch or a row list. Each position of a
level is processed, split or not, so the work and the access pattern depend only on the
number of rows, features and bins and on the depth.

Sums stay exact: weighted ``bincount`` adds float64 values that are integers with total
magnitude below 2**52 (the gradient codec's guarantee), and such sums are exact in any order.
"""

from __future__ import annotations

import numpy as np

from teeboost.core.histogram import CHANNELS

__all__ = ["position_histograms", "children_histograms", "go_left_all", "update_positions", "CODE_STOP",
           "CODE_LEFT", "CODE_RIGHT", "pack_codes", "unpack_codes"]

#: Per-row level update: the row's node became a leaf (or it never was in the tree), it went
#: left, or it went right.
CODE_STOP, CODE_LEFT, CODE_RIGHT = 0, 1, 2


def position_histograms(bins: np.ndarray, width: int, positions: np.ndarray, wanted: np.ndarray,
                        g: np.ndarray, h: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """(len(wanted), features, width, 3) int64 sums of (g, h, weight) over the rows at each
    wanted position; ``bins`` is (features, rows) and indexes the bincount (own, not secret)."""
    n_features = bins.shape[0]
    out = np.zeros((len(wanted), n_features, width, CHANNELS), dtype=np.int64)
    g = g.astype(np.float64)
    h = h.astype(np.float64)
    w = weight.astype(np.float64)
    for i, k in enumerate(wanted):
        at = (positions == k).astype(np.float64)  # a factor, not a selection
        channels = (g * at, h * at, w * at)
        for f in range(n_features):
            column = bins[f]
            for c, values in enumerate(channels):
                out[i, f, :, c] = np.bincount(column, weights=values, minlength=width)
    return out


def children_histograms(bins: np.ndarray, width: int, positions: np.ndarray, parents: np.ndarray,
                        split: np.ndarray, g: np.ndarray, h: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Histograms of all 2*len(parents) positions of a level from the parents' histograms: the
    left child (even position) is summed, the right is parent - left, times 0 where the parent
    did not split. Always the left one, so the choice never depends on node sizes."""
    n_parents = parents.shape[0]
    left = position_histograms(bins, width, positions, np.arange(0, 2 * n_parents, 2), g, h, weight)
    right = (parents - left) * split.astype(np.int64)[:, None, None, None]
    out = np.empty((2 * n_parents,) + parents.shape[1:], dtype=np.int64)
    out[0::2], out[1::2] = left, right
    return out


def go_left_all(bins: np.ndarray, positions: np.ndarray, missing_bin: int, features: np.ndarray,
                split_bins: np.ndarray, default_left: np.ndarray, mine: np.ndarray,
                categorical: np.ndarray | None = None) -> np.ndarray:
    """bool (rows,): does each row go left at the split of its position? Only positions where
    ``mine`` is set contribute. Every position reads every feature column and evaluates both
    the threshold and the category-mask rule, so neither which positions split, nor on which
    feature, nor of which kind shows in the accesses: the split's column is picked by adding
    every column times 0 or 1, then both rules are evaluated on it once (each rule on every
    column was 2.5x the passes over the rows)."""
    n_features = bins.shape[0]
    out = np.zeros(positions.size, dtype=bool)
    categorical = np.zeros(n_features, dtype=bool) if categorical is None else np.asarray(categorical, dtype=bool)
    column = np.empty(positions.size, dtype=np.int64)
    for k in range(mine.size):
        pick = np.arange(n_features) == features[k]  # a factor per column, not an index
        column[:] = 0
        for f in range(n_features):
            column += bins[f] * np.int64(pick[f])
        kind = bool(np.any(pick & categorical))
        missing = column == missing_bin
        threshold = column <= split_bins[k]
        mask = np.uint64(max(int(split_bins[k]), 0))
        subset = ((mask >> np.minimum(column, 63).astype(np.uint64)) & np.uint64(1)).astype(bool) & ~missing
        # both rules read in full, whichever kind the split is (np.where on a scalar reads one)
        rule = (subset & kind) | (threshold & (not kind)) | (missing & bool(default_left[k]))
        out |= (positions == k) & rule & bool(mine[k]) & bool(pick.any())
    return out


def update_positions(positions: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Positions at the next level: 2k (left), 2k+1 (right), or -1 (stopped)."""
    moved = 2 * positions + (codes == CODE_RIGHT)
    return np.where(codes == CODE_STOP, -1, moved).astype(np.int64)


def pack_codes(codes: np.ndarray) -> np.ndarray:
    """Two bits per row, four rows per byte: the size depends only on the row count."""
    padded = np.zeros(-(-codes.size // 4) * 4, dtype=np.uint8)
    padded[:codes.size] = codes
    quads = padded.reshape(-1, 4)
    return (quads[:, 0] | quads[:, 1] << 2 | quads[:, 2] << 4 | quads[:, 3] << 6).astype(np.uint8)


def unpack_codes(packed: np.ndarray, count: int) -> np.ndarray:
    packed = np.asarray(packed, dtype=np.uint8)
    codes = np.stack([packed & 3, packed >> 2 & 3, packed >> 4 & 3, packed >> 6 & 3], axis=1).reshape(-1)
    return codes[:count].astype(np.uint8)
