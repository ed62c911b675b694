"""Stage 1: each passive feature's per-sample bin, inferred from a transcript.

Unknown: for every training row i and the attacked feature, a distribution P[i, b] over bins.
Observed: for every node whose histogram the active party saw, and every bin b, three linear
sums over the node's rows: the count, the sum of h, and the sum of g (shifted by the tree's
max |g| so all coefficients are non-negative). A passive split whose (feature, bin) the active
party learnt adds hard constraints: left rows are at or below the bin, right rows above (and
the missing bin goes with the learnt default side).

The fit is the EM / generalised iterative scaling update for non-negative linear inverse
problems (Shepp-Vardi): P <- P * A^T(obs / A P) / A^T 1, then each row renormalised. Its fixed
points match every observed sum; it converges to the exact assignment wherever the
observations determine it (a node of distinct gradients, small nodes, exact zero counts) and
leaves exchangeable rows with equal distributions where they do not. With no histograms (N-TEE,
1-TEE) nothing but split constraints can move P away from uniform.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .view import ActiveView

__all__ = ["BinPosterior", "infer_bins", "recovery"]


@dataclass
class BinPosterior:
    probabilities: np.ndarray  # (n_rows, width): P[row, bin]; the last column is the missing bin
    n_value_bins: int
    constraints: int  # observed sums used
    split_constraints: int

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
        allowed[np.ix_(left, np.arange(split.bin + 1, n_value_bins))] = False
        allowed[np.ix_(right, np.arange(0, split.bin + 1))] = False
        allowed[left if not split.default_left else right, width - 1] = False
    return allowed, used


def _propagate(allowed: np.ndarray, observations: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
               *, max_subsets: int = 20_000) -> None:
    """Exact reasoning on per-node bin sums, repeated until nothing changes.

    For every node: a bin with count 0 holds none of its rows; a bin whose count equals the
    number of rows still allowed there holds all of them; a row allowed in one bin only is in
    it. For small nodes, every subset of the right size is checked against the exact integer
    sums of g and h: rows in no matching subset are excluded from the bin, rows in every
    matching subset are fixed to it (the seed paper's small examples resolve completely)."""
    from itertools import combinations
    from math import comb

    changed = True
    while changed:
        changed = False
        for rows, counts, g_sums, h_sums, g, h in observations:
            sub = allowed[rows]
            before = sub.copy()
            sub[:, counts == 0] = False
            for b in np.flatnonzero(counts):
                candidates = np.flatnonzero(sub[:, b])
                if candidates.size == counts[b]:
                    sub[candidates] = False
                    sub[candidates, b] = True
                elif candidates.size < counts[b]:
                    raise ValueError("transcript is inconsistent with the observed bin counts")
                elif comb(int(candidates.size), int(counts[b])) <= max_subsets:
                    matches = [c for c in combinations(candidates.tolist(), int(counts[b]))
                               if sum(g[list(c)].tolist()) == int(g_sums[b]) and sum(h[list(c)].tolist()) == int(h_sums[b])]
                    if matches:
                        inside = set.intersection(*(set(c) for c in matches))
                        anywhere = set().union(*(set(c) for c in matches))
                        for row in candidates.tolist():
                            if row not in anywhere:
                                sub[row, b] = False
                        for row in inside:
                            sub[row] = False
                            sub[row, b] = True
            if not np.array_equal(sub, before):
                allowed[rows] = sub
                changed = True


def infer_bins(view: ActiveView, party: int, feature: int, *, iterations: int = 300) -> BinPosterior:
    width = view.max_bin + 1
    n_value_bins = int(view.n_value_bins[party][feature])
    allowed, split_constraints = _allowed(view, party, feature, width, n_value_bins)
    observations = []
    for note in view.histograms:
        if note.party == party:
            tree = view.trees[note.tree]
            for i, node in enumerate(note.nodes):
                rows = tree.node_rows[int(node)]
                sums = note.sums[i, feature]
                observations.append((rows, sums[:, 2], sums[:, 0], sums[:, 1], tree.g[rows], tree.h[rows]))
    _propagate(allowed, observations)
    rows_coeff, observed = [], []
    for note in view.histograms:
        if note.party != party:
            continue
        tree = view.trees[note.tree]
        shift = float(np.abs(tree.g).max()) if tree.g.size else 0.0
        for i, node in enumerate(note.nodes):
            rows = tree.node_rows[int(node)]
            sums = note.sums[i, feature].astype(np.float64)  # (width, 3)
            for coefficient, target in (
                (np.ones(rows.size), sums[:, 2]),
                (tree.h[rows].astype(np.float64), sums[:, 1]),
                (tree.g[rows].astype(np.float64) + shift, sums[:, 0] + shift * sums[:, 2]),
            ):
                scale = coefficient.max() if coefficient.size and coefficient.max() > 0 else 1.0
                full = np.zeros(view.n_rows)
                full[rows] = coefficient / scale
                rows_coeff.append(full)
                observed.append(target / scale)
    probabilities = allowed / np.maximum(allowed.sum(axis=1, keepdims=True), 1)
    if rows_coeff:
        a = np.vstack(rows_coeff)  # (constraints, n_rows)
        obs = np.vstack(observed)  # (constraints, width)
        weight = a.sum(axis=0)
        seen = weight > 0
        for _ in range(iterations):
            predicted = a @ probabilities
            ratio = np.divide(obs, predicted, out=np.zeros_like(obs), where=predicted > 0)
            update = (a.T @ ratio)[seen] / weight[seen, None]
            probabilities[seen] *= update
            probabilities *= allowed
            total = probabilities.sum(axis=1, keepdims=True)
            probabilities = np.divide(probabilities, total, out=np.zeros_like(probabilities), where=total > 0)
        constraints = len(rows_coeff)
    else:
        constraints = 0
    return BinPosterior(probabilities, n_value_bins, constraints, split_constraints)


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    def ranks(x):
        order = np.argsort(x, kind="mergesort")
        r = np.empty(x.size)
        r[order] = np.arange(x.size)
        # average ranks of ties
        _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
        sums = np.bincount(inverse, weights=r)
        return (sums / counts)[inverse]

    if a.size < 2:
        return float("nan")
    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


def recovery(posterior: BinPosterior, true_bins: np.ndarray, true_values: np.ndarray) -> dict[str, float]:
    """How much stage 1 recovered, against the truth (which only an auditor has)."""
    determined = posterior.determined()
    guessed = posterior.probabilities.argmax(axis=1)
    exact = determined & (guessed == true_bins)
    present = ~np.isnan(true_values)
    return {
        "exact_share": float(exact.mean()),
        "mean_abs_bin_error": float(np.abs(guessed[present] - true_bins[present]).mean()) if present.any() else 0.0,
        "spearman": _spearman(posterior.expected_value_bin()[present], true_values[present]),
    }
