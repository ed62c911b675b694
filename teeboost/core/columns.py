"""One party's binned training columns: its histograms, its best splits, its split records.

Every party runs exactly this code on the columns it holds (the active party on its own,
each passive party on its own, a central run on all of them), which is why vertical and
central training agree.
"""

from __future__ import annotations

import numpy as np

from ..compute import ComputeBackend
from .binning import FeatureBins
from .gradients import EncodedGradients, GradientCodec
from .histogram_jobs import histogram_builder
from .nodes import NodeRows
from .split import NodeBest, SplitCriteria, best_splits, goes_left, left_sums
from .tree import OwnerTable

__all__ = ["PartyColumns"]


class PartyColumns:
    """Binned columns of one party plus the lookup table of splits it owns."""

    def __init__(self, bins: FeatureBins, binned: np.ndarray, owner: OwnerTable | None = None,
                 backend: ComputeBackend | None = None, names: list[str] | None = None):
        """``binned``: (n_rows, n_features) as ``FeatureBins.transform`` makes it; ``backend``:
        the party's own compute backend, where histograms are summed if it takes such work;
        ``names``: the columns' names (what a run's constraints name)."""
        self.bins = bins
        self.names = list(names) if names is not None else [f"f{i}" for i in range(bins.n_features)]
        self.binned_by_feature = np.ascontiguousarray(binned.T)
        self.owner = owner if owner is not None else OwnerTable()
        self.backend = backend
        self.histograms = histogram_builder(self.binned_by_feature, bins.max_bin + 1, backend)
        self._n_rows = self.binned_by_feature.shape[1]

    @property
    def n_features(self) -> int:
        return self.bins.n_features

    @property
    def n_rows(self) -> int:
        return self._n_rows

    def drop_binned(self) -> None:
        """Free the binned columns once only this party's enclave works on them (it sums and
        splits; the host keeps cut points, records and row count)."""
        self.binned_by_feature = None
        close = getattr(self.histograms, "close", None)
        if close is not None:
            close()
        self.histograms = None

    def begin_tree(self, gradients: EncodedGradients) -> None:
        self.histograms.begin_tree(gradients)

    def end_tree(self) -> None:
        self.histograms.end_tree()

    def level_histograms(self, nodes: list[int], node_rows: NodeRows) -> np.ndarray:
        return self.histograms.level(nodes, node_rows)

    def best(
        self,
        nodes: list[int],
        node_rows: NodeRows,
        codec: GradientCodec,
        criteria: SplitCriteria,
        sampled: np.ndarray | None = None,
        **limits,
    ) -> list[NodeBest]:
        """Best split per node over the features marked in ``sampled`` (None: all), within
        the constraints' ``limits`` (``best_splits`` keywords)."""
        hist = self.level_histograms(nodes, node_rows)
        return best_splits(hist, self.bins.n_value_bins, codec, criteria, self.bins.categorical_mask, sampled,
                           **limits)

    def left_totals(self, node: int, feature: int, bin_index: int, default_left: bool) -> tuple[int, int] | None:
        """(G, H) of the rows this party's split of ``node`` sends left, read off the node's
        histogram of this level (exact sums of the same gradients); None if it is not held."""
        hist = self.histograms.cached(node) if self.histograms is not None else None
        if hist is None:
            return None
        left = left_sums(hist[feature], bin_index, default_left, self.bins.is_categorical(feature))
        return int(left[0]), int(left[1])

    def go_left_binned(self, rows: np.ndarray, feature: int, bin_index: int, default_left: bool) -> np.ndarray:
        return goes_left(self.binned_by_feature[feature, rows], bin_index, default_left,
                         self.bins.is_categorical(feature), self.bins.missing_bin)

    def apply(
        self,
        rows: np.ndarray,
        feature: int,
        bin_index: int,
        default_left: bool,
        tree_index: int,
    ) -> tuple[int, np.ndarray]:
        """Record the split under a fresh id; return (record id, which of ``rows`` go left)."""
        record = self.owner.add(self.bins.record(feature, bin_index, default_left, tree_index))
        return record, self.go_left_binned(rows, feature, bin_index, default_left)
