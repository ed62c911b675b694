"""Label inference by a passive party: what one passive host learns about the labels from
the messages it exchanged with the active party.

The active party's transcript holds every frame it exchanged with passive party ``p``, and
those frames are exactly what ``p``'s host received and sent on the wire. ``read_passive_view``
replays the records with ``peer == p`` the way ``p`` itself tracks its state, decoding only
what ``p``'s host can read:

* per tree, the row sample (plain, SecureBoost and 1-TEE send it in the clear; N-TEE seals it);
* node instance sets: the clear split announcements of ``HistogramRequest`` (plain, SecureBoost,
  1-TEE; with one passive party, plain and SecureBoost send a level's in its split request),
  replayed from the sample with ``apply_announcements`` exactly as the passive party does, plus the partitions of its own winning splits (their left sets come back in its split
  replies). The last level's splits are never announced (no request follows them);
* routing questions about training rows left out of a tree's sample: record -> rows asked
  (the rows that reached that node of the passive party's) and its own go-left answers, which
  place those rows in the node, its known ancestors and one of its children;
* gradients where they travel in the clear (plain only).

SecureBoost's Paillier/OU ciphertexts, 1-TEE's one-time-pad masked gradients (uniform in
Z_2^64) and every N-TEE ``SealedMessage`` are opaque to the host and only counted. The active
party's own notes are never read.

``infer_labels`` turns the view into label scores. It is given the labels of a few known rows
only (the assumption: the passive party knows the outcome for ~1% of its rows, e.g. its own
customers who defaulted) and never the labels of the rows it scores; ``label_attack`` scores
the result against the truth afterwards (AUC on the rows that were not known).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..core.gradients import GradientCodec
from ..core.nodes import NodeRows
from teeboost.protocols.messages import DiscardTrees, Hello, RouteReply, RouteRequest
from teeboost.protocols import registry as _registry  # noqa: F401  (registers every message type)
from teeboost.protocols.ntee.hosts import SealedMessage
from teeboost.protocols.onetee.hosts import MaskedGradients, SealedSplitRequest
from teeboost.protocols.enclave.partition import HistogramRequest, SplitReply, SplitRequest, apply_announcements, bits_to_subsets, decode_row_sets
from teeboost.protocols.scoring.plain import PlainBeginTree
from teeboost.protocols.scoring.secureboost import EncryptedGradients
from ..transport.transcript import RECEIVED, SENT, read_transcript
from .view import TRAIN_DATASET, routing_answers

__all__ = [
    "PassiveTree", "PassiveView", "LabelScores", "read_passive_view", "choose_known_rows", "infer_labels",
    "label_attack", "score_labels", "binary_truth", "transcript_embedding", "own_feature_embedding", "KNOWN_FRACTION",
]

#: Default share of rows whose labels the passive party is assumed to know (setting (a)).
KNOWN_FRACTION = 0.01

#: Weight of the split-surprisal column among the transcript's membership columns.
SURPRISAL_SCALE = 3.0

#: Messages whose payload tells the passive host nothing about labels, and why. (Sealed records
#: it sends are its own enclave's or its own masked sums; 1-TEE's ``SealedSplitRequest`` locators
#: are sealed *to* this host and name its own winning split, so they count as clear.)
_OPAQUE = {
    EncryptedGradients: "gradients under the active party's homomorphic key",
    MaskedGradients: "gradients masked with a one-time pad in Z_2^64",
    SealedMessage: "attested-channel record between enclaves",
}


@dataclass
class PassiveTree:
    """What passive party ``p`` knows about one tree."""

    tree: int
    sample: np.ndarray | None  # the tree's row sample, if it travelled in the clear
    partition: dict[int, np.ndarray] = field(default_factory=dict)  # node -> sample rows (replayed)
    routed: dict[int, np.ndarray] = field(default_factory=dict)  # node -> left-out rows known to reach it
    parent: dict[int, int] = field(default_factory=dict)  # child -> parent, where a message named both
    children: dict[int, tuple[int, int]] = field(default_factory=dict)
    announced: list[int] = field(default_factory=list)  # nodes whose split someone else announced
    own: dict[int, int] = field(default_factory=dict)  # node -> record id of this party's split there
    searched: list[int] = field(default_factory=list)  # nodes it was asked for histograms about
    questions: list[tuple[int, np.ndarray, np.ndarray]] = field(default_factory=list)  # (node, rows, go_left)
    g: np.ndarray | None = None  # clear gradients of the sample (decoded floats), plain only
    h: np.ndarray | None = None

    def nodes(self) -> list[int]:
        return sorted(set(self.partition) | set(self.routed))

    def rows(self, node: int) -> np.ndarray:
        """Every training row known to have reached ``node``."""
        parts = [self.partition.get(node), self.routed.get(node)]
        parts = [p for p in parts if p is not None]
        if not parts:
            return np.empty(0, dtype=np.int64)
        return parts[0] if len(parts) == 1 else np.union1d(*parts)


@dataclass
class PassiveView:
    protocol: str
    party: int
    n_rows: int
    trees: dict[int, PassiveTree] = field(default_factory=dict)
    clear: Counter = field(default_factory=Counter)  # message type -> count read in the clear
    opaque: Counter = field(default_factory=Counter)  # message type -> count the host could not read
    routing_questions: int = 0  # (record, rows) questions about training rows
    other_questions: Counter = field(default_factory=Counter)  # dataset -> questions about other datasets
    unmatched_questions: int = 0  # questions about records this transcript did not create
    kept_trees: int | None = None  # early stopping's DiscardTrees, if any

    @property
    def opaque_parts(self) -> dict[str, str]:
        return {name: why for kind, why in _OPAQUE.items() if (name := kind.__name__) in self.opaque}

    def node_sets(self) -> int:
        return sum(len([n for n in t.nodes() if n != 0]) for t in self.trees.values())


def _announced(tree: "PassiveTree", nodes: NodeRows, msg) -> None:
    """Splits announced in the clear (a histogram request's, or a split request's that asks the
    next level with it), replayed as the passive party applies them."""
    apply_announcements(nodes, msg)
    for node, left, right in zip(msg.split_nodes.tolist(), msg.split_lefts.tolist(), msg.split_rights.tolist()):
        _link(tree, node, left, right)
        tree.announced.append(node)
        tree.partition[left], tree.partition[right] = nodes.rows(left), nodes.rows(right)


def read_passive_view(path: str | Path, party: int) -> PassiveView:
    """What passive host ``party`` saw, reconstructed from the active party's transcript."""
    view: PassiveView | None = None
    replay: dict[int, NodeRows] = {}  # tree -> the passive party's own node tracking
    pending_split: SplitRequest | SealedSplitRequest | None = None
    pending_route: RouteRequest | None = None
    records: dict[int, tuple[int, int]] = {}  # record id -> (tree, node)
    for record in read_transcript(path):
        if record.peer != party or record.kind not in (SENT, RECEIVED):
            continue  # other parties' traffic and the active party's own notes are not p's view
        msg = record.message
        name = type(msg).__name__
        if record.kind == SENT and isinstance(msg, Hello):
            if view is None or view.n_rows != int(msg.n_rows):  # a resumed run says hello again
                view = PassiveView(msg.protocol, party, int(msg.n_rows))
            view.clear[name] += 1
            continue
        if view is None:
            continue
        if type(msg) in _OPAQUE:
            view.opaque[name] += 1
        else:
            view.clear[name] += 1
        if record.kind == SENT and isinstance(msg, (PlainBeginTree, EncryptedGradients)):
            _open_tree(view, replay, msg.tree, np.asarray(msg.rows, dtype=np.int64))
            if isinstance(msg, PlainBeginTree):
                codec = GradientCodec(int(msg.frac_bits))
                view.trees[msg.tree].g = np.asarray(codec.decode(msg.g), dtype=np.float64)
                view.trees[msg.tree].h = np.asarray(codec.decode(msg.h), dtype=np.float64)
        elif record.kind == SENT and isinstance(msg, MaskedGradients):
            (rows,) = decode_row_sets(msg.row_encoding, msg.row_offsets, msg.row_payload, view.n_rows,
                                      "masked gradient rows")
            _open_tree(view, replay, msg.tree, rows)
        elif record.kind == SENT and isinstance(msg, SealedMessage) and msg.kind == "gradients":
            view.trees[msg.tree] = PassiveTree(msg.tree, None)  # N-TEE: tree id only, sample sealed
        elif record.kind == SENT and isinstance(msg, HistogramRequest):
            _announced(view.trees[msg.tree], replay[msg.tree], msg)
            view.trees[msg.tree].searched.extend(int(n) for n in msg.nodes)
        elif record.kind == SENT and isinstance(msg, (SplitRequest, SealedSplitRequest)):
            pending_split = msg
            if isinstance(msg, SplitRequest) and msg.split_nodes.size:  # the level's other splits, with it
                _announced(view.trees[msg.tree], replay[msg.tree], msg)
        elif record.kind == RECEIVED and isinstance(msg, SplitReply) and pending_split is not None:
            request, pending_split = pending_split, None
            tree = view.trees[request.tree]
            tree.searched.extend(int(n) for n in msg.next_nodes)  # the next level, asked with the split
            nodes_asked = [int(n) for n in request.nodes]
            for node, left, right, rec in zip(nodes_asked, request.lefts.tolist(), request.rights.tolist(),
                                              msg.records.tolist()):
                _link(tree, node, left, right)
                tree.own[node] = int(rec)
                records[int(rec)] = (request.tree, node)
            if request.tree in replay:  # p knows the parents' rows, so its reply's masks decode
                nodes = replay[request.tree]
                parents = [nodes.rows(n) for n in nodes_asked]
                lefts = bits_to_subsets(parents, msg.left_bits, "split reply")
                for node, left_id, right_id, left in zip(nodes_asked, request.lefts.tolist(),
                                                         request.rights.tolist(), lefts):
                    nodes.split(node, left_id, right_id, left)
                    tree.partition[left_id], tree.partition[right_id] = nodes.rows(left_id), nodes.rows(right_id)
        elif record.kind == SENT and isinstance(msg, RouteRequest):
            if msg.dataset == TRAIN_DATASET and msg.n_rows == view.n_rows:
                pending_route = msg
            else:
                view.other_questions[msg.dataset] += int(msg.records.size)
        elif record.kind == RECEIVED and isinstance(msg, RouteReply) and pending_route is not None:
            request, pending_route = pending_route, None
            _apply_routing(view, request, msg, records)
        elif record.kind == SENT and isinstance(msg, DiscardTrees):
            view.kept_trees = int(msg.keep)
    if view is None:
        raise ValueError(f"{path}: no handshake with party {party} in this transcript")
    return view


