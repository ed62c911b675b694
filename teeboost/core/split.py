"""Gain of every candidate split, and the best split of each node, from aggregate sums.

This is the one place gains and leaf weights are computed. Every protocol (and every enclave)
calls it on exact integer sums, so they all agree to the last bit on which split wins. Gain
follows XGBoost's ``loss_chg`` (left + right - parent) with its ``CalcGain``/``CalcWeight``
(src/tree/param.h, as its hist updater evaluates them): with T(G) = sign(G) max(|G| - alpha, 0),
a node's weight is w = -T(G)/(H + lambda), clipped to +-max_delta_step when that is > 0; its
score is T(G)^2/(H + lambda) without a cap, else -(2 G w + (H + lambda) w^2) at the clipped w.
That last form takes the raw G, not T(G), as XGBoost's ``CalcGainGivenWeight`` does: so the
L1 term is not in the gain of a capped run, and a test holds us to XGBoost's trees there.

Each tree may split only on a sample of each party's columns (``colsample_bytree``), drawn
per party from the run's seed, the party's index and the tree's index
(``sampled_features``): in vertical FL no one holds every party's columns, so no one could
draw XGBoost's joint sample, and every party's enclave can draw its own from the attested
criteria.

Candidates are ordered (feature, bin, missing direction); ties go to the first, and across
parties to the lower party index, so a vertical run and a central run on the same columns
(active party's first) pick the same split.

Categorical features split into category subsets, found as XGBoost and LightGBM do: the
node's categories are sorted by gradient ratio G/(H + lambda) (empty ones last) and every
prefix of that order is a candidate. Such a split's ``bin`` is the bit mask of the category
bins sent left, so it travels through every protocol where a threshold bin would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .compiled import ON_HOST
from .gradients import GradientCodec
from .split_sparse import best_candidates_numpy

if TYPE_CHECKING:  # enclaves measure this module; they must not load the configuration code
    from ..config import BoostParams

if ON_HOST:  # compiled kernels (``compiled``); an enclave keeps numpy
    from .split_kernel import best_candidates
else:
    best_candidates = None

__all__ = ["SplitCriteria", "SplitInfo", "NodeBest", "best_splits", "pick_global_best", "split_gains", "left_sums",
           "goes_left", "valid_split_bin", "sampled_features", "category_codes", "GAIN_EPSILON", "MAX_CATEGORY_BINS",
           "N_CRITERIA"]

#: Splits must improve the objective by more than this (XGBoost's kRtEps).
GAIN_EPSILON = 1e-6

#: Category bins per categorical feature: a subset is a bit mask in a non-negative int64.
MAX_CATEGORY_BINS = 62

#: A category is split off only with at least this many of the node's rows (or
#: ``min_samples_leaf``, if larger); smaller ones always go right. A subset's mask shows its
#: owner the node's categories in gradient order: without a floor, categories of one row each
#: would show that row's gradient sign, i.e. its label (LightGBM's min_data_per_group).
MIN_CATEGORY_ROWS = 10

#: Values in ``SplitCriteria.as_tuple`` (what run contexts bind and hellos carry); new ones
#: are appended, so the index of each older one stays.
N_CRITERIA = 12


def category_codes(bin_mask: int, last: int) -> int:
    """A split's mask of category bins -> the mask of category codes that go left: a code
    beyond the last bin (``last``: the feature's cut count) shares that bin's side."""
    codes = int(bin_mask)
    if (codes >> last) & 1:
        codes |= ((1 << MAX_CATEGORY_BINS) - 1) & ~((1 << last) - 1)
    return codes


@dataclass(frozen=True)
class SplitCriteria:
    reg_lambda: float = 1.0
    min_child_weight: float = 1.0
    min_samples_leaf: int = 1
    min_split_gain: float = 0.0
    category_subsets: bool = True  # False: a categorical feature is cut only in its owner's code order
    reg_alpha: float = 0.0  # L1 regularisation of leaf weights
    max_delta_step: float = 0.0  # cap on a leaf weight's magnitude (0: none)
    colsample_bytree: float = 1.0  # fraction of each party's columns a tree may split on
    column_seed: int = 0  # seed of the column samples (the run's random_state)
    # rows weigh other than 1 (sample weights or scale_pos_weight): not a scoring rule, but bound
    # so a passive party's policy can refuse such runs and the strict enclave can hold its host to it
    weighted: bool = False
    # some column is under a monotone constraint: every gain is computed from clipped weights
    monotone: bool = False
    # digest of the run's constraints (``RunConstraints.digest``; 0: none), bound like the rest
    constraints: int = 0
    # the constraints themselves (``RunConstraints.encode``): what enclaves are given, checked
    # against the digest; not a scoring rule, so not in ``as_tuple``
    rules: bytes = field(default=b"", compare=False)

    @classmethod
    def from_params(cls, params: BoostParams, weighted: bool = False) -> "SplitCriteria":
        """``weighted``: whether the run weighs rows (``rows_weighted``); not a BoostParams field."""
        constraints = params.constraints
        return cls(
            reg_lambda=params.reg_lambda,
            min_child_weight=params.min_child_weight,
            min_samples_leaf=params.min_samples_leaf,
            min_split_gain=params.min_split_gain,
            category_subsets=params.category_subsets,
            reg_alpha=params.reg_alpha,
            max_delta_step=params.delta_step,
            colsample_bytree=params.colsample_bytree,
            column_seed=params.random_state,
            weighted=bool(weighted),
            monotone=constraints.has_monotone,
            constraints=constraints.digest(),
            rules=constraints.encode() if constraints.any else b"",
        )

    @staticmethod
    def rows_weighted(scale_pos_weight: float, *weights) -> bool:
        """Whether a run weighs rows unequally: ``scale_pos_weight`` != 1 or any of the given
        weight arrays (None: unweighted) has a weight other than 1."""
        return bool(scale_pos_weight != 1 or any(w is not None and np.any(np.asarray(w) != 1) for w in weights))

    def as_tuple(self) -> tuple:
        """The criteria as the run context binds them (enclaves score by exactly these)."""
        return (float(self.reg_lambda), float(self.min_child_weight), int(self.min_samples_leaf),
                float(self.min_split_gain), int(bool(self.category_subsets)), float(self.reg_alpha),
                float(self.max_delta_step), float(self.colsample_bytree), int(self.column_seed),
                int(bool(self.weighted)), int(bool(self.monotone)), int(self.constraints))

    @classmethod
    def from_tuple(cls, values) -> "SplitCriteria":
        """Inverse of ``as_tuple``; ``ValueError`` unless every value is one a run may bind."""
        values = list(values)
        if len(values) != N_CRITERIA:
            raise ValueError(f"split criteria are {N_CRITERIA} values, not {len(values)}")
        try:
            exact = all(int(values[i]) == values[i] for i in (2, 4, 8, 9, 10, 11))
            criteria = cls(float(values[0]), float(values[1]), int(values[2]), float(values[3]), bool(int(values[4])),
                           float(values[5]), float(values[6]), float(values[7]), int(values[8]), bool(int(values[9])),
                           bool(int(values[10])), int(values[11]))
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"split criteria {tuple(values)} are not numbers") from None
        if not exact or any(int(values[i]) not in (0, 1) for i in (4, 9, 10)) or not criteria.in_range():
            raise ValueError(f"split criteria {tuple(values)} are out of range")
        return criteria

    def in_range(self) -> bool:
        """Whether every value is one a run may bind (what an enclave checks of its init)."""
        values = (self.reg_lambda, self.min_child_weight, self.min_split_gain, self.reg_alpha, self.max_delta_step,
                  self.colsample_bytree)
        return bool(all(np.isfinite(v) for v in values) and self.reg_lambda >= 0 and self.min_child_weight >= 0
                    and self.min_samples_leaf >= 1 and self.min_split_gain >= 0 and self.reg_alpha >= 0
                    and self.max_delta_step >= 0 and 0 < self.colsample_bytree <= 1
                    and 0 <= self.column_seed < 2**63 and 0 <= self.constraints < 2**63)

    def _l1(self, g):
        """XGBoost's ThresholdL1: G moved towards 0 by alpha (0 within alpha)."""
        if self.reg_alpha == 0:
            return g
        return np.sign(g) * np.maximum(np.abs(g) - self.reg_alpha, 0.0)

    def weight(self, g, h, lower=None, upper=None):
        """A node's weight (before the learning rate): XGBoost's CalcWeight, clipped to the
        node's monotone bounds when given."""
        w = -self._l1(g) / (h + self.reg_lambda)
        if self.max_delta_step > 0:
            w = np.clip(w, -self.max_delta_step, self.max_delta_step)
        if lower is not None:
            w = np.minimum(np.maximum(w, lower), upper)
        return w

    def score(self, g: np.ndarray, h: np.ndarray, lower=None, upper=None) -> np.ndarray:
        """A node's score: XGBoost's gain of a node (raw G with a capped or bounded weight, see
        above; 0 without curvature)."""
        if self.max_delta_step == 0 and not self.monotone:
            t = self._l1(g)
            return t * t / (h + self.reg_lambda)
        w = self.weight(g, h, lower, upper)
        return np.where(h > 0, -(2.0 * g * w + (h + self.reg_lambda) * w * w), 0.0)


def sampled_features(criteria: SplitCriteria, party: int, tree: int, n_features: int) -> np.ndarray:
    """bool (n_features,): the columns of ``party`` (0: active, passives 1..) that tree
    ``tree`` (the booster's global tree index) may split on. Every site scoring that party's
    candidates calls this, so plain, central and every enclave agree on the sample."""
    mask = np.ones(n_features, dtype=bool)
    if criteria.colsample_bytree < 1 and n_features > 0:
        k = max(1, int(criteria.colsample_bytree * n_features))
        chosen = np.random.default_rng([criteria.column_seed, party, tree]).choice(n_features, k, replace=False)
        mask[:] = False
        mask[chosen] = True
    return mask


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
    categorical: np.ndarray | None = None,
    sampled: np.ndarray | None = None,
    *,
    directions: np.ndarray | None = None,
    bounds: np.ndarray | None = None,
    allowed: np.ndarray | None = None,
    every_candidate: bool = False,
) -> list[NodeBest]:
    """Best split per node from int64 histograms of shape (nodes, features, width, 3).

    The last bin of ``width`` holds missing values; feature ``f`` has ``n_value_bins[f]``
    value bins, so thresholds 0 .. n_value_bins[f] - 2 are candidates. For a feature marked
    in ``categorical`` the value bins are first put in the node's gradient-ratio order, and
    the winner's ``bin`` is the mask of the categories left of the chosen cut. Only features
    marked in ``sampled`` (``sampled_features``; None: all) are candidates, and of those, per
    node, the ones ``allowed`` (bool (nodes, features): interaction constraints; None: all).
    ``directions`` (int8 per feature) and ``bounds`` ((nodes, 2) lower and upper weight of
    each node) apply monotone constraints (``teeboost.core.constraints``). ``every_candidate``:
    score every candidate, in arrays of the histogram's shape (strict enclaves: the sparse
    search's work follows which bins each node's rows fill). Reading off each winner is not
    data-independent (a categorical winner's mask takes as many steps as its cut is long).
    """
    n_nodes, n_features, width, _ = hist.shape
    # the common case: compiled on hosts, sparse numpy in other enclaves
    search = None if every_candidate else best_candidates or best_candidates_numpy
    if (search is not None and (categorical is None or not np.any(categorical)) and allowed is None
            and (directions is None or not np.any(directions)) and criteria.max_delta_step == 0
            and not criteria.monotone):
        usable = np.ones(n_features, dtype=bool) if sampled is None else sampled
        gains, indices = search(hist, n_value_bins, codec.frac_bits, criteria, usable)
        return [_node_best(float(gain), int(index), width) for gain, index in zip(gains, indices)]
    values = hist[:, :, : width - 1, :]
    missing = hist[:, :, width - 1, :]  # (nodes, features, 3)
    cat = np.zeros(n_features, dtype=bool) if categorical is None else np.asarray(categorical, dtype=bool)
    order = None
    if cat.any() and criteria.category_subsets:
        order = _category_order(values, cat, n_value_bins, codec, criteria)
        values = np.take_along_axis(values, order[..., None], axis=2)
    left_cum = np.cumsum(values, axis=2)  # exact int64
    total = left_cum[:, :, -1, :] + missing  # (nodes, features, 3)
    # direction 0: missing goes right; direction 1: missing goes left
    left = np.stack([left_cum, left_cum + missing[:, :, None, :]], axis=3)  # (n, f, b, 2, 3)

    bin_index = np.arange(width - 1)[None, None, :, None]
    in_range = bin_index < (np.asarray(n_value_bins)[None, :, None, None] - 1)
    if order is not None:  # cut only between categories that may be split off
        splittable = _splittable(hist[:, :, : width - 1, :], n_value_bins, criteria).sum(axis=2)  # (nodes, features)
        in_range = np.where(cat[None, :, None, None], in_range & (bin_index < splittable[:, :, None, None]), in_range)
    if cat.any():  # a few missing rows of a categorical feature do not choose their own side
        few = (missing[..., 2] > 0) & (missing[..., 2] < max(criteria.min_samples_leaf, MIN_CATEGORY_ROWS))
        direction_ok = np.ones((n_nodes, n_features, 1, 2), dtype=bool)
        direction_ok[..., 0, 1] = ~(few & cat[None, :])
        in_range = in_range & direction_ok
    if sampled is not None:
        in_range = in_range & np.asarray(sampled, dtype=bool)[None, :, None, None]
    if allowed is not None:
        in_range = in_range & np.asarray(allowed, dtype=bool)[:, :, None, None]
    lower = upper = direction = None
    if bounds is not None:
        bounds = np.asarray(bounds, dtype=np.float64).reshape(n_nodes, 2)
        lower, upper = bounds[:, 0, None, None, None], bounds[:, 1, None, None, None]
    if directions is not None and np.any(directions):
        direction = np.asarray(directions, dtype=np.int8)[None, :, None, None]
    gain = split_gains(left, total[:, :, None, None, :], codec, criteria, in_range, lower=lower, upper=upper,
                       direction=direction)

    flat = gain.reshape(n_nodes, -1)
    winners = np.argmax(flat, axis=1)
    result = []
    for node, index in enumerate(winners):
        best = float(flat[node, index])
        feature, rest = divmod(int(index), (width - 1) * 2)
        bin_, direction = divmod(rest, 2)
        if not np.isfinite(best):
            result.append(NodeBest(-np.inf, -1, -1, False))
            continue
        if cat[feature]:  # the bins left of the cut, in the order they were tried
            tried = order[node, feature, : bin_ + 1] if order is not None else range(bin_ + 1)
            bin_ = sum(1 << int(b) for b in tried)
        result.append(NodeBest(best, feature, bin_, bool(direction)))
    return result


