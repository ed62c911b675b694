"""Inside a passive party's strict enclave: its columns, the tree being grown, its records.

Node membership arrives as per-row moves inside channel records and never leaves the
enclave; its own host gives it columns and relays opaque records. Its party's split records
never reach its host in the clear: at the end they are sealed (``record_table``), since which
of the host's columns won which split says which way the labels lean (issue #32: crafted
copies of a column named target rows' labels, AUC 0.92). Per level it answers for every
position, so the work and the reply are the same whatever the tree looks like.
"""

from __future__ import annotations

import json
import os

import numpy as np

from teeboost.core.gradients import GradientCodec
from teeboost.core.near_duplicates import near_duplicate_pairs
from teeboost.core.split import MAX_CATEGORY_BINS, MIN_CATEGORY_ROWS, SplitCriteria, best_splits, bins_fit_counts, category_codes, left_sums, sampled_features
from teeboost.errors import ProtocolError
from teeboost.protocols.enclave.limits import (PositionPaths, held_names, party_constraints_of, scoring_limits,
                                               winner_constraints)
from teeboost.transport import serde
from teeboost.protocols.strict.enclave import messages as sm
from teeboost.protocols.strict.enclave.oblivious import children_histograms, go_left_all, position_histograms, unpack_codes, update_positions

__all__ = ["PassiveStrictState"]


