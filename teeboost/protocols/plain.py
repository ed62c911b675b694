"""The ``plain`` protocol: the federation with no protection at all.

The active party sends gradients in the clear, passive parties return full histograms,
the active party scores every split. It reveals everything SecureBoost reveals and more
(the gradients themselves); it exists as the reference every secure protocol must match
tree for tree, and as the floor of the benchmarks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.columns import PartyColumns
from ..core.gradients import EncodedGradients, GradientCodec
from ..core.grower import AppliedSplit, SplitFinder
from ..core.histogram import CHANNELS
from ..core.nodes import NodeRows
from ..core.split import NodeBest, SplitCriteria, SplitInfo, best_splits, pick_global_best
from ..errors import ProtocolError
from ..parties.messages import Ack
from ..transport.base import Channel
from ..transport.serde import array_field, message
from .partition import (
    Announcements, SplitReply, SplitRequest, apply_announcements, check_rows, pack_rows, unpack_rows,
)

__all__ = ["PlainActive", "PlainPassive", "PlainBeginTree", "HistogramRequest", "HistogramReply"]

NAME = "plain"


@message
@dataclass(frozen=True)
class PlainBeginTree:
    """Gradients of the sampled rows, in the clear (fixed-point integers)."""

    tree: int
    frac_bits: int
    rows: np.ndarray = array_field("uint32", 1)
    g: np.ndarray = array_field("int64", 1)
    h: np.ndarray = array_field("int64", 1)


@message
@dataclass(frozen=True)
class HistogramRequest:
    """Announce last level's splits, then ask for histograms of ``nodes``."""

    tree: int
    nodes: np.ndarray = array_field("int32", 1)
    split_nodes: np.ndarray = array_field("int32", 1)
    split_lefts: np.ndarray = array_field("int32", 1)
    split_rights: np.ndarray = array_field("int32", 1)
    split_offsets: np.ndarray = array_field("int64", 1)
    split_rows: np.ndarray = array_field("uint32", 1)


@message
@dataclass(frozen=True)
class HistogramReply:
    """(nodes, features, bins + missing bin, [g, h, count]) exact integer sums."""

    tree: int
    sums: np.ndarray = array_field("int64", 4)


class PlainActive(SplitFinder):
    """Active side: own columns locally, passive histograms over the channel."""

    def __init__(
        self,
        channel: Channel,
        columns: PartyColumns,
        criteria: SplitCriteria,
        passive_bins: dict[int, np.ndarray],
        max_bin: int,
    ) -> None:
        self.channel = channel
        self.columns = columns
        self.criteria = criteria
        self.passive_bins = passive_bins  # party -> value bins per feature
        self.width = max_bin + 1
        self.announcements = Announcements()
        self._tree = -1
        self._codec: GradientCodec | None = None
        self._node_rows: NodeRows | None = None

    def begin_tree(self, tree_index, rows, gradients):
        self._tree = tree_index
        self._codec = gradients.codec
        self.announcements.clear()
        self.columns.begin_tree(gradients)
        msg = PlainBeginTree(
            tree_index, gradients.codec.frac_bits, rows.astype(np.uint32),
            gradients.g[rows], gradients.h[rows],
        )
        self.channel.request_all({p: msg for p in self.channel.parties})

    def find_splits(self, nodes, node_rows):
        self._node_rows = node_rows
        requests = {
            party: HistogramRequest(self._tree, np.array(nodes, dtype=np.int32),
                                    **self.announcements.for_party(party))
            for party in self.channel.parties
        }
        self.announcements.clear()
        pending = self.channel.submit_all(requests)
        own = self.columns.best(nodes, node_rows, self._codec, self.criteria)
        replies = pending.result()
        candidates: list[list[tuple[int, NodeBest]]] = [[] for _ in nodes]
        for i, best in enumerate(own):
            candidates[i].append((0, best))
        for party, reply in replies.items():
            n_bins = self.passive_bins[party]
            expected = (len(nodes), n_bins.size, self.width, CHANNELS)
            if reply.tree != self._tree or reply.sums.shape != expected:
                raise ProtocolError(
                    f"party {party} sent histograms of shape {reply.sums.shape} for tree "
                    f"{reply.tree}; expected {expected} for tree {self._tree}"
                )
            for i, best in enumerate(best_splits(reply.sums, n_bins, self._codec, self.criteria)):
                candidates[i].append((party, best))
        found: list[SplitInfo | None] = []
        for node, node_candidates in zip(nodes, candidates):
            winner = pick_global_best(node_candidates)
            if winner is None:
                found.append(None)
            else:
                party, best = winner
                found.append(SplitInfo(node, party, best.gain, best.feature, best.bin, best.default_left))
        return found

    def apply_splits(self, splits, children):
        results: dict[int, AppliedSplit] = {}
        by_party: dict[int, list[int]] = {}
        for i, split in enumerate(splits):
            by_party.setdefault(split.party, []).append(i)
        for i in by_party.pop(0, []):
            split = splits[i]
            record, left = self.columns.apply(
                self._node_rows.rows(split.node_id), split.feature, split.bin,
                split.default_left, self._tree,
            )
            results[i] = AppliedSplit(record, left)
        requests = {
            party: SplitRequest(
                self._tree,
                np.array([splits[i].node_id for i in idx], dtype=np.int32),
                np.array([children[i][0] for i in idx], dtype=np.int32),
                np.array([children[i][1] for i in idx], dtype=np.int32),
                np.array([splits[i].feature for i in idx], dtype=np.int32),
                np.array([splits[i].bin for i in idx], dtype=np.int32),
                np.array([splits[i].default_left for i in idx], dtype=bool),
            )
            for party, idx in by_party.items()
        }
        replies = self.channel.request_all(requests) if requests else {}
        for party, idx in by_party.items():
            reply = replies[party]
            if reply.records.size != len(idx):
                raise ProtocolError(f"party {party} returned {reply.records.size} records for {len(idx)} splits")
            lefts = unpack_rows(reply.left_offsets, reply.left_rows, len(idx),
                                self._node_rows.n_rows, f"split reply of party {party}")
            for i, record, left in zip(idx, reply.records, lefts):
                results[i] = AppliedSplit(int(record), left)
        ordered = [results[i] for i in range(len(splits))]
        for split, (left_id, right_id), result in zip(splits, children, ordered):
            self.announcements.add(split.party, split.node_id, left_id, right_id, result.left_rows)
        return ordered