def _node_best(gain: float, index: int, width: int) -> NodeBest:
    """A winner of the compiled search (``split_kernel``), as ``best_splits`` reports one."""
    if not np.isfinite(gain):
        return NodeBest(-np.inf, -1, -1, False)
    feature, rest = divmod(index, (width - 1) * 2)
    bin_, direction = divmod(rest, 2)
    return NodeBest(gain, feature, bin_, bool(direction))


def _splittable(values: np.ndarray, n_value_bins: np.ndarray, criteria: SplitCriteria) -> np.ndarray:
    """bool (nodes, features, bins): value bins of the feature holding enough of the node's
    rows to be split off as a category."""
    floor = max(criteria.min_samples_leaf, MIN_CATEGORY_ROWS)
    real = np.arange(values.shape[2])[None, None, :] < np.asarray(n_value_bins)[None, :, None]
    return real & (values[..., 2] >= floor)


def _category_order(values: np.ndarray, categorical: np.ndarray, n_value_bins: np.ndarray, codec: GradientCodec,
                    criteria: SplitCriteria) -> np.ndarray:
    """Per node and feature, the value bins in the order prefixes are tried: by G/(H+lambda)
    for categorical features, with the bins too small to split off (and empty ones, and any
    beyond the feature's count) last, in bin order; the identity for the others."""
    n_nodes, n_features, n_bins, _ = values.shape
    identity = np.broadcast_to(np.arange(n_bins), (n_nodes, n_features, n_bins))
    order = identity.copy()
    cat = np.flatnonzero(categorical)
    part = values[:, cat]  # (nodes, cat features, bins, 3)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = codec.decode(part[..., 0]) / (codec.decode(part[..., 1]) + criteria.reg_lambda)
    held = _splittable(values, n_value_bins, criteria)[:, cat]
    ratio = np.where(held, ratio, 0.0)
    keys = np.lexsort((identity[:, cat], ratio, ~held), axis=-1)
    order[:, cat] = keys
    return order