def _open_tree(view: PassiveView, replay: dict[int, NodeRows], tree: int, rows: np.ndarray) -> None:
    nodes = NodeRows(view.n_rows)
    nodes.set_root(rows)
    replay.clear()  # the passive party keeps one tree open at a time
    replay[tree] = nodes
    view.trees[tree] = PassiveTree(tree, nodes.rows(0), partition={0: nodes.rows(0)})


def _link(tree: PassiveTree, node: int, left: int, right: int) -> None:
    tree.children[node] = (left, right)
    tree.parent[left] = tree.parent[right] = node


def _apply_routing(view: PassiveView, request: RouteRequest, reply: RouteReply,
                   records: dict[int, tuple[int, int]]) -> None:
    for rec, rows, go_left in routing_answers(request, reply, "routing question"):
        view.routing_questions += 1
        where = records.get(int(rec))
        if where is None:
            view.unmatched_questions += 1
            continue
        tree = view.trees[where[0]]
        node = where[1]
        tree.questions.append((node, rows, go_left))
        _add_routed(tree, node, rows)
        ancestor = tree.parent.get(node)
        while ancestor is not None:  # the rows passed every known ancestor on their way here
            _add_routed(tree, ancestor, rows)
            ancestor = tree.parent.get(ancestor)
        if node in tree.children:
            left, right = tree.children[node]
            _add_routed(tree, left, rows[go_left])
            _add_routed(tree, right, rows[~go_left])


