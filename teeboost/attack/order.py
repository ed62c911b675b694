"""Stage 1: each passive feature's per-sample bin, inferred from a transcript.

Unknown: for every training row i and the attacked feature, its bin. Observed: for every node
whose histogram the active party saw (decrypted under SecureBoost, in the clear under plain),
and every bin b, three exact integer sums over the node's rows in that bin: the count, the sum
of the active party's fixed-point g and the sum of its h. A passive split whose (feature, bin)
the active party learnt adds hard constraints: left rows are at or below the bin, right rows
above (and the missing bin goes with the learnt default side).

Two stages, the first exact, the second probabilistic:

1. Cells. Within one tree the observed nodes are nested or disjoint; a node's sums minus its
   observed children's sums are the sums of its *cell* (its rows that no observed child holds).
   The cells partition the tree's sample and carry exactly the same information as the nodes,
   in smaller pieces.
2. Exact propagation to a fixed point. For every (cell, bin): subtract the rows already pinned
   to that bin (peeling: a row pinned anywhere shrinks every cell of every tree it is in, each
   with that tree's own g and h); then a bin with nothing left excludes every remaining row, a
   bin that needs all its remaining candidates takes them, a row with one allowed bin is in it,
   and otherwise the exact meet-in-the-middle subset-sum (``subset_sum``) over the candidates
   (grouped by equal (g, h)) says which rows are in every solution (pinned) or none (excluded)
   and which value groups contribute a fixed number of rows in every solution. Such a fixed
   count is itself a new exact constraint (a *derived set*: "exactly k of these rows are in bin
   b"); for the first tree of a binary task, whose gradients take two values, these are the
   label-conditional bin counts. Only what every consistent assignment agrees on is pinned.
3. EM for the rest: the Shepp-Vardi / generalised iterative scaling update for non-negative
   linear inverse problems, P <- P * A^T(obs / A P) / A^T 1, each row renormalised over its
   allowed bins, on the sums left after peeling, with a sparse A (cells and derived sets x
   unpinned rows) and rows that no observation can tell apart collapsed into one. Its fixed
   points match every observed sum; exchangeable rows keep equal distributions.

With no histograms (N-TEE, 1-TEE) nothing but split constraints can move P away from uniform.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..metrics import spearman
from .subset_sum import DEFAULT_MAX_HALF, INFEASIBLE, solve_subset_sum
from .view import ActiveView

__all__ = ["BinPosterior", "ExactResult", "Observation", "exact_propagation", "infer_bins", "recovery"]


@dataclass
class BinPosterior:
    probabilities: np.ndarray  # (n_rows, width): P[row, bin]; the last column is the missing bin
    n_value_bins: int
    constraints: int  # observed sums used
    split_constraints: int
    pinned: int = 0  # rows whose bin the exact stage proved
    pinned_rows: np.ndarray | None = None  # bool per row: proved by the exact stage
    seconds: float = 0.0
    iterations: int = 0  # EM iterations run
    derived_constraints: int = 0  # fixed-count value groups found by the subset-sum solver

    @property
    def missing_bin(self) -> int:
        return self.probabilities.shape[1] - 1

    def expected_value_bin(self) -> np.ndarray:
        """E[bin | not missing], the score the attack orders samples by."""
        p = self.probabilities[:, : self.n_value_bins]
        total = p.sum(axis=1)
        safe = np.where(total > 0, total, 1.0)
        return (p * np.arange(self.n_value_bins)).sum(axis=1) / safe

    def likely_missing(self) -> np.ndarray:
        return self.probabilities[:, self.missing_bin] > 0.5

    def determined(self, tolerance: float = 1e-6) -> np.ndarray:
        return self.probabilities.max(axis=1) >= 1.0 - tolerance


def _allowed(view: ActiveView, party: int, feature: int, width: int, n_value_bins: int) -> tuple[np.ndarray, int]:
    allowed = np.zeros((view.n_rows, width), dtype=bool)
    allowed[:, :n_value_bins] = True
    allowed[:, width - 1] = True
    used = 0
    for split in view.splits:
        if split.party != party or split.feature != feature:
            continue
        used += 1
        left, right = split.left_rows, split.right_rows
        if split.categorical:  # a category subset: left rows are in its bins, right rows are not
            in_subset = np.array([(split.bin >> b) & 1 for b in range(n_value_bins)], dtype=bool)
            allowed[np.ix_(left, np.flatnonzero(~in_subset))] = False
            allowed[np.ix_(right, np.flatnonzero(in_subset))] = False
        else:
            allowed[np.ix_(left, np.arange(split.bin + 1, n_value_bins))] = False
            allowed[np.ix_(right, np.arange(0, split.bin + 1))] = False
        allowed[left if not split.default_left else right, width - 1] = False
    return allowed, used


@dataclass
class Observation:
    """Exact per-bin sums over a set of rows: ``sums[b] = (sum g, sum h, count)`` of the rows in
    bin b (the layout of a histogram note), with each row's own ``g`` and ``h``. ``known[b]``
    False: bin b's sums are not observed (default: all observed)."""

    rows: np.ndarray
    g: np.ndarray
    h: np.ndarray
    sums: np.ndarray
    known: np.ndarray | None = None
    tree: int = -1

    def __post_init__(self) -> None:
        self.rows = np.asarray(self.rows, dtype=np.int64)
        self.g = np.asarray(self.g, dtype=np.int64)
        self.h = np.asarray(self.h, dtype=np.int64)
        self.sums = np.asarray(self.sums, dtype=np.int64)
        if self.known is None:
            self.known = np.ones(self.sums.shape[0], dtype=bool)


