"""Inside the active party's strict enclave: the whole boosting run.

The enclave runs the same ``Booster`` and ``TreeGrower`` every protocol runs (so it grows
plain's trees), on labels, sample weights and columns its host loaded once. Labels,
weights, margins, gradients, node membership, leaf values and validation metrics never leave
it; what does is what ``publish`` says: progress (tree shape), sealed checkpoints and, at the
end, the model as the active party is entitled to it. Talking to the passive enclaves is an ocall: the training thread hands sealed records
to the host through a ``Bridge`` and waits for the host to bring the answers back.

Every tree runs ``max_depth`` levels of two exchanges each (scores, then partitions), split
or not, and every record covers every position of its level and every row of the run, so
the host and the passive hosts see the same schedule and sizes whatever the data.
"""

from __future__ import annotations

import json
import queue
import threading
import time

import numpy as np

from teeboost.config import BoostParams
from teeboost.core.boosting import Booster, BoostState, TreeProgress, Validation
from teeboost.core.constraints import ALL_SETS
from teeboost.core.grower import AppliedSplit, SplitFinder
from teeboost.core.loss import make_objective
from teeboost.core.model import Ensemble
from teeboost.core.predict import RoutingOracle
from teeboost.core.split import MAX_CATEGORY_BINS, NodeBest, bins_fit_counts, SplitCriteria, SplitInfo, best_splits, pick_global_best, split_gains
from teeboost.core.split import sampled_features
from teeboost.errors import ProtocolError, TeeboostError
from teeboost.transport import serde
from teeboost.protocols.strict.enclave import messages as sm
from teeboost.protocols.enclave.limits import PositionPaths, check_holders, held_names, party_constraints_of, scoring_limits
from teeboost.protocols.enclave.messages import pack_records, unpack_records
from teeboost.protocols.strict.enclave.oblivious import CODE_LEFT, CODE_RIGHT, CODE_STOP, children_histograms, go_left_all, pack_codes, position_histograms, update_positions

__all__ = ["Bridge", "ObliviousFinder", "StrictTrainer", "PublishedTrees", "published_ensemble"]


