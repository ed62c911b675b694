"""A transcript, read back into what the active party knew, tree by tree.

Everything comes from the recorded file: its own gradients (notes), node instance sets
(notes), per-bin sums of passive features (decrypted under SecureBoost, in the clear under
plain; absent under N-TEE and 1-TEE), the splits passive parties won with their left instance
sets, where the protocol reveals them the winning (feature, bin), and the answers to the
routing questions it asked about training rows left out of a tree's sample: each such answer
puts one more row on one side of a passive cut, so it is merged into that cut's sides. Answers
about held-out rows (early stopping routes them through every tree) are kept per cut apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from teeboost.protocols.messages import ConstraintNote, GradientsNote, HelloReply, HistogramNote, NodeRowsNote, RouteReply, RouteRequest, RunNote
from teeboost.protocols import registry as _registry  # noqa: F401  (registers every message type)
from teeboost.protocols.onetee.hosts import SealedSplitRequest
from teeboost.protocols.enclave.partition import SplitReply, SplitRequest, bits_to_subsets, decode_row_sets

#: Dataset name of the routing questions asked about training rows outside a tree's sample.
TRAIN_DATASET = "train"
#: Dataset name of the held-out rows routed through every tree for early stopping.
HELD_DATASET = "valid"
from ..transport.transcript import NOTE, RECEIVED, SENT, read_transcript

__all__ = ["ActiveView", "TreeView", "PassiveSplit", "read_view", "routing_answers"]


@dataclass
class TreeView:
    rows: np.ndarray
    g: np.ndarray  # int64 per training row (zero outside the sample)
    h: np.ndarray
    node_rows: dict[int, np.ndarray] = field(default_factory=dict)


@dataclass
class PassiveSplit:
    """One passive cut: every training row known to be on its left or right, whether it was in
    the node's sample (split reply) or was routed through the node later (routing answer)."""

    tree: int
    party: int
    node: int
    left_rows: np.ndarray
    right_rows: np.ndarray
    feature: int  # -1: not revealed to the active party
    bin: int
    default_left: bool | None
    record: int = -1
    routed: int = 0  # rows added from routing answers
    held_left: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))  # held-out rows
    categorical: bool = False  # ``bin`` is then the mask of the category bins sent left
    held_right: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    # under constraints: the column's public (monotone direction, interaction-set mask), as learned
    signature: tuple[int, int] | None = None

    def add_held(self, rows: np.ndarray, go_left: np.ndarray) -> None:
        self.held_left = np.union1d(self.held_left, rows[go_left])
        self.held_right = np.union1d(self.held_right, rows[~go_left])

    def add_routed(self, rows: np.ndarray, go_left: np.ndarray) -> None:
        self.left_rows = np.union1d(self.left_rows, rows[go_left])
        self.right_rows = np.union1d(self.right_rows, rows[~go_left])
        self.routed += int(rows.size)


@dataclass
class ActiveView:
    protocol: str
    n_rows: int
    max_bin: int
    n_value_bins: dict[int, np.ndarray]  # party -> value bins per feature (from the handshake)
    params: dict = field(default_factory=dict)  # training parameters the run note recorded
    n_held: int = 0  # held-out rows (early stopping) whose routing answers were seen
    trees: dict[int, TreeView] = field(default_factory=dict)
    histograms: list[HistogramNote] = field(default_factory=list)
    splits: list[PassiveSplit] = field(default_factory=list)


def read_view(path: str | Path) -> ActiveView:
    view: ActiveView | None = None
    pending: dict[int, object] = {}
    routing: dict[int, RouteRequest] = {}
    by_record: dict[tuple[int, int], PassiveSplit] = {}
    by_node: dict[tuple[int, int, int], PassiveSplit] = {}  # (tree, party, node)
    bins: dict[int, np.ndarray] = {}
    categorical: dict[int, np.ndarray] = {}
    for record in read_transcript(path):
        msg = record.message
        if record.kind == NOTE and isinstance(msg, RunNote):
            detail = json.loads(msg.detail)
            view = ActiveView(msg.protocol, int(detail["n_rows"]), int(detail["params"]["max_bin"]), bins,
                              dict(detail["params"]))
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
            categorical[record.peer] = msg.categorical.astype(bool)
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
                split = PassiveSplit(
                    request.tree, record.peer, int(node), left, np.setdiff1d(parent, left, assume_unique=True),
                    feature, int(request.bins[i]) if known and feature >= 0 else -1,
                    bool(request.default_left[i]) if known and feature >= 0 else None,
                    int(msg.records[i]) if i < msg.records.size else -1,
                    categorical=_is_categorical(categorical.get(record.peer), feature))
                view.splits.append(split)
                by_record[(record.peer, split.record)] = split
                by_node[(split.tree, split.party, split.node)] = split
        elif record.kind == NOTE and isinstance(msg, ConstraintNote):
            for node, party, direction, membership in zip(msg.nodes, msg.parties, msg.directions, msg.memberships):
                split = by_node.get((msg.tree, int(party), int(node)))
                if split is not None:
                    split.signature = (int(direction), int(membership))
        elif record.kind == SENT and isinstance(msg, RouteRequest) and msg.dataset in (TRAIN_DATASET, HELD_DATASET):
            routing[record.peer] = msg
            if msg.dataset == HELD_DATASET:
                view.n_held = max(view.n_held, int(msg.n_rows))
        elif record.kind == RECEIVED and isinstance(msg, RouteReply) and record.peer in routing:
            _merge_routing(routing.pop(record.peer), msg, record.peer, by_record)
    if view is None:
        raise ValueError(f"{path}: transcript has no run note")
    return view


def routing_answers(request: RouteRequest, reply: RouteReply, what: str):
    """(record, rows asked, go-left answers) for each question of one routing exchange."""
    groups = decode_row_sets(request.encodings, request.offsets, request.payload, int(request.n_rows), what)
    total = int(sum(rows.size for rows in groups))
    if reply.n_answers != total:
        raise ValueError(f"{what}: {reply.n_answers} answers to {total} routing questions")
    answers = np.unpackbits(reply.bits, count=total).astype(bool)
    bounds = np.concatenate([[0], np.cumsum([rows.size for rows in groups])])
    return [(int(record), rows, answers[bounds[i]:bounds[i + 1]])
            for i, (record, rows) in enumerate(zip(request.records.tolist(), groups))]


def _merge_routing(request: RouteRequest, reply: RouteReply, peer: int,
                   by_record: dict[tuple[int, int], PassiveSplit]) -> None:
    for record, rows, go_left in routing_answers(request, reply, "transcript routing"):
        split = by_record.get((peer, record))
        if split is None:
            continue
        if request.dataset == HELD_DATASET:
            split.add_held(rows, go_left)
        else:
            split.add_routed(rows, go_left)


def _is_categorical(flags: np.ndarray | None, feature: int) -> bool:
    """Whether the handshake said this passive feature splits into category subsets."""
    return flags is not None and 0 <= feature < flags.size and bool(flags[feature])
