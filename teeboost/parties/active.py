"""The active party's side of the federation that is not split finding: the handshake,
routing questions for prediction, and the notes it keeps in its transcript."""

from __future__ import annotations

import json

import numpy as np

from ..compute import ComputeBackend
from ..core.grower import SplitFinder
from ..core.predict import Question, RoutingOracle
from ..core.routing import Router
from ..core.split import MAX_CATEGORY_BINS
from ..core.tree import OwnerTable, Tree
from ..errors import ProtocolError
from teeboost.protocols.enclave.partition import encode_row_sets
from ..transport.base import Channel
from ..transport.transcript import TranscriptWriter
from teeboost.protocols.messages import ConstraintNote, DiscardTrees, ModelDone, GradientsNote, Hello, HelloReply, NodeRowsNote, RouteRequest, TreeNote

__all__ = ["FederatedOracle", "handshake", "discard_trees", "NotingFinder", "note_trees", "ensemble_digest",
           "announce_model"]


def handshake(channel: Channel, protocol: str, n_rows: int, max_bin: int, run_id: str = "") -> dict[int, HelloReply]:
    """Agree on protocol, row count and binning with every passive party, and name the run."""
    replies = channel.request_all(
        {p: Hello(protocol, p, n_rows, max_bin, run_id) for p in channel.parties}
    )
    for party, reply in replies.items():
        if reply.n_rows != n_rows:
            raise ProtocolError(f"party {party} ({reply.name}) holds {reply.n_rows} rows, expected {n_rows}")
        withheld = protocol == "strict" and not np.any(reply.n_value_bins)  # strict: in its enclave only
        if reply.n_value_bins.size == 0 or (not withheld and (np.any(reply.n_value_bins < 1)
                                                              or np.any(reply.n_value_bins > max_bin))):
            raise ProtocolError(f"party {party} ({reply.name}) reported invalid bin counts")
        if reply.categorical.shape != reply.n_value_bins.shape or np.any(
                reply.categorical & (reply.n_value_bins > MAX_CATEGORY_BINS)):
            raise ProtocolError(f"party {party} ({reply.name}) reported invalid categorical features")
    return replies


def ensemble_digest(ensemble) -> str:
    """Hex SHA-256 of the published trees (as strict mode's enclaves digest them: gains, sizes
    and covers left out), the same for every protocol and for a resumed run."""
    from teeboost.protocols.strict.enclave.messages import model_digest
    from teeboost.protocols.strict.enclave.trainer import published_ensemble

    return model_digest(published_ensemble(ensemble)).hex()


def announce_model(channel: Channel, ensemble) -> str:
    """Tell every passive party which model its split records belong to."""
    digest = ensemble_digest(ensemble)
    channel.request_all({p: ModelDone(bytes.fromhex(digest)) for p in channel.parties})
    return digest


def discard_trees(channel: Channel, keep: int) -> None:
    channel.request_all({p: DiscardTrees(keep) for p in channel.parties})


class FederatedOracle(RoutingOracle):
    """Routes rows of one dataset: own splits locally, others by asking their owners."""

    def __init__(self, channel: Channel | None, dataset: str, owner: OwnerTable, raw: np.ndarray,
                 backend: ComputeBackend | None = None) -> None:
        """``backend``: the active party's own compute backend, where its own answers are
        computed if it takes numpy loops (``raw`` then goes there once, in row shards)."""
        self.channel = channel
        self.dataset = dataset
        self.owner = owner
        self.raw = raw
        self._router = Router(backend)

    def route(self, questions: dict[int, list[Question]]) -> dict[int, list[np.ndarray]]:
        answers: dict[int, list[np.ndarray]] = {}
        requests = {}
        for party, asked in questions.items():
            if party == 0:
                answers[0] = self._router.answers(self.owner, self.dataset, self.raw, asked)
                continue
            n_rows = self.raw.shape[0]
            encodings, offsets, payload = encode_row_sets([rows for _, rows in asked], n_rows)
            records = np.array([record for record, _ in asked], dtype=np.int64)
            requests[party] = RouteRequest(self.dataset, n_rows, records, encodings, offsets, payload)
        if requests:
            if self.channel is None:
                raise ProtocolError("model has passive splits but no passive party is connected")
            for party, reply in self.channel.request_all(requests).items():
                sizes = [rows.size for _, rows in questions[party]]
                total = int(sum(sizes))
                if reply.n_answers != total or reply.bits.size != (total + 7) // 8:
                    raise ProtocolError(f"party {party} answered {reply.n_answers} routing questions, expected {total}")
                flat = np.unpackbits(reply.bits, count=total).astype(bool)
                answers[party] = np.split(flat, np.cumsum(sizes)[:-1])
        return answers


class NotingFinder(SplitFinder):
    """Wraps a protocol's finder and notes the active party's own gradients per tree."""

    def __init__(self, inner: SplitFinder, transcript: TranscriptWriter, outputs_per_round: int,
                 constrained: bool = False) -> None:
        self.inner = inner
        self.transcript = transcript
        self.outputs = outputs_per_round
        self.constrained = constrained  # note what the passive winners' columns' constraints said

    def begin_tree(self, tree_index, rows, gradients):
        self._tree = tree_index
        self.transcript.note(
            GradientsNote(tree_index, tree_index % self.outputs, gradients.codec.frac_bits,
                          rows.astype(np.uint32), gradients.g[rows], gradients.h[rows])
        )
        self.inner.begin_tree(tree_index, rows, gradients)

    def find_splits(self, nodes, node_rows, limits=None):
        encodings, offsets, payload = encode_row_sets([node_rows.rows(n) for n in nodes], node_rows.n_rows)
        self.transcript.note(NodeRowsNote(self._tree, np.array(nodes, dtype=np.int32), encodings, offsets, payload))
        return self.inner.find_splits(nodes, node_rows, limits)

    def apply_splits(self, splits, children, *, next_min_rows=0):
        applied = self.inner.apply_splits(splits, children, next_min_rows=next_min_rows)
        passive = [i for i, s in enumerate(splits) if s.party > 0]
        if self.constrained and passive:
            self.transcript.note(ConstraintNote(
                self._tree, np.array([splits[i].node_id for i in passive], dtype=np.int32),
                np.array([splits[i].party for i in passive], dtype=np.int32),
                np.array([applied[i].direction for i in passive], dtype=np.int8),
                np.array([applied[i].membership for i in passive], dtype=np.int64)))
        return applied

    def end_tree(self):
        self.inner.end_tree()

    def expect_trees(self, total):
        self.inner.expect_trees(total)

    def sealed_state(self, run_id):
        return self.inner.sealed_state(run_id)

    def restore_sealed_state(self, run_id, blob):
        self.inner.restore_sealed_state(run_id, blob)

    def close(self):
        self.inner.close()


def note_trees(transcript: TranscriptWriter, trees: list[Tree]) -> None:
    for index, tree in enumerate(trees):
        transcript.note(TreeNote(index, json.dumps(tree.to_dict())))