def _plain(value):
    """numpy scalars in published JSON become Python numbers."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not published")


class Bridge:
    """Ocalls between the training thread and the ecalls the host makes."""

    def __init__(self) -> None:
        self._out: queue.Queue = queue.Queue()
        self._in: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self.done = False

    # -- training thread

    def _emit(self, step: sm.StrictStep):
        self._out.put(step)
        return None if step.kind == "done" else self._in.get()

    def send(self, label: str, tree: int, records: dict[int, bytes]) -> None:
        self._emit(sm.StrictStep("send", label, tree, "", np.frombuffer(pack_records(records), dtype=np.uint8),
                                 np.empty(0, dtype=np.uint8)))

    def collect(self, label: str, tree: int) -> dict[int, bytes]:
        reply = self._emit(sm.StrictStep("collect", label, tree, "", np.empty(0, dtype=np.uint8),
                                         np.empty(0, dtype=np.uint8)))
        if not isinstance(reply, sm.StrictReplies):
            raise ProtocolError(f"the host did not bring the answers to {label!r}")
        return unpack_records(reply.records.tobytes())

    def publish(self, kind: str, tree: int, info: dict, blob: bytes = b"") -> None:
        self._emit(sm.StrictStep(kind, "", tree, json.dumps(info, default=_plain), np.empty(0, dtype=np.uint8),
                                 np.frombuffer(blob, dtype=np.uint8)))

    # -- ecalls

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self, job) -> bytes:
        if self._thread is not None:
            raise ProtocolError("training already started")

        def run():
            try:
                job()
            except BaseException as exc:  # noqa: BLE001 - handed to the ecall that waits
                self._out.put(exc)

        self._thread = threading.Thread(target=run, name="strict-training", daemon=True)
        self._thread.start()
        return self._next()

    def step(self, payload: bytes) -> bytes:
        if self._thread is None or self.done:
            raise ProtocolError("no training is under way")
        self._in.put(serde.decode(payload) if payload else None)
        return self._next()

    def _next(self) -> bytes:
        item = self._out.get()
        if isinstance(item, TeeboostError):
            self.done = True
            raise item
        if isinstance(item, BaseException):
            self.done = True
            raise ProtocolError(f"training failed inside the enclave: {type(item).__name__}: {item}")
        if item.kind == "done":
            self.done = True
        return serde.encode(item)


class ObliviousFinder(SplitFinder):
    """Split finding across the strict enclaves; positions are heap indices within a level."""

    def __init__(self, bridge: Bridge, session, bins: np.ndarray, n_value_bins: np.ndarray, categorical: np.ndarray,
                 n_train: int, criteria: SplitCriteria, max_depth: int, outputs: int) -> None:
        self.bridge = bridge
        self.session = session
        self.peers = list(session.peers)
        self.bins = bins
        self.n_value_bins = n_value_bins
        self.categorical = categorical
        self.max_bin = session.max_bin
        self.width = session.max_bin + 1
        self.n_rows = bins.shape[1]
        self.n_train = n_train
        self.criteria = criteria
        self.max_depth = max_depth
        self.outputs = outputs
        self.records: dict[int, tuple[int, int, bool, int]] = {}  # own id -> feature, bin, default left, tree
        self.routes: dict[tuple[int, int], np.ndarray] = {}  # (party, record) -> went left, every row
        self.seen: dict[int, set[int]] = {p: set() for p in self.peers}
        self.timer = {"own histograms": 0.0, "waiting for peers": 0.0}
        self.broken = False
        self.max_passive_features = 0  # the label owner's cap, sent with every level record
        self.constraints = None  # its own columns' (PartyConstraints), under the run's constraints
        self.constrained = False  # the run has constraints: every level carries bounds and sets
        self.paths = PositionPaths()  # its own columns on each position's path
        self.own_held: list[str] = []  # the constrained names among its own columns
        self.holders_checked = False
        self._limits = None  # this level's NodeLimits (from the grower)

    # -- channel helpers

    def _send(self, label: str, frames: dict[int, bytes]) -> None:
        self.bridge.send(label, self.tree, {p: self.session.channel(p).seal(f) for p, f in frames.items()})

    def _collect(self, label: str, cls: type) -> dict[int, object]:
        started = time.perf_counter()
        records = self.bridge.collect(label, self.tree)
        self.timer["waiting for peers"] += time.perf_counter() - started
        if sorted(records) != self.peers:
            raise ProtocolError(f"answers to {label!r} must come from every passive party")
        out = {}
        for party, record in records.items():
            msg = sm.expect(self.session.channel(party).open(record), cls, f"party {party}")
            if msg.tree != self.tree or msg.depth != self.depth:
                raise ProtocolError(f"party {party} answered for level {msg.depth} of tree {msg.tree}")
            out[party] = msg
        return out

    # -- SplitFinder

    def begin_tree(self, tree_index, rows, gradients):
        if tree_index % self.outputs == 0:
            self.routes = {}  # the oracle answers only about the round being grown
        n = self.n_rows
        self.tree, self.depth = tree_index, 0
        self.codec = gradients.codec
        self.g = np.zeros(n, dtype=np.int64)
        self.h = np.zeros(n, dtype=np.int64)
        self.g[:self.n_train], self.h[:self.n_train] = gradients.g, gradients.h
        self.weight = np.zeros(n, dtype=bool)
        self.weight[rows] = True
        self.positions = np.zeros(n, dtype=np.int64)
        self.position_of = {0: 0}
        self.codes = np.zeros(n, dtype=np.uint8)
        self.parent_split = np.ones(1, dtype=bool)
        self.scored = False
        self.paths.reset()
        self._limits, self._limits_nodes = None, []

    def _position_limits(self) -> tuple[np.ndarray, np.ndarray]:
        """Every position's weight bounds and interaction sets at this depth: the grower's for
        its nodes, unbounded and unconstrained for padding (empty arrays without constraints)."""
        if not self.constrained:
            return np.zeros((0, 2)), np.zeros(0, dtype=np.int64)
        n = 2 ** self.depth
        bounds = np.tile(np.array([-np.inf, np.inf]), (n, 1))
        sets = np.full(n, ALL_SETS, dtype=np.int64)
        if self._limits is not None:
            for node in self._limits_nodes:
                k = self.position_of[node]
                bounds[k], sets[k] = self._limits.bounds[node], self._limits.sets[node]
        return bounds, sets

    def _level_frame(self, bounds: np.ndarray, sets: np.ndarray) -> bytes:
        empty = np.empty(0, dtype=np.uint8)
        if self.depth == 0:
            return serde.encode(sm.StrictLevel(self.tree, 0, self.n_train,
                                               np.array([self.codec.frac_bits], dtype=np.int64),
                                               sm.pack_fixed(self.g), sm.pack_fixed(self.h),
                                               sm.bits_of(self.weight), empty, empty, self.max_passive_features,
                                               bounds, sets))
        return serde.encode(sm.StrictLevel(self.tree, self.depth, self.n_train, np.empty(0, dtype=np.int64), empty,
                                           empty, empty,
                                           pack_codes(self.codes), sm.bits_of(self.parent_split),
                                           self.max_passive_features, bounds, sets))

    def _score_level(self) -> None:
        """Both sides score every position of this depth; the peers' answers are checked."""
        bounds, sets = self._position_limits()
        frame = self._level_frame(bounds, sets)
        self._send("level", {p: frame for p in self.peers})
        started = time.perf_counter()
        if self.depth == 0:
            hist = position_histograms(self.bins, self.width, self.positions, np.array([0]), self.g, self.h,
                                       self.weight)
        else:
            hist = children_histograms(self.bins, self.width, self.positions, self.hist, self.parent_split, self.g,
                                       self.h, self.weight)
        self.hist = hist
        self.own = best_splits(hist, self.n_value_bins, self.codec, self.criteria, self.categorical,
                               sampled_features(self.criteria, 0, self.tree, self.n_value_bins.size),
                               **scoring_limits(self.constraints, self.paths.paths, bounds, sets),
                               every_candidate=True)  # data-independent accesses
        self.timer["own histograms"] += time.perf_counter() - started
        n = 2 ** self.depth
        self.theirs = self._collect("level", sm.StrictCandidates)
        if self.constrained and not self.holders_checked:  # every constrained name held exactly once
            try:
                held = {p: json.loads(m.held) for p, m in self.theirs.items()}
            except ValueError:
                raise ProtocolError("a passive party sent unreadable column names") from None
            check_holders(self.session.constraints, {0: self.own_held, **held})
            self.holders_checked = True
        totals = hist[:, 0].sum(axis=1)  # (positions, 3): every feature's bins add up to the node
        for party, msg in self.theirs.items():
            if msg.gains.size != n or msg.handles.size != n or msg.left_sums.shape != (n, 3):
                raise ProtocolError(f"party {party} scored {msg.gains.size} positions, the level has {n}")
            limits = {}
            if self.constrained:
                if msg.directions.shape != (n,) or msg.memberships.shape != (n,) or np.any(np.abs(msg.directions) > 1):
                    raise ProtocolError(f"party {party} sent its candidates' constraints for another level")
                limits = {"lower": bounds[:, 0], "upper": bounds[:, 1], "direction": msg.directions.astype(np.int64)}
            recomputed = split_gains(msg.left_sums, totals, self.codec, self.criteria, **limits)
            finite = np.isfinite(msg.gains)
            if np.any(finite & (recomputed != msg.gains)):
                raise ProtocolError(f"party {party} claimed a gain its split's sums do not have")
        self.scored = True

    def find_splits(self, nodes, node_rows, limits=None):
        self._node_rows = node_rows
        self._limits, self._limits_nodes = limits, list(nodes)
        self._guarded(self._score_level)
        found: list[SplitInfo | None] = []
        for node in nodes:
            k = self.position_of[node]
            options = [(0, self.own[k])] + [(p, NodeBest(float(m.gains[k]), -1, -1, False))
                                            for p, m in sorted(self.theirs.items())]
            winner = pick_global_best(options)
            if winner is None:
                found.append(None)
            elif winner[0] == 0:
                best = winner[1]
                found.append(SplitInfo(node, 0, best.gain, best.feature, best.bin, best.default_left))
            else:
                party = winner[0]
                found.append(SplitInfo(node, party, winner[1].gain, -1, -1, False,
                                       handle=int(self.theirs[party].handles[k])))
        return found

    def apply_splits(self, splits, children, *, next_min_rows=0):
        return self._guarded(self._partition, splits, children)

    def _guarded(self, step, *args):
        """A failed exchange leaves the level half done: the tree must not be padded after it."""
        try:
            return step(*args)
        except BaseException:
            self.broken = True
            raise

    def _partition(self, splits: list[SplitInfo], children: list[tuple[int, int]]) -> list[AppliedSplit]:
        n = 2 ** self.depth
        winner = np.full(n, -1, dtype=np.int64)
        for split in splits:
            winner[self.position_of[split.node_id]] = split.party
        frames = {}
        for p in self.peers:
            mine = winner == p
            handles = np.where(mine, self.theirs[p].handles, np.uint64(0)).astype(np.uint64)
            frames[p] = serde.encode(sm.StrictDecision(self.tree, self.depth, mine.astype(np.uint8), handles))
        self._send("split", frames)
        own = [self.own[k] for k in range(n)]
        left = go_left_all(self.bins, self.positions, self.max_bin,
                           np.array([max(b.feature, 0) for b in own], dtype=np.int64),
                           np.array([b.bin for b in own], dtype=np.int64),
                           np.array([b.default_left for b in own], dtype=bool), winner == 0, self.categorical)
        parts = self._collect("split", sm.StrictPartition)
        records = np.zeros(n, dtype=np.int64)
        for party, msg in parts.items():
            theirs = sm.from_bits(msg.left, self.n_rows, f"partition of party {party}")
            won = np.zeros(self.n_rows, dtype=bool)
            for k in np.flatnonzero(winner == party):
                won |= self.positions == k
            if msg.records.size != n or np.any(theirs & ~won):
                raise ProtocolError(f"party {party} partitioned rows of nodes it did not win")
            for k in np.flatnonzero(winner == party):
                at = (self.positions == k) & theirs & self.weight
                sums = np.array([np.dot(at, self.g), np.dot(at, self.h), int(at.sum())], dtype=np.int64)
                if not np.array_equal(sums, self.theirs[party].left_sums[k]):
                    raise ProtocolError(f"party {party} partitioned a node differently from the split it scored")
                record = int(msg.records[k])
                if record <= 0 or record in self.seen[party]:
                    raise ProtocolError(f"party {party} returned split record id {record}, not a fresh one")
                self.seen[party].add(record)
                records[k] = record
            left |= theirs
        for k in np.flatnonzero(winner == 0):
            best = own[k]
            records[k] = max(self.records, default=-1) + 1
            self.records[records[k]] = (best.feature, best.bin, best.default_left, self.tree)
        # every row's move, computed for every position
        split_here = np.zeros(self.n_rows, dtype=bool)
        for k in range(n):
            split_here |= (self.positions == k) & bool(winner[k] >= 0)
        self.codes = np.where(split_here, np.where(left, CODE_LEFT, CODE_RIGHT), CODE_STOP).astype(np.uint8)
        self.parent_split = winner >= 0
        self.paths.descend(winner == 0, np.array([max(b.feature, 0) for b in own], dtype=np.int64))
        applied = []
        for split, (left_id, right_id) in zip(splits, children):
            k = self.position_of[split.node_id]
            self.routes[(split.party, int(records[k]))] = left  # one array per level, shared by its splits
            self.position_of[left_id], self.position_of[right_id] = 2 * k, 2 * k + 1
            rows = self._node_rows.rows(split.node_id)
            applied.append(AppliedSplit(int(records[k]), left[rows], *self._won_constraints(split.party, k)))
        self.positions = update_positions(self.positions, self.codes)
        self.depth += 1
        self.scored = False
        return applied

    def _won_constraints(self, party: int, k: int) -> tuple[int, int]:
        """The public direction and interaction sets of the column that won position ``k``."""
        if not self.constrained:
            return 0, 0
        if party == 0:
            feature = self.own[k].feature
            return int(self.constraints.directions[feature]), int(self.constraints.membership[feature])
        return int(self.theirs[party].directions[k]), int(self.theirs[party].memberships[k])

    def end_tree(self):
        """Pad the tree to ``max_depth`` levels: the same exchanges as a full tree."""
        if self.broken:
            return
        if self.scored:
            self._partition([], [])
        while self.depth < self.max_depth:
            self._score_level()
            self._partition([], [])

    def went_left(self, party: int, record: int, rows: np.ndarray) -> np.ndarray:
        left = self.routes.get((party, record))
        if left is None:
            raise ProtocolError(f"no route for record {record} of party {party} in this round")
        return left[rows]