class InconsistentTranscript(ValueError):
    pass


def _inconsistent(what: str) -> InconsistentTranscript:
    return InconsistentTranscript(f"transcript is inconsistent with the observed bin sums ({what})")


def _cells(view: ActiveView, party: int, feature: int) -> tuple[list[Observation], int]:
    """Each tree's observed nodes cut into cells (see the module doc); also the number of
    observed nodes. A tree whose node sets are not nested is used node by node instead."""
    by_tree: dict[int, dict[int, np.ndarray]] = {}
    for note in view.histograms:
        if note.party != party:
            continue
        nodes = by_tree.setdefault(int(note.tree), {})
        for i, node in enumerate(note.nodes.tolist()):
            nodes[int(node)] = note.sums[i, feature].astype(np.int64)
    cells: list[Observation] = []
    observed = 0
    owner = np.full(view.n_rows, -1, dtype=np.int64)
    for t, nodes in sorted(by_tree.items()):
        tree = view.trees[t]
        items = sorted(((int(tree.node_rows[n].size), n) for n in nodes), key=lambda x: (-x[0], x[1]))
        observed += len(items)
        rows_of = [np.asarray(tree.node_rows[n], dtype=np.int64) for _, n in items]
        sums_of = [nodes[n] for _, n in items]
        parent = []
        laminar = True
        for index, rows in enumerate(rows_of):
            if rows.size == 0:
                parent.append(-1)
                continue
            above = owner[rows]
            if above.min() != above.max():
                laminar = False
                break
            parent.append(int(above[0]))
            owner[rows] = index
        if not laminar:
            for rows in rows_of:
                owner[rows] = -1
            for rows, sums in zip(rows_of, sums_of):
                if rows.size:
                    cells.append(Observation(rows, tree.g[rows], tree.h[rows], sums, tree=t))
            continue
        cell_sums = [s.copy() for s in sums_of]
        for index, up in enumerate(parent):
            if up >= 0:
                cell_sums[up] -= sums_of[index]
        for index, rows in enumerate(rows_of):
            mine = rows[owner[rows] == index] if rows.size else rows
            if mine.size:
                cells.append(Observation(mine, tree.g[mine], tree.h[mine], cell_sums[index], tree=t))
            elif np.any(cell_sums[index]):
                raise _inconsistent(f"tree {t}: children's sums exceed their parent's")
        for rows in rows_of:
            owner[rows] = -1
    return cells, observed