class PassiveStrictState:
    def __init__(self, load: sm.StrictPassiveLoad, max_bin: int, criteria: SplitCriteria, party: int,
                 constraints=None) -> None:
        binned = np.ascontiguousarray(load.binned)
        n_rows = load.n_train + load.n_valid
        if load.n_train < 1 or load.n_valid < 0 or binned.shape != (load.n_value_bins.size, n_rows) \
                or (binned.size and int(binned.max()) > max_bin) or np.any(load.n_value_bins < 1) \
                or np.any(load.n_value_bins > max_bin) or load.categorical.shape != load.n_value_bins.shape \
                or np.any(load.categorical & (load.n_value_bins > MAX_CATEGORY_BINS)) \
                or not bins_fit_counts(binned, load.n_value_bins, max_bin):
            raise ProtocolError("binned columns do not match their row and bin counts")
        n_cuts = load.n_value_bins - 1
        if load.cuts.size != int(n_cuts.sum()) or not np.all(np.isfinite(load.cuts)):
            raise ProtocolError("cut points do not match the features' bin counts")
        self.cuts = np.split(load.cuts.copy(), np.cumsum(n_cuts)[:-1])
        floor = max(int(criteria.min_samples_leaf), MIN_CATEGORY_ROWS)
        twins = near_duplicate_pairs(binned[:, :load.n_train], floor)
        if twins:
            i, j, differ = twins[0]
            raise ProtocolError(
                f"columns {i} and {j} of this party (0-based, in its column order) bin alike on all but {differ} of "
                f"its {load.n_train} training rows ({len(twins)} such pair(s)): which of two such columns wins a split "
                f"names those rows' labels, so strict mode refuses columns differing in fewer than {floor} rows "
                "(max(min_samples_leaf, 10)); drop one of each pair")
        self.bins = binned.astype(np.intp)
        self.n_value_bins = load.n_value_bins.copy()
        self.categorical = load.categorical.copy()
        self.n_rows = n_rows
        self.max_bin = max_bin
        self.width = max_bin + 1
        self.criteria = criteria
        self.constraints = None if constraints is None else party_constraints_of(constraints, load.names,
                                                                                   self.n_value_bins.size)
        self.paths = PositionPaths()  # its own columns on each position's path (interaction constraints)
        self.held = "[]" if self.constraints is None else json.dumps(held_names(constraints, load.names))
        self.party = party  # this party's index: which column sample is its own
        self.records: dict[int, tuple[int, int, bool, int]] = {}  # id -> feature, bin, default left, tree
        self.n_train = load.n_train
        if load.max_trees < 0 or load.max_depth < 0:
            raise ProtocolError("model limits must be >= 0")
        self.max_trees, self.max_depth = int(load.max_trees), int(load.max_depth)
        self.tree = -1
        self.depth = -1
        self.phase = "idle"
        self.slots = 0  # positions of every level decided so far: a public count (the schedule)

    # -- one tree, level by level

    def level(self, msg: sm.StrictLevel) -> sm.StrictCandidates:
        if msg.depth == 0:
            if msg.tree <= self.tree or self.phase not in ("idle", "decided"):
                raise ProtocolError(f"tree {msg.tree} starts out of order")
            if msg.frac_bits.size != 1:
                raise ProtocolError("the first level of a tree must carry its gradients")
            if msg.n_train != self.n_train:  # which rows are training rows is this party's to say
                raise ProtocolError(f"the active party trains on {msg.n_train} rows; this party's training rows "
                                    f"are {self.n_train}")
            if msg.max_features and self.n_value_bins.size > msg.max_features:  # counted here, not by its host
                raise ProtocolError(f"the label owner's policy ([policy] max_passive_features) allows {msg.max_features} "
                                    f"columns per passive party; this party brings {self.n_value_bins.size}")
            if self.max_trees and msg.tree >= self.max_trees:
                raise ProtocolError(f"this party's policy ([policy] max_trees) allows {self.max_trees} trees; "
                                    f"the run starts tree {msg.tree} (trees count from 0)")
            self.tree, self.depth = msg.tree, 0
            self.codec = GradientCodec(int(msg.frac_bits[0]))
            self.g = sm.unpack_fixed(msg.g, self.n_rows)
            self.h = sm.unpack_fixed(msg.h, self.n_rows)
            self.weight = sm.from_bits(msg.weight, self.n_rows, "sample weights")
            if self.weight[self.n_train:].any():
                raise ProtocolError("validation rows cannot be in a tree's sample")
            self.positions = np.zeros(self.n_rows, dtype=np.int64)
            self.paths.reset()
            hist = position_histograms(self.bins, self.width, self.positions, np.array([0]), self.g, self.h,
                                       self.weight)
        else:
            if msg.tree != self.tree or msg.depth != self.depth + 1 or self.phase != "decided":
                raise ProtocolError(f"level {msg.depth} of tree {msg.tree} out of order")
            if self.max_depth and msg.depth >= self.max_depth:
                raise ProtocolError(f"this party's policy ([policy] max_depth) allows depth {self.max_depth}; "
                                    f"the run grows level {msg.depth + 1}")
            self.depth = msg.depth
            codes = unpack_codes(msg.codes, self.n_rows)
            split = sm.from_bits(msg.parent_split, 2 ** (msg.depth - 1), "parent splits")
            self.positions = update_positions(self.positions, codes)
            hist = children_histograms(self.bins, self.width, self.positions, self.hist, split, self.g, self.h,
                                       self.weight)
        self.hist = hist
        sampled = sampled_features(self.criteria, self.party, self.tree, self.n_value_bins.size)
        best = best_splits(hist, self.n_value_bins, self.codec, self.criteria, self.categorical, sampled,
                           **scoring_limits(self.constraints, self.paths.paths, msg.bounds, msg.sets),
                           every_candidate=True)  # data-independent accesses
        n = len(best)
        sums = np.zeros((n, 3), dtype=np.int64)
        self.handles = np.frombuffer(os.urandom(8 * n), dtype=np.uint64) | np.uint64(1)
        for k, candidate in enumerate(best):
            if candidate.valid:
                sums[k] = left_sums(hist[k, candidate.feature], candidate.bin, candidate.default_left,
                                    bool(self.categorical[candidate.feature]))
        self.best = best
        self.phase = "scored"
        return sm.StrictCandidates(self.tree, self.depth, np.array([b.gain for b in best], dtype=np.float64),
                                   self.handles.copy(), sums, **winner_constraints(self.constraints, best),
                                   held=self.held)

    def decide(self, msg: sm.StrictDecision) -> sm.StrictPartition:
        n = len(self.best) if self.phase == "scored" else -1
        if msg.tree != self.tree or msg.depth != self.depth or n < 0 or msg.mine.size != n \
                or msg.handles.size != n:
            raise ProtocolError(f"decision for level {msg.depth} of tree {msg.tree} out of order")
        mine = msg.mine.astype(bool)
        if np.any(mine & (msg.handles != self.handles)):
            raise ProtocolError("a decision names a split handle this enclave did not give")
        if any(mine[k] and not self.best[k].valid for k in range(n)):
            raise ProtocolError("a decision picks a position where this party had no valid split")
        features = np.array([max(b.feature, 0) for b in self.best], dtype=np.int64)
        split_bins = np.array([b.bin for b in self.best], dtype=np.int64)
        default_left = np.array([b.default_left for b in self.best], dtype=bool)
        left = go_left_all(self.bins, self.positions, self.max_bin, features, split_bins, default_left, mine,
                           self.categorical)
        self.paths.descend(mine, features)
        records = np.zeros(n, dtype=np.int64)
        for k in np.flatnonzero(mine):
            record = self._fresh_id()
            self.records[record] = (int(features[k]), int(split_bins[k]), bool(default_left[k]), self.tree)
            records[k] = record
        self.phase = "decided"
        self.slots += n
        return sm.StrictPartition(self.tree, self.depth, sm.bits_of(left), records)

    def _fresh_id(self) -> int:
        """Random ids: the order of a party's records says nothing about where they are."""
        while True:
            record = int.from_bytes(os.urandom(8), "big") >> 2
            if record and record not in self.records:
                return record

    # -- the end, and checkpoints

    def release(self, msg: sm.StrictFinish) -> sm.StrictReleased:
        """Keep the records of the first ``n_trees`` trees (as bins: checkpoints and tables)."""
        if msg.n_trees < 0:
            raise ProtocolError(f"cannot keep {msg.n_trees} trees")
        kept = sorted((i, r) for i, r in self.records.items() if r[3] < msg.n_trees)
        self.records = dict(kept)
        return sm.StrictReleased(
            np.array([i for i, _ in kept], dtype=np.int64), np.array([r[0] for _, r in kept], dtype=np.int32),
            np.array([r[1] for _, r in kept], dtype=np.int64), np.array([r[2] for _, r in kept], dtype=bool),
            np.array([r[3] for _, r in kept], dtype=np.int32), msg.model_digest)

    def record_table(self, msg: sm.StrictFinish, active_key: bytes) -> sm.StrictRecordTable:
        """The records of the finished model with raw thresholds (or category code masks),
        padded to one slot per position decided, for sealing."""
        released = self.release(msg)
        n = released.ids.size
        thresholds = np.zeros(n, dtype=np.float64)
        categories = np.zeros(n, dtype=np.int64)
        for k, (feature, bin_) in enumerate(zip(released.features.tolist(), released.bins.tolist())):
            if self.categorical[feature]:
                categories[k] = category_codes(bin_, self.cuts[feature].size)
            else:
                thresholds[k] = self.cuts[feature][bin_]
        pad = max(self.slots - n, 0)

        def padded(array):
            return np.concatenate([array, np.zeros(pad, dtype=array.dtype)])

        return sm.StrictRecordTable(self.party, msg.model_digest, active_key, int(self.n_value_bins.size),
                                    padded(released.ids),
                                    padded(released.features), padded(thresholds), padded(released.default_left),
                                    padded(categories), padded(released.trees))

    def snapshot(self) -> bytes:
        """The records padded to one slot per position decided so far (id 0: empty), so the
        sealed blob's size says nothing about how many splits this party won."""
        released = self.release(sm.StrictFinish(2**31 - 1, b""))
        pad = self.slots - released.ids.size

        def padded(array):
            return np.concatenate([array, np.zeros(pad, dtype=array.dtype)])

        return serde.encode(sm.StrictReleased(padded(released.ids), padded(released.features), padded(released.bins),
                                              padded(released.default_left), padded(released.trees), b"\0" * 32))

    def restore(self, released: sm.StrictReleased, n_trees: int) -> None:
        """Records of a checkpoint, rewound to the trees the resumed run keeps; only before the
        resumed run's first record (red team: a host rewound its enclave mid-run)."""
        if self.tree != -1 or self.records or self.slots:
            raise ProtocolError("a checkpoint is restored only before training")
        self.records = {int(i): (int(f), int(b), bool(d), int(t))
                        for i, f, b, d, t in zip(released.ids, released.features, released.bins,
                                                 released.default_left, released.trees) if i and t < n_trees}
        self.slots = released.ids.size
        self.tree = n_trees - 1
