"""One feature's order of rows, rebuilt from cuts on it whose thresholds are unknown.

Every cut is "value <= t" on the rows of one node; a missing value goes to the cut's default
side. Unknown: each cut's threshold (as a quantile of all rows) and default side, and each
row's position or the fact that it is missing. The fit alternates, as an auditor would:

1. rows: place each row in the interval between sorted thresholds that contradicts the fewest
   of its cuts (all rows at once: a sparse (rows x cuts) product with a (cuts x intervals)
   step matrix); its score is the middle of the best intervals. A row is flagged missing when
   following the default sides contradicts strictly fewer cuts than any position.
2. cuts: re-rank present rows by score, put each threshold where it separates its node's left
   from its right rows with fewest errors, and take each default side from the flagged rows.

Nothing here knows which feature the cuts are on; ``attribution`` decides that.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..metrics import average_ranks
from .cuts import CutSet

__all__ = ["CutRanking", "rank_rows"]


@dataclass
class CutRanking:
    scores: np.ndarray  # quantile position of every row in [0, 1]; rows no cut touches: 0.5
    missing: np.ndarray  # rows flagged as missing a value
    touched: np.ndarray  # rows at least one cut placed
    thresholds: np.ndarray  # per cut, quantile in [0, 1]
    default_left: np.ndarray  # per cut: 1 left, 0 right, -1 unknown
    contradictions: int  # cut sides the final placement contradicts
    iterations: int
    interval: np.ndarray  # (rows, 2): first and last interval between sorted levels a row fits best
    n_levels: int  # distinct thresholds the placement used
    placed: np.ndarray  # each row's position before re-ranking (middle of its best intervals)
    default_met: np.ndarray  # per row: cuts with a known default side it met
    default_agreed: np.ndarray  # per row: of those, how many it followed

    def with_missing(self, share: float) -> "CutRanking":
        """The same ranking when the column is known to miss ``share`` of its values: rows that
        follow every default side they meet, but fit a position equally well, are flagged
        too (most cuts first) until that share is reached, and the rest re-ranked."""
        want = int(round(share * self.touched.sum())) - int(self.missing.sum())
        could = np.flatnonzero(~self.missing & self.touched & (self.default_met > 0)
                               & (self.default_agreed == self.default_met))
        if want <= 0 or could.size == 0:
            return self
        chosen = could[np.argsort(-self.default_met[could], kind="stable")[:want]]
        missing = self.missing.copy()
        missing[chosen] = True
        present = ~missing
        scores = np.full(self.scores.size, 0.5)
        scores[present] = _midranks(self.placed[present]) / max(int(present.sum()), 1)
        return dataclasses.replace(self, scores=scores, missing=missing)

    @property
    def missing_share(self) -> float:
        return float(self.missing[self.touched].mean()) if self.touched.any() else 0.0

    def exact_bins(self, n_value_bins: int) -> np.ndarray:
        """Bin of rows pinned to one interval when the levels are exactly the bin edges (the
        handshake says there are bins - 1); -1 elsewhere. With more or fewer levels than edges,
        which interval is which bin is a guess, not a finding."""
        out = np.full(self.scores.size, -1)
        if self.n_levels == n_value_bins - 1:
            pinned = (self.interval[:, 0] == self.interval[:, 1]) & self.touched & ~self.missing
            out[pinned] = self.interval[pinned, 0]
        return out


def _midranks(values: np.ndarray) -> np.ndarray:
    """1-based positions, ties sharing their middle: rank / n lands inside (0, 1]."""
    return average_ranks(values) + 0.5


def _gap(left: np.ndarray, right: np.ndarray) -> tuple[float, float]:
    """Where the cut's threshold can lie: the gap (low, high] between row scores that leaves
    the fewest left rows above it plus right rows at or below it."""
    values = np.unique(np.concatenate([left, right]))
    if values.size == 0:
        return 0.0, 1.0
    left, right = np.sort(left), np.sort(right)
    candidates = np.concatenate([[-np.inf], values])
    errors = (left.size - np.searchsorted(left, candidates, side="right")) \
        + np.searchsorted(right, candidates, side="right")
    best = int(errors.argmin())
    low = 0.0 if best == 0 else float(candidates[best])
    high = float(values[best]) if best < values.size else 1.0
    return low, high


def _stab(gaps: np.ndarray) -> np.ndarray:
    """Fewest distinct thresholds meeting every cut's gap (greedy interval stabbing): cuts at
    one bin edge share a level, so rows of one bin tie instead of spreading out."""
    order = np.argsort(gaps[:, 1], kind="stable")
    levels = np.empty(gaps.shape[0])
    group: list[int] = []
    point = -np.inf

    def close() -> None:
        if group:
            low = max(gaps[i, 0] for i in group)
            high = min(gaps[i, 1] for i in group)
            levels[group] = (low + high) / 2

    for c in order:
        if gaps[c, 0] < point:  # (low, high] contains the current point
            group.append(int(c))
            continue
        close()
        group = [int(c)]
        point = gaps[c, 1]
    close()
    return levels


def _defaults(flagged: np.ndarray, lefts: list[np.ndarray], rights: list[np.ndarray]) -> np.ndarray:
    """Each cut's default side: where most flagged rows of its node went (-1: none there)."""
    out = np.full(len(lefts), -1)
    for c, (on_left, on_right) in enumerate(zip(lefts, rights)):
        a, b = int(flagged[on_left].sum()), int(flagged[on_right].sum())
        if a or b:
            out[c] = 1 if a >= b else 0
    return out


