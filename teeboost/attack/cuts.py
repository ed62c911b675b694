"""Passive cuts whose feature the active party was not told, grouped by feature.

Under N-TEE and 1-TEE the active party sees, for every split a passive party won, which rows
went left and which right (split reply plus routing answers), but not the feature. Two cuts on
the same feature are *nested* on the rows they share: one of "left of a, right of b" and "right
of a, left of b" is empty (up to missing values, which follow each cut's default side). Cuts on
different features are not, unless the features are strongly dependent. How surprising an
empty side is depends on the cuts' balance on the shared rows: under independence the smaller
side would hold ``e = min(n p_a (1-p_b), n (1-p_a) p_b)`` rows, so an empty side with ``e``
large is strong evidence of one feature, and a non-empty one is evidence of two.

Clustering is greedy correlation clustering on those signed pair weights: merge the two
groups with the largest positive total weight until none is positive.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = ["CutSet", "cut_set", "cluster_cuts"]

#: Expected rows on the smaller side under independence below which a pair says nothing.
MIN_EVIDENCE = 3.0
#: Caps keep one huge pair from outweighing many small ones.
MAX_WEIGHT = 30.0


@dataclass
class CutSet:
    """Left and right rows of passive cuts as sparse (cuts x rows) indicator matrices."""

    left: sp.csr_matrix
    right: sp.csr_matrix
    index: np.ndarray  # position of each cut in ``ActiveView.splits``

    @property
    def n_cuts(self) -> int:
        return self.left.shape[0]

    def subset(self, cuts: np.ndarray) -> "CutSet":
        return CutSet(self.left[cuts], self.right[cuts], self.index[cuts])


def indicator(groups: list[np.ndarray], n_rows: int) -> sp.csr_matrix:
    indptr = np.concatenate([[0], np.cumsum([g.size for g in groups])]).astype(np.int64)
    indices = np.concatenate(groups).astype(np.int64) if groups else np.empty(0, dtype=np.int64)
    return sp.csr_matrix((np.ones(indices.size, dtype=np.float64), indices, indptr), shape=(len(groups), n_rows))


def cut_set(splits, party: int, n_rows: int) -> CutSet:
    """The cuts of ``party`` among ``splits`` (``PassiveSplit`` list)."""
    index = np.array([i for i, s in enumerate(splits) if s.party == party], dtype=np.int64)
    return CutSet(indicator([splits[i].left_rows for i in index], n_rows),
                  indicator([splits[i].right_rows for i in index], n_rows), index)


def pair_weights(cuts: CutSet) -> np.ndarray:
    """Signed evidence that two cuts split the same feature (+) or different ones (-)."""
    left, right = cuts.left, cuts.right
    node = left + right
    crossed = (left @ right.T).toarray()  # |L_a & R_b|
    shared = (node @ node.T).toarray()
    left_shared = (left @ node.T).toarray()  # |L_a & N_b|
    p_a = left_shared / np.maximum(shared, 1)
    p_b = p_a.T
    expected = np.minimum(shared * p_a * (1 - p_b), shared * (1 - p_a) * p_b)
    violation = np.minimum(crossed, crossed.T)
    informative = expected >= MIN_EVIDENCE
    weights = np.zeros_like(expected)
    nested = informative & (violation == 0)
    weights[nested] = np.sqrt(np.minimum(expected[nested], MAX_WEIGHT))
    crossing = informative & (violation > 0)
    weights[crossing] = -2 * np.sqrt(np.minimum(violation[crossing], MAX_WEIGHT))
    np.fill_diagonal(weights, 0)
    return weights


def cluster_cuts(cuts: CutSet) -> list[np.ndarray]:
    """Groups of cut positions (into ``cuts``), largest first; each group is one feature's."""
    n = cuts.n_cuts
    if n == 0:
        return []
    totals = pair_weights(cuts)
    members = {i: [i] for i in range(n)}
    alive = np.ones(n, dtype=bool)
    np.fill_diagonal(totals, -np.inf)
    while True:
        masked = np.where(alive[:, None] & alive[None, :], totals, -np.inf)
        best = int(np.argmax(masked))
        i, j = divmod(best, n)
        if not masked[i, j] > 0:
            break
        totals[i, :] += totals[j, :]
        totals[:, i] += totals[:, j]
        totals[i, i] = -np.inf
        alive[j] = False
        members[i] += members.pop(j)
    groups = [np.array(sorted(m), dtype=np.int64) for m in members.values()]
    return sorted(groups, key=lambda g: (-g.size, int(g[0])))
