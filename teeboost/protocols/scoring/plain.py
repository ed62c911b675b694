"""The ``plain`` protocol: the federation with no protection at all.

The active party sends gradients in the clear, passive parties return full histograms,
the active party scores every split. It reveals everything SecureBoost reveals and more
(the gradients themselves); it exists as the reference every secure protocol must match
tree for tree, and as the floor of the benchmarks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from teeboost.core.gradients import EncodedGradients, GradientCodec
from teeboost.errors import ProtocolError
from teeboost.protocols.messages import Ack
from teeboost.transport.serde import array_field, message
from teeboost.protocols.enclave.partition import check_rows
from teeboost.protocols.scoring.level_loop import ActiveScoring, PassiveScoring

__all__ = ["PlainActive", "PlainPassive", "PlainBeginTree", "HistogramReply"]


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
class HistogramReply:
    """(nodes, features, bins + missing bin, [g, h, count]) exact integer sums."""

    tree: int
    sums: np.ndarray = array_field("int64", 4)


class PlainActive(ActiveScoring):
    def _send_gradients(self, tree_index, rows, gradients):
        every = rows.size == gradients.g.size  # subsample 1: no gather
        msg = PlainBeginTree(tree_index, gradients.codec.frac_bits, rows.astype(np.uint32),
                             gradients.g if every else gradients.g[rows], gradients.h if every else gradients.h[rows])
        self.channel.request_all({p: msg for p in self.channel.parties})

    def _histograms(self, party, reply, nodes):
        if not isinstance(reply, HistogramReply):
            raise ProtocolError(f"party {party} answered a histogram request with {type(reply).__name__}")
        return reply.sums


class PlainPassive(PassiveScoring):
    handles = PassiveScoring.handles + (PlainBeginTree,)
    answers_next_level = True

    def _begin_tree(self, msg):
        if not isinstance(msg, PlainBeginTree):
            raise ProtocolError(f"plain protocol does not serve {type(msg).__name__}")
        n_rows = self.columns.n_rows
        rows = check_rows(msg.rows, n_rows, "gradient rows")
        if msg.g.size != rows.size or msg.h.size != rows.size:
            raise ProtocolError("gradient vectors do not match the number of rows")
        self.columns.end_tree()  # the last tree's gradients go before this one's are built
        if rows.size == n_rows:  # every row sampled (sorted, distinct): the vectors are the rows' own
            g, h = np.array(msg.g, dtype=np.int64), np.array(msg.h, dtype=np.int64)  # writable copies
        else:
            g = np.zeros(n_rows, dtype=np.int64)
            h = np.zeros(n_rows, dtype=np.int64)
            g[rows], h[rows] = msg.g, msg.h
        self.columns.begin_tree(EncodedGradients(g, h, GradientCodec(msg.frac_bits)))
        self._open_tree(msg.tree, rows)
        return Ack()

    def _level(self, nodes, node_rows):
        return HistogramReply(self._tree, self.columns.level_histograms(nodes, node_rows))