def bins_fit_counts(binned: np.ndarray, n_value_bins: np.ndarray, missing_bin: int) -> bool:
    """Every row's bin of feature f is one of f's value bins or the missing bin: what an
    enclave checks of binned columns a host hands it."""
    binned = np.asarray(binned)
    limit = np.asarray(n_value_bins)[:, None]
    return bool(np.all((binned < limit) | (binned == missing_bin)))


def goes_left(binned: np.ndarray, bin_: int, default_left: bool, categorical: bool, missing_bin: int) -> np.ndarray:
    """Which of these binned values a split sends left: ``bin <= threshold``, or for a
    categorical feature membership of the bin in the mask; missing values by direction."""
    binned = np.asarray(binned)
    if categorical:
        present = binned != missing_bin
        shifts = np.minimum(np.where(present, binned, 0), 63).astype(np.uint64)
        decision = present & (((np.uint64(bin_) >> shifts) & np.uint64(1)) == 1)
    else:
        decision = binned <= bin_  # the missing bin is above every value bin
    if default_left:
        decision = decision | (binned == missing_bin)
    return decision


def valid_split_bin(bin_: int, n_value_bins: int, categorical: bool) -> bool:
    """Whether a split ``bin`` names a real candidate of a feature (a threshold below the
    last value bin, or a non-empty mask of value bins)."""
    if categorical:
        return 0 < bin_ < (1 << n_value_bins)
    return 0 <= bin_ < n_value_bins - 1


