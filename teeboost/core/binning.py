"""Per-party quantile binning: each party turns its own raw columns into small bin indices.

Bins are what every protocol sums gradients over, so they are computed once per party, on
its own columns, before training. Value ``x`` falls in bin ``b`` when
``cuts[b-1] < x <= cuts[b]``; a split "at bin b" therefore sends ``x <= cuts[b]`` left, which
is exactly the comparison the owner makes on raw values at prediction time. Missing values
(NaN) get a dedicated bin at index ``max_bin`` and a learned default direction.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ..config import MAX_BIN_LIMIT
from ..errors import ConfigError

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
    if distinct.size <= max_bin:
        return distinct[:-1].copy()
    positions = (np.arange(1, max_bin, dtype=np.int64) * values.size) // max_bin
    cuts = np.unique(values[positions])
    return cuts[cuts < distinct[-1]]


@dataclass(frozen=True)
class FeatureBins:
    """Cut points of one party's features; only that party ever holds them."""

    cuts: tuple[np.ndarray, ...]
    max_bin: int

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

    def transform(self, raw: np.ndarray) -> np.ndarray:
        """Raw float matrix (n_rows, n_features) -> bin matrix of the same shape."""
        raw = np.asarray(raw, dtype=np.float64)
        if raw.ndim != 2 or raw.shape[1] != self.n_features:
            raise ConfigError(
                f"expected a matrix with {self.n_features} feature columns, got shape {raw.shape}"
            )
        out = np.empty(raw.shape, dtype=self.dtype)

        def one(j: int) -> None:
            column = raw[:, j]
            binned = np.searchsorted(self.cuts[j], column, side="left")
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


def fit_bins(raw: np.ndarray, max_bin: int, *, workers: int = 2) -> FeatureBins:
    """Cut points per column, computed in parallel threads (numpy's sort releases the GIL)."""
    bin_dtype(max_bin)  # validates the range
    raw = np.asarray(raw, dtype=np.float64)
    if raw.ndim != 2:
        raise ConfigError(f"expected a 2-D feature matrix, got {raw.ndim} dimensions")
    cuts: list[np.ndarray] = [np.empty(0)] * raw.shape[1]

    def one(j: int) -> None:
        cuts[j] = _column_cuts(np.ascontiguousarray(raw[:, j]), max_bin)

    _map_columns(one, raw.shape[1], raw.shape[0], workers)
    return FeatureBins(cuts=tuple(cuts), max_bin=max_bin)


def _map_columns(work, n_columns: int, n_rows: int, workers: int = 2) -> None:
    """Run ``work(j)`` for every column, in threads when the data is large enough to pay
    (numpy's sort and searchsorted release the GIL)."""
    if workers > 1 and n_rows >= 50_000 and n_columns > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(work, range(n_columns)))
    else:
        for j in range(n_columns):
            work(j)