class RoundOracle(RoutingOracle):
    """Routes rows through the round's trees from the partitions the enclave already holds:
    training rows the sample left out (offset 0) and validation rows (offset n_train)."""

    def __init__(self, finder: ObliviousFinder, offset: int) -> None:
        self.finder = finder
        self.offset = offset

    def route(self, questions):
        return {party: [self.finder.went_left(party, int(record), np.asarray(rows) + self.offset)
                        for record, rows in asked] for party, asked in questions.items()}


def published_ensemble(ensemble: Ensemble) -> dict:
    """The model the active party is entitled to: tree shapes, owners, record ids and leaf
    values; gains, node sizes and covers stay inside (they are statistics of the partitions)."""
    data = json.loads(json.dumps(ensemble.to_dict(), default=_plain))  # plain JSON types: one canonical digest
    data.pop("best_score", None)  # a validation metric: not published (see ``_run``)
    for tree in data["trees"]:
        _withhold_statistics(tree)
    return data


def _withhold_statistics(tree: dict) -> dict:
    tree["gain"] = [0.0] * len(tree["gain"])
    tree["n_rows"] = [0] * len(tree["n_rows"])
    tree["cover"] = [0.0] * len(tree["cover"])
    return tree


class PublishedTrees:
    """``published_ensemble`` for a checkpoint every round, each finished tree turned into
    JSON once: the whole ensemble each round was quadratic in the trees (1.3 of a strict
    active enclave's 12 s at 1e4 rows x 100 trees, py-spy, 2026-12-07). A tree is taken
    from the cache only while it is the same object with the same shape and the same printed leaves."""

    def __init__(self) -> None:
        self._texts: dict[int, tuple] = {}

    def text(self, ensemble: Ensemble) -> str:
        """JSON text of ``published_ensemble(ensemble)``, ready to stand in a larger document."""
        head = ensemble.to_dict() | {"trees": []}
        head.pop("best_score", None)
        head = json.dumps(json.loads(json.dumps(head, default=_plain)))
        texts, seen = [], {}
        for tree in ensemble.trees:
            key = (tree.output, tuple(tree.left), tuple(tree.right), tuple(tree.party), tuple(tree.record),
                   repr(tree.value))  # not ==: 0.0 and -0.0, or 1 and 1.0, are equal and print differently
            kept = self._texts.get(id(tree))
            if kept is None or kept[0] is not tree or kept[1] != key:
                kept = (tree, key, json.dumps(_withhold_statistics(json.loads(json.dumps(tree.to_dict(),
                                                                                       default=_plain)))))
            seen[id(tree)] = kept
            texts.append(kept[2])
        self._texts = seen  # trees dropped (an early stop truncated them) go
        return head.replace('"trees": []', '"trees": [' + ", ".join(texts) + "]")