class _Sets:
    """All exact constraint sets (cells and derived sets) as sparse membership matrices."""

    def __init__(self, n_rows: int, width: int):
        self.n_rows, self.width = n_rows, width
        self.rows: list[np.ndarray] = []
        self.g: list[np.ndarray] = []
        self.h: list[np.ndarray] = []
        self._derived: list[bool] = []
        self._target = np.zeros((16, 3, width), dtype=np.int64)  # (set, [count, g, h], bin)
        self._known = np.zeros((16, width), dtype=bool)
        self._built = -1

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def target(self) -> np.ndarray:
        return self._target[: len(self.rows)]

    @property
    def known(self) -> np.ndarray:
        return self._known[: len(self.rows)]

    @property
    def derived(self) -> np.ndarray:
        return np.array(self._derived, dtype=bool)

    def add(self, rows, g, h, counts, g_sums, h_sums, known, derived=False) -> int:
        index = len(self.rows)
        if index == self._known.shape[0]:
            self._target = np.concatenate([self._target, np.zeros_like(self._target)])
            self._known = np.concatenate([self._known, np.zeros_like(self._known)])
        self.rows.append(rows)
        self.g.append(g)
        self.h.append(h)
        self._derived.append(derived)
        self._target[index] = np.stack([counts, g_sums, h_sums])
        self._known[index] = known
        return index

    def build(self) -> None:
        if self._built == len(self.rows):
            return
        sizes = np.array([r.size for r in self.rows], dtype=np.int64)
        indptr = np.concatenate([[0], np.cumsum(sizes)])
        cols = np.concatenate(self.rows) if self.rows else np.zeros(0, dtype=np.int64)
        shape = (len(self.rows), self.n_rows)
        self.m = sp.csr_matrix((np.ones(cols.size, dtype=np.int64), cols, indptr), shape=shape)
        self.mg = sp.csr_matrix((np.concatenate(self.g) if self.g else cols, cols, indptr), shape=shape)
        self.mh = sp.csr_matrix((np.concatenate(self.h) if self.h else cols, cols, indptr), shape=shape)
        self.mt = self.m.T.tocsr()
        self._built = len(self.rows)

    def residual(self, pinned: np.ndarray) -> np.ndarray:
        """Targets minus the pinned rows' contributions: (set, [count, g, h], bin)."""
        self.build()
        rows = np.flatnonzero(pinned >= 0)
        onehot = sp.csr_matrix((np.ones(rows.size, dtype=np.int64), (rows, pinned[rows])),
                               shape=(self.n_rows, self.width))
        taken = np.stack([(m @ onehot).toarray() for m in (self.m, self.mg, self.mh)], axis=1)
        return self.target - taken


@dataclass
class ExactResult:
    pinned: np.ndarray  # bin per row, -1 where not proved
    sets: _Sets = field(repr=False)
    solver_calls: int = 0
    solver_unknown: int = 0
    derived: int = 0


def _pin(allowed: np.ndarray, pinned: np.ndarray, rows: np.ndarray, bins: np.ndarray) -> None:
    if not allowed[rows, bins].all():
        raise _inconsistent("a row is proved to be in a bin it cannot be in")
    allowed[rows] = False
    allowed[rows, bins] = True
    pinned[rows] = bins


def _cheap_rules(allowed: np.ndarray, pinned: np.ndarray, sets: _Sets) -> bool:
    """Zero counts, full counts and single allowed bins, vectorised over all sets, to a fixed
    point. Returns whether anything changed."""
    changed = False
    sets.build()
    while True:
        step = False
        free = pinned < 0
        n_allowed = allowed.sum(axis=1)
        if np.any(n_allowed == 0):
            raise _inconsistent("a row has no bin left")
        single = np.flatnonzero(free & (n_allowed == 1))
        if single.size:
            _pin(allowed, pinned, single, allowed[single].argmax(axis=1))
            free[single] = False
            step = True
        if len(sets):
            residual = sets.residual(pinned)
            count = residual[:, 0]
            candidates = (sets.m @ (allowed & free[:, None]).astype(np.int64))
            known = sets.known
            if np.any(known & ((count < 0) | (count > candidates))):
                raise _inconsistent("a bin needs more rows than it can hold")
            if np.any(known & (count == 0) & ((residual[:, 1] != 0) | (residual[:, 2] != 0))):
                raise _inconsistent("an empty bin has a non-zero sum")
            zero = known & (count == 0) & (candidates > 0)
            full = known & (count == candidates) & (candidates > 0)
            if zero.any():
                forbid = ((sets.mt @ zero.astype(np.int64)) > 0) & allowed & free[:, None]
                if forbid.any():
                    allowed[forbid] = False
                    step = True
            if full.any():
                take = ((sets.mt @ full.astype(np.int64)) > 0) & allowed & free[:, None]
                rows = np.flatnonzero(take.any(axis=1))
                if rows.size:
                    if np.any(take[rows].sum(axis=1) > 1):
                        raise _inconsistent("a row is needed in two bins")
                    _pin(allowed, pinned, rows, take[rows].argmax(axis=1))
                    step = True
        if not step:
            return changed
        changed = True


