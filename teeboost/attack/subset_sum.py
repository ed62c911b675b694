"""Exact subset-sum over a node's rows, meet in the middle, for stage 1 of the attack.

Question: a node's candidate rows carry integer values (g, h); exactly ``count`` of them lie in
one bin and their values add up to (``g_sum``, ``h_sum``). Which rows are in *every* subset that
fits, and which in *none*? Only those answers are sound to act on; everything else is left to
the probabilistic stage.

Rows with the same (g, h) are exchangeable: no sum can tell them apart. So the rows are first
grouped into distinct values with multiplicities m_j, and a solution is a vector of counts
(k_1, ..., k_d), 0 <= k_j <= m_j, with sum(k) = count, sum(k g) = g_sum and sum(k h) = h_sum.
A group is fully in the bin if k_j = m_j in every solution, fully out if k_j = 0 in every
solution, and if k_j is the same in every solution, "exactly k_j of these rows" is itself an
exact constraint (for a tree with two gradient values, the first tree of a binary task, these
are the label-conditional bin counts).

The count vectors are enumerated meet-in-the-middle: the groups are split into two halves of
about equal search size, each half's count vectors are enumerated with their (count, g, h)
sums (vectorised, pruned by branch and bound: a partial vector is dropped when the rows left
cannot reach the target count and sums), and a vector of the first half is feasible iff the
complement of its sums is the sums of some vector of the second half (exact join by sorting
the three integer keys; no hashing, so no false matches). The work per half is bounded by
``max_half`` vectors; above it the answer is "unknown" and nothing is inferred.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SOLVED", "INFEASIBLE", "UNKNOWN", "SubsetSumResult", "group_values", "half_sizes", "solve_subset_sum"]

SOLVED = "solved"
INFEASIBLE = "infeasible"
UNKNOWN = "unknown"

#: Default bound on the count vectors enumerated per half (about 34 distinct rows at any count).
DEFAULT_MAX_HALF = 1 << 18


@dataclass(frozen=True)
class SubsetSumResult:
    """The answer for one (rows, target) question.

    ``group[i]`` is candidate row i's value group; ``values[j]`` that group's (g, h) and
    ``multiplicity[j]`` its size. ``low[j]``/``high[j]``: fewest/most rows of group j in any
    solution (for ``unknown`` the trivial bounds 0 and min(m_j, count)). ``n_solutions``: the
    number of distinct count vectors (solutions up to exchanging equal rows); 0 if infeasible,
    -1 if unknown."""

    status: str
    group: np.ndarray
    values: np.ndarray
    multiplicity: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n_solutions: int

    @property
    def solved(self) -> bool:
        return self.status == SOLVED

    def always(self) -> np.ndarray:
        """Per candidate row: in every solution."""
        if not self.solved:
            return np.zeros(self.group.size, dtype=bool)
        return (self.low == self.multiplicity)[self.group]

    def never(self) -> np.ndarray:
        """Per candidate row: in no solution."""
        if not self.solved:
            return np.zeros(self.group.size, dtype=bool)
        return (self.high == 0)[self.group]

    def fixed(self) -> np.ndarray:
        """Per group: the same number of its rows in every solution (that number is ``low``)."""
        if not self.solved:
            return np.zeros(self.multiplicity.size, dtype=bool)
        return self.low == self.high


def group_values(g: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (g, h) pairs: (values (d, 2), group index per row, multiplicity per group)."""
    g = np.asarray(g, dtype=np.int64)
    h = np.asarray(h, dtype=np.int64)
    if g.size == 0:
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.lexsort((h, g))
    gs, hs = g[order], h[order]
    new = np.empty(g.size, dtype=bool)
    new[0] = True
    new[1:] = (gs[1:] != gs[:-1]) | (hs[1:] != hs[:-1])
    sorted_group = np.cumsum(new) - 1
    group = np.empty(g.size, dtype=np.int64)
    group[order] = sorted_group
    values = np.stack([gs[new], hs[new]], axis=1)
    multiplicity = np.bincount(sorted_group).astype(np.int64)
    return values, group, multiplicity


_CLIP = float(1 << 40)


def _vectors_by_count(caps: np.ndarray, count: int) -> np.ndarray:
    """Coefficient t: the number of count vectors 0 <= k_j <= caps_j with sum t, for t <= count
    (capped at 2**40, far above any work limit, so the float arithmetic stays exact)."""
    poly = np.zeros(count + 1, dtype=np.float64)
    poly[0] = 1.0
    for cap in caps.tolist():
        # multiply by (1 + x + ... + x^cap): a running window sum
        cumulative = np.cumsum(poly)
        shifted = np.zeros_like(cumulative)
        if cap + 1 <= count:
            shifted[cap + 1:] = cumulative[: count - cap]
        poly = np.minimum(cumulative - shifted, _CLIP)  # exact: min(_CLIP, true coefficient)
    return poly