class PlainPassive:
    """Passive side: histograms over its columns, partitions for its own splits."""

    handles = (PlainBeginTree, HistogramRequest, SplitRequest)

    def __init__(self, columns: PartyColumns) -> None:
        self.columns = columns
        self._tree = -1
        self._node_rows: NodeRows | None = None

    def handle(self, msg):
        if isinstance(msg, PlainBeginTree):
            return self._begin_tree(msg)
        if msg.tree != self._tree or self._node_rows is None:
            raise ProtocolError(f"{type(msg).__name__} for tree {msg.tree}, but tree {self._tree} is open")
        if isinstance(msg, HistogramRequest):
            apply_announcements(self._node_rows, msg)
            nodes = [int(n) for n in msg.nodes]
            return HistogramReply(self._tree, self.columns.level_histograms(nodes, self._node_rows))
        return self._split(msg)

    def _begin_tree(self, msg: PlainBeginTree):
        n_rows = self.columns.n_rows
        rows = check_rows(msg.rows, n_rows, "gradient rows")
        if msg.g.size != rows.size or msg.h.size != rows.size:
            raise ProtocolError("gradient vectors do not match the number of rows")
        g = np.zeros(n_rows, dtype=np.int64)
        h = np.zeros(n_rows, dtype=np.int64)
        g[rows], h[rows] = msg.g, msg.h
        self.columns.begin_tree(EncodedGradients(g, h, GradientCodec(msg.frac_bits)))
        self._node_rows = NodeRows(n_rows)
        self._node_rows.set_root(rows)
        self._tree = msg.tree
        return Ack()

    def _split(self, msg: SplitRequest) -> SplitReply:
        n = msg.nodes.size
        if not all(a.size == n for a in (msg.lefts, msg.rights, msg.features, msg.bins, msg.default_left)):
            raise ProtocolError("split request arrays differ in length")
        records, lefts = [], []
        for node, left_id, right_id, feature, bin_, default_left in zip(
            msg.nodes, msg.lefts, msg.rights, msg.features, msg.bins, msg.default_left
        ):
            if not 0 <= feature < self.columns.n_features:
                raise ProtocolError(f"split request names feature {feature}; this party has {self.columns.n_features}")
            if not 0 <= bin_ < self.columns.bins.n_value_bins[feature] - 1:
                raise ProtocolError(f"split request names bin {bin_}, not a split point of feature {feature}")
            rows = self._node_rows.rows(int(node))
            record, left = self.columns.apply(rows, int(feature), int(bin_), bool(default_left), self._tree)
            self._node_rows.split(int(node), int(left_id), int(right_id), left)
            records.append(record)
            lefts.append(left)
        offsets, rows = pack_rows(lefts)
        return SplitReply(self._tree, np.array(records, dtype=np.int64), offsets, rows)