def _add_routed(tree: PassiveTree, node: int, rows: np.ndarray) -> None:
    known = tree.routed.get(node)
    tree.routed[node] = rows.astype(np.int64) if known is None else np.union1d(known, rows)


# ---------------------------------------------------------------------------------------------
# Embeddings


def transcript_embedding(view: PassiveView) -> tuple[sp.csr_matrix, list[tuple[int, int]]]:
    """Rows x (tree, node) membership, one sparse binary column per non-root node whose rows
    the passive party knows (replayed partitions and routing questions). Returns the matrix
    and each column's (tree, node)."""
    indices, columns = [], []
    for t in sorted(view.trees):
        tree = view.trees[t]
        for node in tree.nodes():
            if node == 0:
                continue  # the root is the row sample: random, says nothing about labels
            rows = tree.rows(node)
            if rows.size:
                indices.append(rows)
                columns.append((t, node))
    if not columns:
        return sp.csr_matrix((view.n_rows, 0)), []
    col = np.repeat(np.arange(len(columns)), [r.size for r in indices])
    row = np.concatenate(indices)
    data = np.ones(row.size)
    return sp.csr_matrix((data, (row, col)), shape=(view.n_rows, len(columns))), columns


def own_feature_embedding(features: np.ndarray, *, n_quantiles: int = 10) -> sp.csr_matrix:
    """The passive party's own columns for a linear model: each as its rank in [0, 1], a missing
    indicator and a one-hot of its quantile bin (quantiles over all of its rows: no labels)."""
    features = np.asarray(features, dtype=np.float64)
    if features.ndim != 2:
        raise ValueError("own features must be a 2-d array (rows x columns)")
    blocks = []
    for j in range(features.shape[1]):
        x = features[:, j]
        missing = np.isnan(x)
        present = x[~missing]
        rank = np.full(x.size, 0.5)
        one_hot = np.zeros((x.size, 0))
        if present.size:
            sorted_x = np.sort(present)
            rank[~missing] = (np.searchsorted(sorted_x, present, side="left")
                              + np.searchsorted(sorted_x, present, side="right")) / (2.0 * present.size)
            edges = np.unique(np.quantile(present, np.linspace(0, 1, n_quantiles + 1)[1:-1]))
            bins = np.searchsorted(edges, x, side="right")
            one_hot = np.zeros((x.size, edges.size + 1))
            one_hot[np.flatnonzero(~missing), bins[~missing]] = 1.0
        blocks.append(np.column_stack([rank, missing.astype(float), one_hot]))
    return sp.csr_matrix(np.hstack(blocks) if blocks else np.zeros((features.shape[0], 0)))


