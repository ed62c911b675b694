"""Gain of every candidate split, and the best split of each node, from aggregate sums.

This is the one place gains are computed. Every protocol (and every enclave) calls it on
exact integer sums, so they all agree to the last bit on which split wins. Gain follows
XGBoost's ``loss_chg``: GL^2/(HL+lambda) + GR^2/(HR+lambda) - G^2/(H+lambda).
Candidates are ordered (feature, bin, missing direction); ties go to the first, and across
parties to the lower party index, so a vertical run and a central run on the same columns
(active party's first) pick the same split.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .gradients import GradientCodec

if TYPE_CHECKING:  # enclaves measure this module; they must not load the configuration code
    from ..config import BoostParams

__all__ = ["SplitCriteria", "SplitInfo", "NodeBest", "best_splits", "pick_global_best", "split_gains", "left_sums",
           "GAIN_EPSILON"]

#: Splits must improve the objective by more than this (XGBoost's kRtEps).
GAIN_EPSILON = 1e-6


@dataclass(frozen=True)
class SplitCriteria:
    reg_lambda: float = 1.0
    min_child_weight: float = 1.0
    min_samples_leaf: int = 1
    min_split_gain: float = 0.0

    @classmethod
    def from_params(cls, params: BoostParams) -> "SplitCriteria":
        return cls(
            reg_lambda=params.reg_lambda,
            min_child_weight=params.min_child_weight,
            min_samples_leaf=params.min_samples_leaf,
            min_split_gain=params.min_split_gain,
        )

    def score(self, g: np.ndarray, h: np.ndarray) -> np.ndarray:
        return g * g / (h + self.reg_lambda)


@dataclass(frozen=True)
class NodeBest:
    """Best candidate of one node within one party's features (gain -inf: none valid)."""

    gain: float
    feature: int
    bin: int
    default_left: bool

    @property
    def valid(self) -> bool:
        return bool(np.isfinite(self.gain))


@dataclass(frozen=True)
class SplitInfo:
    """The split the grower is told about. ``feature``/``bin`` may be -1 when the protocol
    keeps them opaque to the active party (N-TEE); the grower never looks at them."""

    node_id: int
    party: int
    gain: float
    feature: int
    bin: int
    default_left: bool
    handle: int = -1  # protocol-specific reference (e.g. an enclave's opaque handle)


def best_splits(
    hist: np.ndarray,
    n_value_bins: np.ndarray,
    codec: GradientCodec,
    criteria: SplitCriteria,
) -> list[NodeBest]:
    """Best split per node from int64 histograms of shape (nodes, features, width, 3).

    The last bin of ``width`` holds missing values; feature ``f`` has ``n_value_bins[f]``
    value bins, so thresholds 0 .. n_value_bins[f] - 2 are candidates.
    """
    n_nodes, n_features, width, _ = hist.shape
    values = hist[:, :, : width - 1, :]
    missing = hist[:, :, width - 1, :]  # (nodes, features, 3)
    left_cum = np.cumsum(values, axis=2)  # exact int64
    total = left_cum[:, :, -1, :] + missing  # (nodes, features, 3)
    # direction 0: missing goes right; direction 1: missing goes left
    left = np.stack([left_cum, left_cum + missing[:, :, None, :]], axis=3)  # (n, f, b, 2, 3)

    bin_index = np.arange(width - 1)[None, None, :, None]
    in_range = bin_index < (np.asarray(n_value_bins)[None, :, None, None] - 1)
    gain = split_gains(left, total[:, :, None, None, :], codec, criteria, in_range)

    flat = gain.reshape(n_nodes, -1)
    winners = np.argmax(flat, axis=1)
    result = []
    for node, index in enumerate(winners):
        best = float(flat[node, index])
        feature, rest = divmod(int(index), (width - 1) * 2)
        bin_, direction = divmod(rest, 2)
        if not np.isfinite(best):
            result.append(NodeBest(-np.inf, -1, -1, False))
        else:
            result.append(NodeBest(best, feature, bin_, bool(direction)))
    return result


def split_gains(left: np.ndarray, total: np.ndarray, codec: GradientCodec, criteria: SplitCriteria,
                valid: np.ndarray | bool = True) -> np.ndarray:
    """Gain of splits given exact int64 left sums (..., 3) and node totals (..., 3) of
    (g, h, count); -inf where a split breaks a criterion. The one gain formula: enclaves
    re-deriving a host's claimed gain call it too, so they agree to the last bit."""
    right = total - left
    gl, hl, nl = codec.decode(left[..., 0]), codec.decode(left[..., 1]), left[..., 2]
    gr, hr, nr = codec.decode(right[..., 0]), codec.decode(right[..., 1]), right[..., 2]
    gt, ht = codec.decode(total[..., 0]), codec.decode(total[..., 1])
    gain = criteria.score(gl, hl) + criteria.score(gr, hr) - criteria.score(gt, ht)
    valid = valid & (hl >= criteria.min_child_weight) & (hr >= criteria.min_child_weight)
    valid &= (nl >= criteria.min_samples_leaf) & (nr >= criteria.min_samples_leaf)
    valid &= gain > max(criteria.min_split_gain, GAIN_EPSILON)
    return np.where(valid, gain, -np.inf)


def left_sums(column: np.ndarray, bin_: int, default_left: bool) -> np.ndarray:
    """(g, h, count) int64 sums of the rows a split sends left, from one feature's
    (width, 3) histogram whose last bin holds missing values."""
    left = column[:bin_ + 1].sum(axis=0)
    return left + column[-1] if default_left else left


def pick_global_best(candidates: list[tuple[int, NodeBest]]) -> tuple[int, NodeBest] | None:
    """Best over parties: highest gain, ties to the earliest (lowest party index) entry."""
    winner: tuple[int, NodeBest] | None = None
    for party, best in sorted(candidates, key=lambda item: item[0]):
        if best.valid and (winner is None or best.gain > winner[1].gain):
            winner = (party, best)
    return winner