def _split(caps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Groups into two halves of about equal log search size (greedy, largest first)."""
    weights = np.log2(caps.astype(np.float64) + 1.0)
    first, second = [], []
    load = [0.0, 0.0]
    for j in np.argsort(-weights, kind="stable").tolist():
        side = 0 if load[0] <= load[1] else 1
        (first if side == 0 else second).append(j)
        load[side] += weights[j]
    return np.array(sorted(first), dtype=np.int64), np.array(sorted(second), dtype=np.int64)


def half_sizes(caps: np.ndarray, count: int) -> tuple[float, float]:
    """Count vectors each half would enumerate (upper bounds, pruned by the count)."""
    first, second = _split(caps)
    size = []
    for half, other in ((first, second), (second, first)):
        by_count = _vectors_by_count(caps[half], count)
        least = max(0, count - int(caps[other].sum()))
        size.append(float(by_count[least:].sum()))
    return size[0], size[1]


_BIG = np.iinfo(np.int64).max


def _extremes(values: np.ndarray, caps: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Smallest and largest sum of exactly r rows (r = 0..count) out of groups with these
    values and multiplicities; (+BIG, -BIG) where there are fewer than r rows."""
    units = np.sort(np.repeat(values, np.minimum(caps, count)))
    low = np.full(count + 1, _BIG, dtype=np.int64)
    high = np.full(count + 1, -_BIG, dtype=np.int64)
    m = min(units.size, count)
    low[0] = high[0] = 0
    low[1:m + 1] = np.cumsum(units[:m])
    high[1:m + 1] = np.cumsum(units[::-1][:m])
    return low, high


def _enumerate(values: np.ndarray, caps: np.ndarray, count: int, target: tuple[int, int],
               other_values: np.ndarray, other_caps: np.ndarray):
    """All count vectors of one half that can still be completed to a solution by the groups
    after them and the other half (count, and the smallest and largest g and h sums those can
    add: branch and bound, exact): (counts, g sums, h sums, trail). ``trail`` holds, per
    group, each vector's choice for it and the index of its prefix one level up."""
    n = np.zeros(1, dtype=np.int64)
    gs = np.zeros(1, dtype=np.int64)
    hs = np.zeros(1, dtype=np.int64)
    trail = []
    for j in range(caps.size):
        cap = int(caps[j])
        rest_values = np.concatenate([values[j + 1:], other_values])
        rest_caps = np.concatenate([caps[j + 1:], other_caps])
        g_low, g_high = _extremes(rest_values[:, 0], rest_caps, count)
        h_low, h_high = _extremes(rest_values[:, 1], rest_caps, count)
        choices = np.arange(cap + 1, dtype=np.int64)
        size = n.size
        n = (n[:, None] + choices[None, :]).ravel()
        gs = (gs[:, None] + choices[None, :] * values[j, 0]).ravel()
        hs = (hs[:, None] + choices[None, :] * values[j, 1]).ravel()
        parent = np.repeat(np.arange(size, dtype=np.int64), cap + 1)
        choice = np.tile(choices, size)
        keep = n <= count
        r = np.where(keep, count - n, 0)
        g_need, h_need = target[0] - gs, target[1] - hs
        keep &= (g_low[r] <= g_need) & (g_need <= g_high[r]) & (h_low[r] <= h_need) & (h_need <= h_high[r])
        if not keep.all():
            n, gs, hs, parent, choice = n[keep], gs[keep], hs[keep], parent[keep], choice[keep]
        trail.append((parent, choice))
    return n, gs, hs, trail


def _bounds(trail, feasible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Min and max choice per group over the feasible vectors of one half."""
    low = np.zeros(len(trail), dtype=np.int64)
    high = np.zeros(len(trail), dtype=np.int64)
    index = np.flatnonzero(feasible)
    for j in range(len(trail) - 1, -1, -1):
        parent, choice = trail[j]
        k = choice[index]
        low[j], high[j] = k.min(), k.max()
        index = np.unique(parent[index])
    return low, high


def _join_sorted(a_keys: tuple[np.ndarray, ...], b_keys: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray, int]:
    """Exact join on three integer keys by one lexicographic sort: which a have an equal b,
    which b an equal a, and the number of matching (a, b) pairs."""
    na = a_keys[0].size
    keys = [np.concatenate([a, b]) for a, b in zip(a_keys, b_keys)]
    order = np.lexsort((keys[2], keys[1], keys[0]))
    sk = [k[order] for k in keys]
    new = np.empty(order.size, dtype=bool)
    if order.size:
        new[0] = True
        new[1:] = (sk[0][1:] != sk[0][:-1]) | (sk[1][1:] != sk[1][:-1]) | (sk[2][1:] != sk[2][:-1])
    key_id = np.cumsum(new) - 1
    from_a = order < na
    n_keys = int(key_id[-1]) + 1 if order.size else 0
    in_a = np.bincount(key_id[from_a], minlength=n_keys)
    in_b = np.bincount(key_id[~from_a], minlength=n_keys)
    both = (in_a > 0) & (in_b > 0)
    matched = np.empty(order.size, dtype=bool)
    matched[order] = both[key_id]
    pairs = int((in_a[both].astype(np.float64) * in_b[both]).sum())
    return matched[:na], matched[na:], pairs


_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F), np.uint64(0x165667B19E3779F9),
        np.uint64(0xD6E8FEB86659FD93))


def _fingerprint(keys: tuple[np.ndarray, ...]) -> np.ndarray:
    c, g, h = (np.ascontiguousarray(k, dtype=np.int64).view(np.uint64) for k in keys)
    x = c * _MIX[0] + g * _MIX[1] + h * _MIX[2]  # wraps modulo 2**64
    x ^= x >> np.uint64(31)
    x *= _MIX[3]
    x ^= x >> np.uint64(29)
    return x


def _join(a_keys: tuple[np.ndarray, ...], b_keys: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray, int]:
    """The same exact join through 64-bit fingerprints: a fingerprint match is only believed
    after comparing the three keys themselves, and any collision falls back to the sort join."""
    fa, fb = _fingerprint(a_keys), _fingerprint(b_keys)
    order = np.argsort(fb, kind="stable")
    fbs = fb[order]
    same = np.flatnonzero(fbs[1:] == fbs[:-1])
    if same.size:  # equal fingerprints inside b must be equal keys
        i, j = order[same], order[same + 1]
        if not all(np.array_equal(k[i], k[j]) for k in b_keys):
            return _join_sorted(a_keys, b_keys)
    left = np.searchsorted(fbs, fa, side="left")
    right = np.searchsorted(fbs, fa, side="right")
    hit = right > left
    ai = np.flatnonzero(hit)
    bi = order[left[hit]]
    if not all(np.array_equal(ka[ai], kb[bi]) for ka, kb in zip(a_keys, b_keys)):
        return _join_sorted(a_keys, b_keys)
    b_ok = np.isin(fb, fa[hit])
    pairs = int((right - left)[hit].sum())
    return hit, b_ok, pairs


def solve_subset_sum(g: np.ndarray, h: np.ndarray, count: int, g_sum: int, h_sum: int, *,
                     max_half: int = DEFAULT_MAX_HALF) -> SubsetSumResult:
    """Every subset of exactly ``count`` candidate rows whose g and h add up to the targets,
    summarised per value group (see the module doc). Exact; "unknown" above ``max_half``."""
    values, group, multiplicity = group_values(g, h)
    count, g_sum, h_sum = int(count), int(g_sum), int(h_sum)
    d = multiplicity.size
    caps = np.minimum(multiplicity, max(count, 0))

    def result(status, low=None, high=None, n_solutions=0):
        if low is None:
            low = np.zeros(d, dtype=np.int64)
            high = caps.copy() if status == UNKNOWN else np.zeros(d, dtype=np.int64)
        return SubsetSumResult(status, group, values, multiplicity, low, high, n_solutions)

    if count < 0 or count > int(multiplicity.sum()):
        return result(INFEASIBLE)
    if count == 0:
        return result(SOLVED, n_solutions=1) if g_sum == 0 and h_sum == 0 else result(INFEASIBLE)
    first, second = _split(caps)
    for half, other in ((first, second), (second, first)):
        by_count = _vectors_by_count(caps[half], count)
        least = max(0, count - int(caps[other].sum()))
        if by_count[least:].sum() > max_half:
            return result(UNKNOWN, n_solutions=-1)
    a = _enumerate(values[first], caps[first], count, (g_sum, h_sum), values[second], caps[second])
    b = _enumerate(values[second], caps[second], count, (g_sum, h_sum), values[first], caps[first])
    if a[0].size == 0 or b[0].size == 0:
        return result(INFEASIBLE)
    a_ok, b_ok, pairs = _join((count - a[0], g_sum - a[1], h_sum - a[2]), (b[0], b[1], b[2]))
    if not a_ok.any():
        return result(INFEASIBLE)
    low = np.zeros(d, dtype=np.int64)
    high = np.zeros(d, dtype=np.int64)
    for half, trail, ok in ((first, a[3], a_ok), (second, b[3], b_ok)):
        low[half], high[half] = _bounds(trail, ok)
    return result(SOLVED, low, high, pairs)
