"""Routing many trees at once with numpy: every tree walked one level per step, in lockstep.

``leaf_assignments`` (``teeboost.core.predict``) walks one node at a time in Python, which is
fine for batches of thousands of rows and far too slow to score one customer against 100 trees
of depth 6 in a few milliseconds. Here a model's trees are flattened into arrays once
(``EnsembleArrays``), split records into arrays by record id (``RecordArrays``), and each step
advances every (tree, row) pair that is not at a leaf: one question per pair, asked of the
party that owns its node. The answers are ``record_goes_left``'s, and leaf values are added in
the same order as ``tree_outputs``, so margins are identical to ``Ensemble.margin``'s.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..errors import ProtocolError
from .tree import OwnerTable

__all__ = ["RecordArrays", "EnsembleArrays"]


class RecordArrays:
    """One party's split records as arrays, found by id (strict mode's ids are random)."""

    def __init__(self, ids, features, thresholds, missing_left, categories, trees=None) -> None:
        order = np.argsort(np.asarray(ids, dtype=np.int64), kind="stable")
        self.ids = np.asarray(ids, dtype=np.int64)[order]
        self.features = np.asarray(features, dtype=np.int64)[order]
        self.thresholds = np.asarray(thresholds, dtype=np.float64)[order]
        self.missing_left = np.asarray(missing_left, dtype=bool)[order]
        self.categories = np.asarray(categories, dtype=np.int64)[order]
        self.trees = None if trees is None else np.asarray(trees, dtype=np.int64)[order]
        if self.ids.size and np.any(self.ids[1:] == self.ids[:-1]):
            raise ProtocolError("split record ids repeat")
        if np.any(self.categories < 0) or np.any(self.categories >= (1 << 62)):
            raise ProtocolError("a split record's category mask is out of range")

    @classmethod
    def from_owner(cls, owner: OwnerTable) -> "RecordArrays":
        items = owner.items()
        return cls([i for i, _ in items], [r.feature for _, r in items], [r.threshold for _, r in items],
                   [r.missing_left for _, r in items], [r.categories for _, r in items], [r.tree for _, r in items])

    def positions(self, records: np.ndarray) -> np.ndarray:
        records = np.asarray(records, dtype=np.int64)
        at = np.searchsorted(self.ids, records)
        at = np.minimum(at, max(self.ids.size - 1, 0))
        if records.size and (self.ids.size == 0 or np.any(self.ids[at] != records)):
            unknown = records[(self.ids.size == 0) | (self.ids[at] != records)] if self.ids.size else records
            raise ProtocolError(f"unknown split record id {int(unknown[0])}")
        return at

    def go_left(self, raw: np.ndarray, rows: np.ndarray, records: np.ndarray) -> np.ndarray:
        """Question j: does row ``rows[j]`` of ``raw`` go left at record ``records[j]``?"""
        at = self.positions(records)
        features = self.features[at]
        if features.size and (features.min() < 0 or features.max() >= raw.shape[1]):
            raise ProtocolError(f"a split record names a column the rows do not have ({raw.shape[1]} columns)")
        values = raw[np.asarray(rows, dtype=np.int64), features]
        return self._decide(values, at)

    def all_bits(self, raw: np.ndarray) -> np.ndarray:
        """(records, rows): every record of the table on every row, in id order."""
        if self.ids.size and (self.features.min() < 0 or self.features.max() >= raw.shape[1]):
            raise ProtocolError(f"a split record names a column the rows do not have ({raw.shape[1]} columns)")
        values = raw[:, self.features].T  # (records, rows)
        at = np.arange(self.ids.size)[:, None]
        return self._decide(values, at)

    def _decide(self, values: np.ndarray, at: np.ndarray) -> np.ndarray:
        """``record_goes_left``, vectorised (the same rule, the same answers)."""
        missing = np.isnan(values)
        masks = self.categories[at]
        codes = np.clip(np.where(missing, 0, values), 0, 63).astype(np.uint64)
        categorical = ~missing & (((masks.astype(np.uint64) >> codes) & np.uint64(1)) == 1)
        with np.errstate(invalid="ignore"):
            numeric = values <= self.thresholds[at]
        decision = np.where(masks != 0, categorical, numeric)
        return decision | (missing & self.missing_left[at])


class EnsembleArrays:
    """A model's trees flattened: node arrays over all trees, one root per tree."""

    def __init__(self, ensemble) -> None:
        trees = ensemble.trees
        sizes = np.array([t.n_nodes for t in trees], dtype=np.int64)
        self.roots = np.concatenate([[0], np.cumsum(sizes)[:-1]]) if trees else np.zeros(0, np.int64)
        cat = lambda name: (np.concatenate([np.asarray(getattr(t, name)) for t in trees]) if trees  # noqa: E731
                            else np.zeros(0))
        offsets = np.repeat(self.roots, sizes)
        left, right = cat("left").astype(np.int64), cat("right").astype(np.int64)
        self.left = np.where(left >= 0, left + offsets, -1)
        self.right = np.where(right >= 0, right + offsets, -1)
        self.party = cat("party").astype(np.int64)
        self.record = cat("record").astype(np.int64)
        self.value = cat("value").astype(np.float64)
        self.outputs = np.array([t.output for t in trees], dtype=np.int64)
        self.base_margin = np.asarray(ensemble.base_margin, dtype=np.float64)
        self.n_outputs = int(self.base_margin.size)

    def leaves(self, n_rows: int, ask: Callable[[int, np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
        """(trees, rows) leaf node (flat index). ``ask(party, records, rows)`` answers one
        step's questions of that party (question j: row ``rows[j]`` at record ``records[j]``);
        questions come tree by tree, row by row."""
        node = np.repeat(self.roots[:, None], n_rows, axis=1)
        while True:
            inner = self.left[node] >= 0
            if not inner.any():
                return node
            owners = self.party[node]
            for party in np.unique(owners[inner]):
                asked = inner & (owners == party)
                trees, rows = np.nonzero(asked)
                at = node[trees, rows]
                answers = np.asarray(ask(int(party), self.record[at], rows), dtype=bool)
                if answers.shape != at.shape:
                    raise ProtocolError(f"party {int(party)} answered {answers.size} of {at.size} routing questions")
                node[trees, rows] = np.where(answers, self.left[at], self.right[at])

    def path_nodes(self, party: int) -> int:
        """The most of ``party``'s nodes on one root-to-leaf path, summed over the trees: an upper
        bound on how many of its answers one row's scores depend on."""
        total = 0
        for root in self.roots:
            most, stack = 0, [(int(root), 0)]
            while stack:
                node, count = stack.pop()
                if self.left[node] < 0:
                    most = max(most, count)
                    continue
                count += int(self.party[node] == party)
                stack += [(int(self.left[node]), count), (int(self.right[node]), count)]
            total += most
        return total

    def margin(self, n_rows: int, ask: Callable[[int, np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
        values = self.value[self.leaves(n_rows, ask)]  # (trees, rows)
        sums = np.zeros((n_rows, self.n_outputs), dtype=np.float64)
        for output in range(self.n_outputs):  # tree by tree (a running sum, in order), then the base
            # margin, as ``Ensemble.margin`` adds them; a loop over trees was a tenth of an online batch
            mine = values[self.outputs == output]
            if mine.shape[0]:
                sums[:, output] = np.cumsum(mine, axis=0)[-1]
        out = np.tile(self.base_margin, (n_rows, 1))
        out += sums
        return out
