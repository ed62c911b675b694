"""A transcript, read back into what the active party knew, tree by tree.

Everything comes from the recorded file: its own gradients (notes), node instance sets
(notes), per-bin sums of passive features (decrypted under SecureBoost, in the clear under
plain; absent under N-TEE and 1-TEE), the splits passive parties won with their left instance
sets, and, where the protocol reveals them, the winning (feature, bin).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..parties.messages import GradientsNote, HelloReply, HistogramNote, NodeRowsNote, RunNote
from ..protocols import registry as _registry  # noqa: F401  (registers every message type)
from ..protocols.onetee import SealedSplitRequest
from ..protocols.partition import SplitReply, SplitRequest, bits_to_subsets, decode_row_sets
from ..transport.transcript import NOTE, RECEIVED, SENT, read_transcript

__all__ = ["ActiveView", "TreeView", "PassiveSplit", "read_view"]


@dataclass
class TreeView:
    rows: np.ndarray
    g: np.ndarray  # int64 per training row (zero outside the sample)
    h: np.ndarray
    node_rows: dict[int, np.ndarray] = field(default_factory=dict)


@dataclass
class PassiveSplit:
    tree: int
    party: int
    node: int
    left_rows: np.ndarray
    right_rows: np.ndarray
    feature: int  # -1: not revealed to the active party
    bin: int
    default_left: bool | None


@dataclass
class ActiveView:
    protocol: str
    n_rows: int
    max_bin: int
    n_value_bins: dict[int, np.ndarray]  # party -> value bins per feature (from the handshake)
    trees: dict[int, TreeView] = field(default_factory=dict)
    histograms: list[HistogramNote] = field(default_factory=list)
    splits: list[PassiveSplit] = field(default_factory=list)


def read_view(path: str | Path) -> ActiveView:
    view: ActiveView | None = None
    pending: dict[int, object] = {}
    bins: dict[int, np.ndarray] = {}
    for record in read_transcript(path):
        msg = record.message
        if record.kind == NOTE and isinstance(msg, RunNote):
            detail = json.loads(msg.detail)
            view = ActiveView(msg.protocol, int(detail["n_rows"]), int(detail["params"]["max_bin"]), bins)
        elif view is None:
            continue
        elif record.kind == NOTE and isinstance(msg, GradientsNote):
            g = np.zeros(view.n_rows, dtype=np.int64)
            h = np.zeros(view.n_rows, dtype=np.int64)
            rows = msg.rows.astype(np.int64)
            g[rows], h[rows] = msg.g, msg.h
            view.trees[msg.tree] = TreeView(rows, g, h)
        elif record.kind == NOTE and isinstance(msg, NodeRowsNote):
            sets = decode_row_sets(msg.encodings, msg.offsets, msg.payload, view.n_rows, "transcript node rows")
            view.trees[msg.tree].node_rows.update({int(n): r for n, r in zip(msg.nodes, sets)})
        elif record.kind == NOTE and isinstance(msg, HistogramNote):
            view.histograms.append(msg)
        elif record.kind == RECEIVED and isinstance(msg, HelloReply):
            bins[record.peer] = msg.n_value_bins.astype(np.int64)
        elif record.kind == SENT and isinstance(msg, (SplitRequest, SealedSplitRequest)):
            pending[record.peer] = msg
        elif record.kind == RECEIVED and isinstance(msg, SplitReply) and record.peer in pending:
            request = pending.pop(record.peer)
            tree = view.trees[request.tree]
            parents = [tree.node_rows[int(n)] for n in request.nodes]
            lefts = bits_to_subsets(parents, msg.left_bits, "transcript split reply")
            known = isinstance(request, SplitRequest)
            for i, (node, parent, left) in enumerate(zip(request.nodes, parents, lefts)):
                feature = int(request.features[i]) if known else -1
                view.splits.append(PassiveSplit(
                    request.tree, record.peer, int(node), left, np.setdiff1d(parent, left, assume_unique=True),
                    feature, int(request.bins[i]) if known and feature >= 0 else -1,
                    bool(request.default_left[i]) if known and feature >= 0 else None))
    if view is None:
        raise ValueError(f"{path}: transcript has no run note")
    return view
