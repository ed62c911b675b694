"""Per-party quantile binning: each party turns its own raw columns into small bin indices.

Bins are what every protocol sums gradients over, so they are computed once per party, on
its own columns, before training. Value ``x`` falls in bin ``b`` when
``cuts[b-1] < x <= cuts[b]``; a split "at bin b" therefore sends ``x <= cuts[b]`` left, which
is exactly the comparison the owner makes on raw values at prediction time. Missing values
(NaN) get a dedicated bin at index ``max_bin`` and a learned default direction.

A categorical column arrives as category codes 0, 1, ... (most frequent first, see
``teeboost.categories``); code ``c`` falls in bin ``min(c, last)``, so when a party has more
categories than bins the rarest share the last one. Its splits are category subsets (bit
masks of bins, see ``core.split``) and are recorded as masks of codes.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..compute import ComputeBackend, RowShards
from ..config import MAX_BIN_LIMIT
from ..errors import ConfigError
from .offload import job_rows, offloads
from .split import MAX_CATEGORY_BINS, category_codes
from .tree import SplitRecord

__all__ = ["FeatureBins", "fit_bins", "bin_dtype"]


def bin_dtype(max_bin: int) -> np.dtype:
    """Smallest unsigned type that holds ``max_bin`` value bins plus the missing bin."""
    if max_bin < 2 or max_bin > MAX_BIN_LIMIT:
        raise ConfigError(f"max_bin={max_bin} must be between 2 and {MAX_BIN_LIMIT}")
    return np.dtype(np.uint8) if max_bin <= 255 else np.dtype(np.uint16)


def _column_cuts(column: np.ndarray, max_bin: int) -> np.ndarray:
    """Cut points of one column: every distinct value if few, else equal-count quantiles."""
    values = np.sort(column[~np.isnan(column)])
    if values.size == 0:
        return np.empty(0, dtype=np.float64)
    is_new = np.empty(values.size, dtype=bool)
    is_new[0] = True
    np.not_equal(values[1:], values[:-1], out=is_new[1:])
    distinct = values[is_new]
    if distinct.size == 1:  # one value (and missing cells): "present or missing" is the split
        return distinct.copy()
    if distinct.size <= max_bin:
        return distinct[:-1].copy()
    positions = (np.arange(1, max_bin, dtype=np.int64) * values.size) // max_bin
    cuts = np.unique(values[positions])
    return cuts[cuts < distinct[-1]]


def _category_cuts(column: np.ndarray, max_bin: int) -> np.ndarray:
    """Cuts between category codes: one bin per code, the last bin shared by the rest."""
    present = column[~np.isnan(column)]
    n_codes = int(present.max()) + 1 if present.size else 0
    n_bins = max(min(n_codes, max_bin, MAX_CATEGORY_BINS), 2 if n_codes else 0)
    return np.arange(max(n_bins - 1, 0), dtype=np.float64)


@dataclass(frozen=True)
class FeatureBins:
    """Cut points of one party's features; only that party ever holds them."""

    cuts: tuple[np.ndarray, ...]
    max_bin: int
    categorical: tuple[bool, ...] = ()  # empty: every feature numeric

    @property
    def categorical_mask(self) -> np.ndarray:
        """Per feature: split into category subsets (True) or at thresholds."""
        if not self.categorical:
            return np.zeros(self.n_features, dtype=bool)
        return np.array(self.categorical, dtype=bool)

    def is_categorical(self, feature: int) -> bool:
        return bool(self.categorical) and self.categorical[feature]

    def record(self, feature: int, bin_index: int, default_left: bool, tree: int) -> SplitRecord:
        """What the owner keeps of a split it won: a raw threshold, or the category codes
        sent left (a code beyond the last bin shares that bin's side)."""
        if not self.is_categorical(feature):
            return SplitRecord(feature, self.threshold(feature, bin_index), default_left, tree)
        last = self.cuts[feature].size
        if not 0 < bin_index < (1 << (last + 1)):
            raise ConfigError(f"category mask {bin_index} does not fit feature {feature}'s {last + 1} bins")
        return SplitRecord(feature, 0.0, default_left, tree, categories=category_codes(bin_index, last))

    @property
    def n_features(self) -> int:
        return len(self.cuts)

    @property
    def missing_bin(self) -> int:
        """Index of the bin that holds missing values (same for every feature)."""
        return self.max_bin

    @property
    def n_value_bins(self) -> np.ndarray:
        """Number of value bins per feature (the missing bin not included)."""
        return np.array([c.size + 1 for c in self.cuts], dtype=np.int64)

    @property
    def dtype(self) -> np.dtype:
        return bin_dtype(self.max_bin)

    def transform(self, raw: np.ndarray, backend: ComputeBackend | None = None) -> np.ndarray:
        """Raw float matrix (n_rows, n_features) -> bin matrix of the same shape; with a
        ``backend`` that takes numpy loops, one job per row shard (same bins)."""
        raw = np.asarray(raw, dtype=np.float64)
        if raw.ndim != 2 or raw.shape[1] != self.n_features:
            raise ConfigError(
                f"expected a matrix with {self.n_features} feature columns, got shape {raw.shape}"
            )
        if offloads(backend) and raw.shape[0] >= job_rows(backend):
            shards = RowShards.split(backend, raw, backend.shard_rows)
            with backend.pool() as pool:
                parts = pool.map(_transform_job, [self] * len(shards.stored), shards.stored)
            for stored in shards.stored:
                backend.free(stored)
            return np.concatenate(parts)
        out = np.empty(raw.shape, dtype=self.dtype)

        def one(j: int) -> None:
            column = np.ascontiguousarray(raw[:, j])  # one strided read, then passes over 8 bytes a value
            binned = _count_cuts_below(self.cuts[j], column, self.dtype)
            binned[np.isnan(column)] = self.missing_bin
            out[:, j] = binned

        _map_columns(one, self.n_features, raw.shape[0])
        return out

    def threshold(self, feature: int, bin_index: int) -> float:
        """Raw threshold of a split at ``bin_index``: values <= it go left."""
        cuts = self.cuts[feature]
        if not 0 <= bin_index < cuts.size:
            raise ConfigError(
                f"bin {bin_index} is not a split point of feature {feature} "
                f"(it has {cuts.size} split points)"
            )
        return float(cuts[bin_index])