def gradient_scores(view: PassiveView) -> tuple[np.ndarray, np.ndarray]:
    """Clear gradients -> (score, covered). For the logistic loss g = p - y, so -g > 0 exactly
    for positives: the mean of -g over the trees whose sample held a row is a label oracle."""
    total = np.zeros(view.n_rows)
    seen = np.zeros(view.n_rows)
    for tree in view.trees.values():
        if tree.g is not None and tree.sample is not None:
            total[tree.sample] -= tree.g
            seen[tree.sample] += 1
    covered = seen > 0
    score = np.zeros(view.n_rows)
    score[covered] = total[covered] / seen[covered]
    return score, covered


def split_surprisal(view: PassiveView) -> tuple[np.ndarray, np.ndarray]:
    """Unsupervised score from node sizes alone -> (score, covered).

    Assumption (public): positives are rare (base rate p0 ~ 7% here). For the logistic loss a
    split's gain is n_L (r_L - p0)^2 + n_R (r_R - p0)^2 (r: positive rate of a child), and the
    children's deviations from p0 are in inverse ratio of their sizes. A child's rate cannot
    fall more than p0 below p0, so a split that gains much has its *smaller* child above p0:
    being carved off into a small child is evidence of risk. (Exact reasoning for the first tree,
    where every margin is the base rate; approximate for later trees, which fit residuals.)
    Useless if the positive class is not the rare one. Each row scores, per split whose
    side it is known to be on, log(n_parent / n_child) minus that split's entropy (zero mean
    per split, so depth alone adds nothing), summed and averaged over the trees it appears in.
    Child sizes are the known rows (sample partition and routed rows)."""
    total = np.zeros(view.n_rows)
    trees_seen = np.zeros(view.n_rows)
    for tree in view.trees.values():
        in_tree = np.zeros(view.n_rows, dtype=bool)
        for node, (left, right) in tree.children.items():
            left_rows, right_rows = tree.rows(left), tree.rows(right)
            n_left, n_right = left_rows.size, right_rows.size
            if n_left == 0 or n_right == 0:
                continue
            n = n_left + n_right
            entropy = (n_left * math.log(n / n_left) + n_right * math.log(n / n_right)) / n
            total[left_rows] += math.log(n / n_left) - entropy
            total[right_rows] += math.log(n / n_right) - entropy
            in_tree[left_rows] = in_tree[right_rows] = True
        trees_seen += in_tree
    covered = trees_seen > 0
    score = np.zeros(view.n_rows)
    score[covered] = total[covered] / trees_seen[covered]
    return score, covered


# ---------------------------------------------------------------------------------------------
# Inference (never sees the labels of the rows it scores)


@dataclass
class LabelScores:
    """Per-row label scores (higher = more likely positive) of each setting, over all rows;
    only rows outside ``known_rows`` are meant to be scored."""

    known_rows: np.ndarray
    transcript: np.ndarray | None
    own_features: np.ndarray | None
    combined: np.ndarray | None
    unsupervised: np.ndarray | None
    unsupervised_method: str | None
    counts: dict[str, Any]