def exact_propagation(allowed: np.ndarray, observations: list[Observation], *, max_half: int = DEFAULT_MAX_HALF,
                      max_candidates: int = 1 << 20) -> ExactResult:
    """Pins every row whose bin all assignments consistent with ``observations`` and ``allowed``
    agree on, and removes from ``allowed`` (in place) every bin no consistent assignment puts the
    row in, as far as per-(set, bin) reasoning to a fixed point reaches (see the module doc).
    Raises ``ValueError`` if the observations contradict each other."""
    n_rows, width = allowed.shape
    pinned = np.full(n_rows, -1, dtype=np.int64)
    sets = _Sets(n_rows, width)
    for ob in observations:
        if ob.rows.size:
            sets.add(ob.rows, ob.g, ob.h, ob.sums[:, 2], ob.sums[:, 0], ob.sums[:, 1], ob.known)
    result = ExactResult(pinned, sets)
    attempted: dict[tuple[int, int], tuple[int, int]] = {}
    derived_index: dict[tuple[int, int, int], int] = {}
    while True:
        _cheap_rules(allowed, pinned, sets)
        if not len(sets):
            break
        residual = sets.residual(pinned)
        free = pinned < 0
        candidates = sets.m @ (allowed & free[:, None]).astype(np.int64)
        count = residual[:, 0]
        pending = sets.known & (count > 0) & (count < candidates) & (candidates <= max_candidates)
        pending &= ~sets.derived[:, None]
        slots = np.argwhere(pending)
        slots = slots[np.argsort(candidates[pending], kind="stable")]
        changed = False
        for s, b in slots.tolist():
            rows = sets.rows[s]
            where = pinned[rows]
            inside = where == b
            can = (where < 0) & allowed[rows, b]
            k = int(sets.target[s, 0, b] - inside.sum())
            n_can = int(can.sum())
            if k <= 0 or k >= n_can:
                continue  # the cheap rules see it on the next round
            signature = (k, n_can)
            if attempted.get((s, b)) == signature:
                continue
            attempted[(s, b)] = signature
            g, h = sets.g[s], sets.h[s]
            g_target = int(sets.target[s, 1, b] - g[inside].sum())
            h_target = int(sets.target[s, 2, b] - h[inside].sum())
            cand_rows, cand_g, cand_h = rows[can], g[can], h[can]
            answer = solve_subset_sum(cand_g, cand_h, k, g_target, h_target, max_half=max_half)
            result.solver_calls += 1
            if answer.status == INFEASIBLE:
                raise _inconsistent(f"no subset of a cell's rows fits bin {b}")
            if not answer.solved:
                result.solver_unknown += 1
                continue
            never = answer.never()
            if never.any():
                allowed[cand_rows[never], b] = False
                changed = True
            always = answer.always()
            if always.any():
                out = cand_rows[always]
                _pin(allowed, pinned, out, np.full(out.size, b))
                changed = True
            fixed = answer.fixed() & (answer.low > 0) & (answer.low < answer.multiplicity)
            for j in np.flatnonzero(fixed).tolist():
                gj, hj = int(answer.values[j, 0]), int(answer.values[j, 1])
                members = rows[(g == gj) & (h == hj)]
                total = int(answer.low[j]) + int((pinned[members] == b).sum())
                key = (s, gj, hj)
                index = derived_index.get(key)
                if index is None:
                    zeros = np.zeros(width, dtype=np.int64)
                    index = sets.add(members, np.full(members.size, gj), np.full(members.size, hj),
                                     zeros, zeros, zeros, np.zeros(width, dtype=bool), derived=True)
                    derived_index[key] = index
                    result.derived += 1
                if not sets.known[index, b]:
                    sets.known[index, b] = True
                    sets.target[index, :, b] = (total, total * gj, total * hj)
                    changed = True
        if not changed:
            break
    return result