#: Up to this many cuts, a compare-and-add pass per cut beats a binary search per value.
_COMPARE_CUTS = 128


def _count_cuts_below(cuts: np.ndarray, column: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """How many cuts lie strictly below each value: ``searchsorted(cuts, column, "left")``
    (NaN counts none). For the few cuts of a feature, one branch-free vector comparison per
    cut is several times faster than a branchy binary search per value."""
    if cuts.size > _COMPARE_CUTS:
        return np.searchsorted(cuts, column, side="left").astype(dtype)
    out = np.zeros(column.shape, dtype=dtype)
    for cut in cuts:
        out += column > cut
    return out


def _transform_job(bins: FeatureBins, raw: np.ndarray) -> np.ndarray:
    """Bins of one row shard (runs on the compute backend)."""
    return bins.transform(raw)


def _cuts_job(column: np.ndarray, max_bin: int, categorical: bool) -> np.ndarray:
    """Cut points of one column (runs on the compute backend)."""
    return _category_cuts(column, max_bin) if categorical else _column_cuts(column, max_bin)


def fit_bins(raw: np.ndarray, max_bin: int, *, categorical: np.ndarray | None = None,
             workers: int = 2, backend: ComputeBackend | None = None) -> FeatureBins:
    """Cut points per column, computed in parallel threads (numpy's sort releases the GIL),
    or one column per job on ``backend`` if it takes numpy loops (same cuts).
    ``categorical`` marks the columns that hold category codes."""
    bin_dtype(max_bin)  # validates the range
    raw = np.asarray(raw, dtype=np.float64)
    if raw.ndim != 2:
        raise ConfigError(f"expected a 2-D feature matrix, got {raw.ndim} dimensions")
    flags = np.zeros(raw.shape[1], dtype=bool) if categorical is None else np.asarray(categorical, dtype=bool)
    if flags.shape != (raw.shape[1],):
        raise ConfigError(f"categorical flags for {flags.size} columns, but the matrix has {raw.shape[1]}")
    cuts: list[np.ndarray] = [np.empty(0)] * raw.shape[1]
    if offloads(backend) and raw.shape[1] and raw.shape[0] >= job_rows(backend):
        stored = [backend.put(np.ascontiguousarray(raw[:, j])) for j in range(raw.shape[1])]
        with backend.pool() as pool:
            # copies: results read from an object store stay pinned there while referenced
            cuts = [np.array(c) for c in pool.map(_cuts_job, stored, [max_bin] * len(stored), flags.tolist())]
        for column in stored:
            backend.free(column)
    else:
        def one(j: int) -> None:
            cuts[j] = _cuts_job(np.ascontiguousarray(raw[:, j]), max_bin, bool(flags[j]))

        _map_columns(one, raw.shape[1], raw.shape[0], workers)
    return FeatureBins(cuts=tuple(cuts), max_bin=max_bin,
                       categorical=tuple(bool(f) for f in flags) if flags.any() else ())


def _map_columns(work, n_columns: int, n_rows: int, workers: int = 2) -> None:
    """Run ``work(j)`` for every column, in threads when the data is large enough to pay
    (numpy's sort and searchsorted release the GIL)."""
    if workers > 1 and n_rows >= 50_000 and n_columns > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(work, range(n_columns)))
    else:
        for j in range(n_columns):
            work(j)