class StrictTrainer:
    """One training run inside the active enclave, from ``StrictActiveLoad``."""

    def __init__(self, session, load: sm.StrictActiveLoad, seal, unseal) -> None:
        params = BoostParams(**json.loads(load.params))
        # weighted is derived from what was loaded, not taken from the host: passive parties' policies
        # trusted the attested criteria's word, so a host that attested an unweighted run may not weigh rows
        weighted = SplitCriteria.rows_weighted(params.scale_pos_weight, load.weights, load.valid_weights)
        if weighted and not session.criteria.weighted:
            raise ProtocolError("the enclave was attested for an unweighted run, and its host loaded sample "
                                "weights (or scale_pos_weight) other than 1")
        criteria = SplitCriteria.from_params(params, weighted=weighted)
        if criteria != session.criteria or params.max_bin != session.max_bin:
            raise ProtocolError("the training parameters are not the ones this enclave was attested for")
        n_rows = load.n_train + load.n_valid
        binned = np.ascontiguousarray(load.binned)
        if load.n_train < 1 or load.n_valid < 0 or load.labels.size != load.n_train \
                or load.valid_labels.size != load.n_valid or binned.shape != (load.n_value_bins.size, n_rows) \
                or (binned.size and int(binned.max()) > params.max_bin) or np.any(load.n_value_bins < 1) \
                or load.categorical.shape != load.n_value_bins.shape \
                or np.any(load.categorical & (load.n_value_bins > MAX_CATEGORY_BINS)) \
                or not bins_fit_counts(binned, load.n_value_bins, params.max_bin) \
                or not np.all(np.isfinite(load.labels)) or not np.all(np.isfinite(load.valid_labels)):
            raise ProtocolError("the training data given to the enclave is inconsistent")
        for given, count in ((load.weights, load.n_train), (load.valid_weights, load.n_valid)):
            if given.size != count or not np.all(np.isfinite(given)) or np.any(given < 0):
                raise ProtocolError("the sample weights given to the enclave are not one finite weight >= 0 per row")
        if not np.any(load.weights > 0):
            raise ProtocolError("every sample weight given to the enclave is zero")
        self.weights = None if np.all(load.weights == 1) else load.weights.copy()
        self.valid_weights = None if np.all(load.valid_weights == 1) else load.valid_weights.copy()
        self.session = session
        self.params = params
        self.load = load
        self.classes = json.loads(load.classes)
        if params.objective not in (None, load.objective):
            raise ProtocolError(f"the host loaded objective {load.objective!r}, "
                                f"the parameters name {params.objective!r}")
        self.objective = make_objective(load.objective, len(self.classes) if self.classes else 2,
                                        **params.objective_options())
        if self.objective.n_outputs != load.outputs:
            raise ProtocolError("the objective's outputs do not match")
        self.metrics = params.metrics_for(self.objective.name)
        self.bridge = Bridge()
        self.finder = ObliviousFinder(self.bridge, session, binned.astype(np.intp), load.n_value_bins.copy(),
                                      load.categorical.copy(), load.n_train, criteria, params.max_depth, self.objective.n_outputs)
        if load.max_passive_features < 0:
            raise ProtocolError("max_passive_features must be >= 0")
        self.finder.max_passive_features = int(load.max_passive_features)
        self.finder.constraints = party_constraints_of(session.constraints, load.names, load.n_value_bins.size)
        self.finder.constrained = session.constraints.any
        self.finder.own_held = held_names(session.constraints, load.names) if session.constraints.any else []
        self.seal, self.unseal = seal, unseal
        self.state: BoostState | None = None
        self._published = PublishedTrees()

    # -- checkpoints (sealed, opaque to the host)

    def _checkpoint_blob(self, state: BoostState) -> bytes:
        trees = state.ensemble.trees
        meta = {"ensemble": "@ENSEMBLE@", "rng_state": state.rng_state, "next_round": state.next_round,
                "records": [[i, *r] for i, r in sorted(self.finder.records.items())]}
        best = np.array([np.nan if state.best_value is None else state.best_value, state.best_round], dtype=np.float64)
        valid = state.valid_margin if state.valid_margin is not None else np.zeros((0, 0))
        evals = np.array([state.evals.get(m, []) for m in self.metrics], dtype=np.float64).reshape(len(self.metrics), -1)
        frame = serde.encode(sm.StrictCheckpoint(
            json.dumps(meta, default=_plain).replace('"@ENSEMBLE@"', self._published.text(state.ensemble), 1), np.array([g for t in trees for g in t.gain], dtype=np.float64),
            np.array([n for t in trees for n in t.n_rows], dtype=np.int64), best, state.margin, valid, evals))
        return self.seal(frame, self.session.context + b"strict-active-checkpoint")

    def restore(self, blob: bytes) -> int:
        saved = sm.expect(self.unseal(blob, self.session.context + b"strict-active-checkpoint"),
                          sm.StrictCheckpoint, "the sealed checkpoint")
        meta = json.loads(saved.state)
        ensemble = Ensemble.from_dict(meta["ensemble"])
        at = 0
        for tree in ensemble.trees:
            n = tree.n_nodes
            tree.gain = [float(g) for g in saved.gains[at:at + n]]
            tree.n_rows = [int(r) for r in saved.n_rows[at:at + n]]
            at += n
        best_value = None if np.isnan(saved.best[0]) else float(saved.best[0])
        if saved.evals.shape[0] != len(self.metrics):
            raise ProtocolError("the sealed checkpoint's validation history has other metrics")
        evals = {m: [float(v) for v in row] for m, row in zip(self.metrics, saved.evals)} if saved.evals.size else {}
        self.state = BoostState(ensemble, saved.margin.copy(), meta["rng_state"], int(meta["next_round"]),
                                saved.valid_margin.copy() if self.load.n_valid else None, best_value,
                                int(saved.best[1]), evals)
        self.finder.records = {int(i): (int(f), int(b), bool(d), int(t)) for i, f, b, d, t in meta["records"]}
        return len(ensemble.trees)

    # -- the run

    def start(self) -> bytes:
        return self.bridge.start(self._run)

    def _run(self) -> None:
        load, params, bridge, finder = self.load, self.params, self.bridge, self.finder

        def on_tree(progress: TreeProgress) -> None:
            bridge.publish("progress", progress.tree_index, {
                "tree_index": progress.tree_index, "round_index": progress.round_index, "output": progress.output,
                "n_leaves": progress.n_leaves, "seconds": progress.seconds,
                # no validation metric: with validation rows of the host's choosing it would be a prediction
                # oracle; early stopping happens in here and only its outcome (the model's size) is published
                "valid_metric": None})

        def on_round(state: BoostState) -> None:
            bridge.publish("checkpoint", len(state.ensemble.trees) - 1, {"n_trees": len(state.ensemble.trees)},
                           self._checkpoint_blob(state))

        def on_truncate(keep: int) -> None:
            finder.records = {i: r for i, r in finder.records.items() if r[3] < keep}

        booster = Booster(params, self.objective, finder, RoundOracle(finder, 0), on_tree=on_tree,
                          on_truncate=on_truncate)
        validation = (Validation(load.valid_labels, RoundOracle(finder, load.n_train), self.valid_weights)
                      if load.n_valid else None)
        ensemble = booster.fit(load.labels, classes=self.classes, validation=validation, state=self.state,
                               on_round=on_round, sample_weight=self.weights)
        n_trees = len(ensemble.trees)
        finder.tree = n_trees
        published = published_ensemble(ensemble)
        finish = serde.encode(sm.StrictFinish(n_trees, sm.model_digest(published)))
        bridge.send("finish", n_trees, {p: self.session.channel(p).seal(finish) for p in finder.peers})
        own = [[i, *r] for i, r in sorted(finder.records.items())]
        bridge.publish("done", n_trees, {"ensemble": published, "records": own, "timer": finder.timer})