def _agreement(left_t, right_t, default_left: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: cuts whose default side it took, and cuts with a default side it met."""
    known = (default_left >= 0).astype(np.float64)
    goes_left = (default_left == 1) * known
    agree = np.asarray(left_t @ goes_left).ravel() + np.asarray(right_t @ (known - goes_left)).ravel()
    met = np.asarray(left_t @ known).ravel() + np.asarray(right_t @ known).ravel()
    return agree, met


def _default_sides(left_t, right_t, lefts, rights, scores, thresholds, *, restarts: int = 4) -> np.ndarray:
    """Default sides under which a block of rows follows every default: missing values.

    Missing rows of a node all go one way, so under the true default sides they agree with
    every cut they meet while a present row agrees with about half. Starting from a guess,
    alternate "rows that agree most" and "each cut's side of those rows"; this climbs to the
    block from a guess better than chance. Guesses: each cut's side holding more rows the
    settled order places on the wrong side, its opposite, and a few random ones; the guess
    ending with the most rows that agree with all their cuts wins."""
    wrong_left = np.array([(scores[l] > t).sum() for l, t in zip(lefts, thresholds)])
    wrong_right = np.array([(scores[r] <= t).sum() for r, t in zip(rights, thresholds)])
    seed = np.where(wrong_left + wrong_right > 0, (wrong_left > wrong_right).astype(int), -1)
    rng = np.random.default_rng(0)
    guesses = [seed, np.where(seed >= 0, 1 - seed, -1)] + [rng.integers(0, 2, seed.size) for _ in range(restarts)]
    best, best_rows = np.full(seed.size, -1), 0
    for sides in guesses:
        for _ in range(30):
            agree, met = _agreement(left_t, right_t, sides)
            ratio = agree / np.maximum(met, 1)
            seen = met >= 3
            if not seen.any():
                break
            block = seen & (ratio >= float(np.quantile(ratio[seen], 0.8)))
            new_sides = _defaults(block, lefts, rights)
            if np.array_equal(new_sides, sides):
                break
            sides = new_sides
        agree, met = _agreement(left_t, right_t, sides)
        rows = int(((met >= 3) & (agree == met)).sum())
        if rows > best_rows:
            best, best_rows = sides, rows
    return best


def rank_rows(cuts: CutSet, *, max_iterations: int = 60) -> CutRanking:
    left, right = cuts.left.tocsc(), cuts.right.tocsc()
    n_cuts, n_rows = left.shape
    node = (left + right).tocsr()
    touched = np.asarray(node.sum(axis=0)).ravel() > 0
    lefts = [cuts.left[c].indices for c in range(n_cuts)]
    rights = [cuts.right[c].indices for c in range(n_cuts)]
    sizes = np.asarray(node.sum(axis=1)).ravel()
    thresholds = np.asarray(cuts.left.sum(axis=1)).ravel() / np.maximum(sizes, 1)
    default_left = np.full(n_cuts, -1)
    missing = np.zeros(n_rows, dtype=bool)
    left_t, right_t = cuts.left.T.tocsr(), cuts.right.T.tocsr()
    scores = np.full(n_rows, 0.5)
    contradictions, interval, n_levels = 0, np.zeros((n_rows, 2), dtype=np.int64), 0
    placed_all = np.full(n_rows, 0.5)
    iteration, seeded = 0, False
    seeded_sides = np.full(n_cuts, -1)
    for iteration in range(1, max_iterations + 1):
        levels = np.unique(thresholds)
        position = np.searchsorted(levels, thresholds)  # cut c is level position[c]
        k = np.arange(levels.size + 1)
        below = (position[:, None] < k[None, :]).astype(np.float64)  # (cuts, intervals)
        # a row in interval k is left of c iff position[c] >= k
        cost = np.asarray(left_t @ below) + np.asarray(right_t @ (1.0 - below))
        best = cost.min(axis=1)
        first = cost.argmin(axis=1)
        last = cost.shape[1] - 1 - cost[:, ::-1].argmin(axis=1)
        edges = np.concatenate([[0.0], levels, [1.0]])
        placed = (edges[first] + edges[last + 1]) / 2
        known = default_left >= 0
        goes_left = (default_left == 1).astype(np.float64)
        missing_cost = np.asarray(left_t @ (known * (1 - goes_left))).ravel() \
            + np.asarray(right_t @ (known * goes_left)).ravel()
        covered = np.asarray(left_t @ known.astype(np.float64)).ravel() \
            + np.asarray(right_t @ known.astype(np.float64)).ravel()
        new_missing = touched & (covered > 0) & (missing_cost < best)
        present = ~new_missing
        new_scores = np.full(n_rows, 0.5)
        new_scores[present] = _midranks(placed[present]) / max(int(present.sum()), 1)
        new_thresholds = _stab(np.array([
            _gap(new_scores[lefts[c]][present[lefts[c]]], new_scores[rights[c]][present[rights[c]]])
            for c in range(n_cuts)]).reshape(-1, 2))
        new_defaults = _defaults(new_missing, lefts, rights)
        contradictions = int(np.where(new_missing, missing_cost, best).sum())
        interval, n_levels = np.stack([first, last], axis=1), int(levels.size)
        placed_all = placed
        stable = (np.array_equal(new_missing, missing) and np.array_equal(new_defaults, default_left)
                  and np.allclose(new_thresholds, thresholds, atol=1e-9))
        scores, missing, thresholds, default_left = new_scores, new_missing, new_thresholds, new_defaults
        if not seeded and (stable or iteration >= max_iterations // 2) and (best > 0).any():
            # the order has settled but some rows fit no position: look for missing values
            seeded = True
            default_left = seeded_sides = _default_sides(left_t, right_t, lefts, rights, scores, thresholds)
        elif stable:
            break
    # rows that follow every default side: under the sides the flagged rows settled on, or, if
    # none stayed flagged (missing rows fit a middle position too), the sides first found
    agreed, met = _agreement(left_t, right_t, default_left if (default_left >= 0).any() else seeded_sides)
    return CutRanking(scores, missing, touched, thresholds, default_left, contradictions, iteration,
                      interval, n_levels, placed_all, met, agreed)