def choose_known_rows(n_rows: int, rng: np.random.Generator, fraction: float = KNOWN_FRACTION) -> np.ndarray:
    """Rows whose labels the passive party is assumed to know: a uniform random ``fraction``."""
    if not 0 < fraction < 1:
        raise ValueError(f"fraction={fraction} must be in (0, 1)")
    n_known = max(1, int(round(fraction * n_rows)))
    return np.sort(rng.choice(n_rows, size=n_known, replace=False))


def _fit_scores(x: sp.csr_matrix, known_rows: np.ndarray, known_labels: np.ndarray,
                rng: np.random.Generator) -> tuple[np.ndarray | None, float | None]:
    """Logistic regression on the known rows (L2, balanced classes, C chosen by stratified
    cross-validation on the known rows only) -> decision scores of every row."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold

    if x.shape[1] == 0:
        return None, None
    y = known_labels
    n_pos, n_neg = int(y.sum()), int(y.size - y.sum())
    if n_pos == 0 or n_neg == 0:
        return None, None
    grid = (0.01, 0.1, 1.0, 10.0)
    x_known = x[known_rows]
    folds = min(5, n_pos, n_neg)
    best_c = 1.0
    if folds >= 2:
        splitter = StratifiedKFold(folds, shuffle=True, random_state=int(rng.integers(2**31)))
        splits = list(splitter.split(np.zeros(y.size), y))
        best = -1.0
        for c in grid:
            aucs = []
            for train, test in splits:
                model = LogisticRegression(C=c, class_weight="balanced", solver="liblinear")
                model.fit(x_known[train], y[train])
                aucs.append(roc_auc_score(y[test], model.decision_function(x_known[test])))
            if np.mean(aucs) > best:
                best, best_c = float(np.mean(aucs)), c
    model = LogisticRegression(C=best_c, class_weight="balanced", solver="liblinear")
    model.fit(x_known, y)
    return model.decision_function(x), best_c


def _rank01(score: np.ndarray) -> np.ndarray:
    order = np.argsort(np.argsort(score, kind="stable"), kind="stable")
    return (order + 0.5) / max(score.size, 1)


def infer_labels(view: PassiveView, own_features: np.ndarray, *, known_rows: np.ndarray,
                 known_labels: np.ndarray, rng: np.random.Generator) -> LabelScores:
    """The passive party's label scores from its view, its own features and the labels of
    ``known_rows`` only (0/1, positive = 1)."""
    own_features = np.asarray(own_features, dtype=np.float64)
    if own_features.shape[0] != view.n_rows:
        raise ValueError(f"own features have {own_features.shape[0]} rows; the view has {view.n_rows}")
    known_rows = np.asarray(known_rows, dtype=np.int64)
    known_labels = np.asarray(known_labels, dtype=np.float64)
    if known_rows.shape != known_labels.shape or np.unique(known_rows).size != known_rows.size \
            or (known_rows.size and (known_rows.min() < 0 or known_rows.max() >= view.n_rows)):
        raise ValueError("known_rows must be distinct row indices with one label each")
    if not np.isin(known_labels, (0.0, 1.0)).all():
        raise ValueError("known labels must be 0/1 (positive class = 1)")
    known_labels = known_labels.astype(np.int64)

    embedding, columns = transcript_embedding(view)
    surprisal, covered = split_surprisal(view)
    # the transcript's features: node memberships and the (label-free) split surprisal, the latter
    # standardised and scaled up so the L2 penalty does not drown one column among thousands
    features = embedding
    if covered.any() and surprisal.std() > 0:
        summary = SURPRISAL_SCALE * (surprisal - surprisal.mean()) / surprisal.std()
        features = sp.hstack([embedding, sp.csr_matrix(summary[:, None])], format="csr")
    own = own_feature_embedding(own_features)
    transcript, c_transcript = _fit_scores(features, known_rows, known_labels, rng)
    own_scores, c_own = _fit_scores(own, known_rows, known_labels, rng)
    combined, c_combined = _fit_scores(sp.hstack([features, own], format="csr"), known_rows, known_labels, rng)

    gradient, with_gradients = gradient_scores(view)
    unsupervised, method = None, None
    if with_gradients.any():
        # clear gradients name the labels: rank covered rows by -g (its sign is the label) and put
        # rows never in a sample in between, ordered by the classifier where there is one
        fallback = transcript if transcript is not None else np.zeros(view.n_rows)
        oracle = np.where(with_gradients, np.sign(gradient) * 2.0 + gradient, (_rank01(fallback) - 0.5))
        transcript = oracle
        unsupervised = np.where(with_gradients, gradient, 0.0)
        method = "clear gradients: mean of -g (logistic loss: -g > 0 exactly for positives)"
        combined = oracle if combined is None else np.where(with_gradients, oracle, _rank01(combined) - 0.5)
    elif covered.any():
        unsupervised = surprisal
        method = "split surprisal: rows carved off into small children score high (rare positives)"

    counts = {
        "n_rows": view.n_rows,
        "n_known": int(known_rows.size),
        "n_known_positive": int(known_labels.sum()),
        "n_scored": int(view.n_rows - known_rows.size),
        "n_trees_seen": len(view.trees),  # trees in its own view (not the model size)
        "n_node_sets": len(columns),
        "n_routing_questions": view.routing_questions,
        "n_rows_in_some_node_set": int(np.count_nonzero(np.diff(embedding.indptr))),
        "n_rows_with_clear_gradients": int(with_gradients.sum()),
        "embedding_columns": int(embedding.shape[1]),
        "own_feature_columns": int(own.shape[1]),
        "c_transcript": c_transcript, "c_own_features": c_own, "c_combined": c_combined,
        "opaque": dict(view.opaque),
    }
    return LabelScores(known_rows, transcript, own_scores, combined, unsupervised, method, counts)


# ---------------------------------------------------------------------------------------------
# Scoring (the auditor's side: the only place the truth is read)


def score_labels(scores: LabelScores, truth: np.ndarray) -> dict[str, Any]:
    """AUC of each setting on the rows that were not known."""
    from sklearn.metrics import roc_auc_score

    truth = np.asarray(truth)
    unknown = np.ones(truth.size, dtype=bool)
    unknown[scores.known_rows] = False
    y = truth[unknown].astype(np.int64)

    def auc(score: np.ndarray | None) -> float | None:
        if score is None or y.min() == y.max():
            return None
        return float(roc_auc_score(y, score[unknown]))

    return {
        "auc_transcript": auc(scores.transcript),
        "auc_own_features": auc(scores.own_features),
        "auc_combined": auc(scores.combined),
        "auc_unsupervised": auc(scores.unsupervised),
        "unsupervised_method": scores.unsupervised_method,
        "positive_rate": float(y.mean()) if y.size else None,
        **scores.counts,
    }


def binary_truth(labels: np.ndarray) -> np.ndarray | None:
    """The auditor's labels as 0/1 (positive = the larger of two sorted values, as ``encode_labels``
    does); None unless there are exactly two values."""
    labels = np.asarray(labels)
    distinct = np.unique(labels)
    if distinct.size != 2:
        return None
    return (labels == distinct[1]).astype(np.int64)


def label_attack(view: PassiveView, own_features: np.ndarray, truth: np.ndarray, *,
                 known_rows: np.ndarray | None = None, known_labels: np.ndarray | None = None,
                 known_share: float = KNOWN_FRACTION, rng: np.random.Generator,
                 with_scores: bool = False) -> dict[str, Any]:
    """Infer, then score against ``truth`` (the auditor's label of every row).

    The passive party's knowledge is ``known_rows`` with ``known_labels``; without them the
    auditor draws a uniform ``known_share`` of rows with ``rng`` and hands their labels (only
    theirs) to inference. ``truth`` is read for the other rows only after inference is done.
    Returns a flat, JSON-friendly report (plus the per-row ``scores`` with ``with_scores``);
    labels that are not binary give AUCs of None and a ``skipped`` reason."""
    labels = np.asarray(truth)
    if labels.shape != (view.n_rows,):
        raise ValueError(f"truth must hold one label per row ({view.n_rows}), not shape {labels.shape}")
    binary = binary_truth(labels)
    if binary is None:
        return {"auc_transcript": None, "auc_own_features": None, "auc_combined": None, "auc_unsupervised": None,
                "skipped": f"labels take {np.unique(labels).size} values; the label attack scores binary labels"}
    if known_rows is None:
        known_rows = choose_known_rows(view.n_rows, rng, known_share)
        known_labels = binary[known_rows]
    elif known_labels is None:
        raise ValueError("known_rows need known_labels")
    scores = infer_labels(view, own_features, known_rows=known_rows, known_labels=known_labels, rng=rng)
    report = score_labels(scores, binary)
    report["known_share"] = round(scores.known_rows.size / max(view.n_rows, 1), 6)
    if with_scores:
        report["scores"] = scores
    return report