def split_gains(left: np.ndarray, total: np.ndarray, codec: GradientCodec, criteria: SplitCriteria,
                valid: np.ndarray | bool = True, *, lower=None, upper=None, direction=None) -> np.ndarray:
    """Gain of splits given exact int64 left sums (..., 3) and node totals (..., 3) of
    (g, h, count); -inf where a split breaks a criterion. The one gain formula: enclaves
    re-deriving a host's claimed gain call it too, so they agree to the last bit. ``lower``,
    ``upper``: the node's monotone bounds on weights; ``direction``: the split column's
    monotone direction (-1, 0, 1), all broadcast against the sums."""
    right = total - left
    gl, hl, nl = codec.decode(left[..., 0]), codec.decode(left[..., 1]), left[..., 2]
    gr, hr, nr = codec.decode(right[..., 0]), codec.decode(right[..., 1]), right[..., 2]
    gt, ht = codec.decode(total[..., 0]), codec.decode(total[..., 1])
    gain = (criteria.score(gl, hl, lower, upper) + criteria.score(gr, hr, lower, upper)
            - criteria.score(gt, ht, lower, upper))
    if direction is not None:  # child weights must go the declared way
        wl, wr = criteria.weight(gl, hl, lower, upper), criteria.weight(gr, hr, lower, upper)
        valid = valid & ((direction == 0) | ((direction > 0) & (wl <= wr)) | ((direction < 0) & (wl >= wr)))
    valid = valid & (hl >= criteria.min_child_weight) & (hr >= criteria.min_child_weight)
    valid &= (nl >= criteria.min_samples_leaf) & (nr >= criteria.min_samples_leaf)
    valid &= gain > max(criteria.min_split_gain, GAIN_EPSILON)
    return np.where(valid, gain, -np.inf)


def left_sums(column: np.ndarray, bin_: int, default_left: bool, categorical: bool = False) -> np.ndarray:
    """(g, h, count) int64 sums of the rows a split sends left, from one feature's
    (width, 3) histogram whose last bin holds missing values."""
    if categorical:
        chosen = [b for b in range(column.shape[0] - 1) if (bin_ >> b) & 1]
        left = column[chosen].sum(axis=0)
    else:
        left = column[:bin_ + 1].sum(axis=0)
    return left + column[-1] if default_left else left


def pick_global_best(candidates: list[tuple[int, NodeBest]]) -> tuple[int, NodeBest] | None:
    """Best over parties: highest gain, ties to the earliest (lowest party index) entry."""
    winner: tuple[int, NodeBest] | None = None
    for party, best in sorted(candidates, key=lambda item: item[0]):
        if best.valid and (winner is None or best.gain > winner[1].gain):
            winner = (party, best)
    return winner