def _em(allowed: np.ndarray, exact: ExactResult, *, iterations: int, tolerance: float) -> tuple[np.ndarray, int]:
    """Shepp-Vardi / GIS on what the exact stage left open (see the module doc)."""
    n_rows, width = allowed.shape
    pinned, sets = exact.pinned, exact.sets
    probabilities = np.zeros((n_rows, width))
    done = np.flatnonzero(pinned >= 0)
    probabilities[done, pinned[done]] = 1.0
    free = np.flatnonzero(pinned < 0)
    base = allowed[free] / np.maximum(allowed[free].sum(axis=1, keepdims=True), 1)
    probabilities[free] = base
    if free.size == 0 or not len(sets):
        return probabilities, 0
    column = np.full(n_rows, -1, dtype=np.int64)
    column[free] = np.arange(free.size)
    residual = sets.residual(pinned).astype(np.float64)
    obs_rows, obs_cols, obs_coef, targets, known = [], [], [], [], []
    derived = sets.derived
    for s in range(len(sets)):
        if not sets.known[s].any():
            continue
        rows = sets.rows[s]
        cols = column[rows]
        keep = cols >= 0
        if not keep.any():
            continue
        cols = cols[keep]
        terms = [(np.ones(cols.size), residual[s, 0])]
        if not derived[s]:
            for kind in (1, 2):
                values = (sets.g if kind == 1 else sets.h)[s][keep].astype(np.float64)
                low, high = values.min(), values.max()
                if high == low:
                    continue  # proportional to the count
                # shifted to [0, 1]: a combination of this sum and the count
                terms.append(((values - low) / (high - low), (residual[s, kind] - low * residual[s, 0]) / (high - low)))
        for coefficient, target in terms:
            obs_rows.append(np.full(cols.size, len(targets)))
            obs_cols.append(cols)
            obs_coef.append(coefficient)
            targets.append(np.maximum(target, 0.0))
            known.append(sets.known[s])
    if not targets:
        return probabilities, 0
    a = sp.csr_matrix((np.concatenate(obs_coef), (np.concatenate(obs_rows), np.concatenate(obs_cols))),
                      shape=(len(targets), free.size))
    observed = np.vstack(targets)
    known = np.vstack(known)
    # rows that no observation and no constraint can tell apart share one distribution
    csc = a.tocsc()
    allowed_free = allowed[free]
    classes: dict[bytes, int] = {}
    class_of = np.empty(free.size, dtype=np.int64)
    for j in range(free.size):
        lo, hi = csc.indptr[j], csc.indptr[j + 1]
        key = csc.indices[lo:hi].tobytes() + csc.data[lo:hi].tobytes() + np.packbits(allowed_free[j]).tobytes()
        class_of[j] = classes.setdefault(key, len(classes))
    first = np.zeros(len(classes), dtype=np.int64)
    first[class_of[::-1]] = np.arange(free.size)[::-1]
    multiplicity = np.bincount(class_of, minlength=len(classes)).astype(np.float64)
    a_class = csc[:, first].tocsr()
    predict = (a_class @ sp.diags(multiplicity)).tocsr()
    back = a_class.T.tocsr()
    weight = np.asarray(back.sum(axis=1)).ravel()
    seen = weight > 0
    mask = allowed_free[first]
    p = base[first]
    iteration = 0
    for iteration in range(1, iterations + 1):
        predicted = predict @ p
        ratio = np.ones_like(predicted)
        use = known & (predicted > 0)
        ratio[use] = observed[use] / predicted[use]
        update = (back @ ratio)[seen] / weight[seen, None]
        new = p.copy()
        new[seen] *= update
        new *= mask
        total = new.sum(axis=1, keepdims=True)
        new = np.where(total > 0, new / np.where(total > 0, total, 1.0), p)
        change = float(np.abs(new - p).max())
        p = new
        if change < tolerance:
            break
    probabilities[free] = p[class_of]
    return probabilities, iteration


def infer_bins(view: ActiveView, party: int, feature: int, *, iterations: int = 300,
               max_half: int = DEFAULT_MAX_HALF, tolerance: float = 1e-6) -> BinPosterior:
    started = time.perf_counter()
    width = view.max_bin + 1
    n_value_bins = int(view.n_value_bins[party][feature])
    allowed, split_constraints = _allowed(view, party, feature, width, n_value_bins)
    cells, observed_nodes = _cells(view, party, feature)
    exact = exact_propagation(allowed, cells, max_half=max_half)
    probabilities, run = _em(allowed, exact, iterations=iterations, tolerance=tolerance)
    pinned_rows = exact.pinned >= 0
    return BinPosterior(probabilities, n_value_bins, 3 * observed_nodes, split_constraints,
                        pinned=int(pinned_rows.sum()), pinned_rows=pinned_rows,
                        seconds=time.perf_counter() - started, iterations=run, derived_constraints=exact.derived)


def recovery(posterior: BinPosterior, true_bins: np.ndarray, true_values: np.ndarray) -> dict[str, float]:
    """How much stage 1 recovered, against the truth (which only an auditor has)."""
    determined = posterior.determined()
    guessed = posterior.probabilities.argmax(axis=1)
    exact = determined & (guessed == true_bins)
    present = ~np.isnan(true_values)
    return {
        "exact_share": float(exact.mean()),
        "mean_abs_bin_error": float(np.abs(guessed[present] - true_bins[present]).mean()) if present.any() else 0.0,
        "spearman": spearman(posterior.expected_value_bin()[present], true_values[present]),
    }
