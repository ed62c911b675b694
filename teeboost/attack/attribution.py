"""Which group of anonymous cuts is which feature, from public knowledge only.

The active party knows the passive party's column names, each column's number of value bins
(the handshake), the binning rule every party runs, and a rough public distribution of each
column: its deciles, min and max, whether values are whole numbers, and its share of missing
values (the stated assumption of the attack). A group of cuts on one feature shows four
matching traits once ranked: the share of rows it flags as missing, how many distinct
thresholds it uses (never more than bins - 1), the largest share of rows no threshold
separates (a value most rows share shows as repeated deciles), and where its thresholds sit
as quantiles (near the bin edges the public distribution implies). The largest groups are
matched to columns by the cheapest one-to-one assignment of those mismatches. With a few known
values (``infer``), the group whose order agrees with them names the column instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

from ..core.binning import fit_bins
from .ranking import CutRanking

__all__ = ["PublicFeature", "public_signatures", "largest_atom", "expected_edges", "group_traits", "mismatch", "attribute"]

#: Groups with fewer cuts carry too little to be told apart; they stay unattributed.
MIN_GROUP_CUTS = 5
_SIMULATED_ROWS = 20_000


@dataclass(frozen=True)
class PublicFeature:
    """What the attacker is assumed to know about one passive column."""

    name: str
    deciles: np.ndarray  # 11 values: min, 10%, ..., 90%, max
    missing_share: float
    integer: bool
    n_value_bins: int  # from the handshake, not an assumption
    # under constraints: its public (monotone direction, interaction-set mask), from the run's parameters
    signature: tuple[int, int] | None = None

    @classmethod
    def from_sample(cls, name: str, sample: np.ndarray, n_value_bins: int, *, noise: float = 0.0,
                    rng: np.random.Generator) -> "PublicFeature":
        from .guessing import approximate_deciles

        present = sample[~np.isnan(sample)]
        return cls(name, approximate_deciles(sample, noise=noise, rng=rng), float(np.isnan(sample).mean()),
                   bool(present.size and np.all(np.mod(present, 1) == 0)), int(n_value_bins))


def public_signatures(params: dict, names: list[str]) -> list:
    """Each column's public (monotone direction, interaction-set mask) under the run's
    constraints (the recorded parameters); None for every column of a run without any."""
    from ..config import BoostParams

    constraints = BoostParams(**params).constraints if params else None
    if constraints is None or not constraints.any:
        return [None] * len(names)
    mine = constraints.for_party(names)
    return [(int(d), int(m)) for d, m in zip(mine.directions, mine.membership)]


def largest_atom(feature: PublicFeature) -> float:
    """Share of values equal to one value, as far as the deciles tell (runs of equal deciles)."""
    runs = np.flatnonzero(np.diff(feature.deciles) == 0)
    if runs.size == 0:
        return 0.0
    breaks = np.flatnonzero(np.diff(runs) > 1)
    lengths = np.diff(np.concatenate([[-1], breaks, [runs.size - 1]]))
    return float(lengths.max() + 1) / (feature.deciles.size - 1)


def group_traits(ranking: CutRanking) -> tuple[float, int, float]:
    """(missing share, distinct thresholds, largest share of present rows tied together)."""
    levels = np.unique(ranking.thresholds[(ranking.thresholds > 0) & (ranking.thresholds < 1)])
    placed = ranking.touched & ~ranking.missing
    _, counts = np.unique(ranking.scores[placed], return_counts=True)
    tie = float(counts.max() / placed.sum()) if counts.size else 1.0
    return ranking.missing_share, int(levels.size), tie


def expected_edges(feature: PublicFeature, max_bin: int) -> np.ndarray:
    """Quantiles (among present values) of the bin edges the binning rule gives a column drawn
    from the public distribution: even steps for a many-valued column, the jumps between
    common values for a few-valued one."""
    q = (np.arange(_SIMULATED_ROWS) + 0.5) / _SIMULATED_ROWS
    values = np.interp(q, np.linspace(0, 1, feature.deciles.size), feature.deciles)
    if feature.integer:
        values = np.round(values)
    cuts = fit_bins(values[:, None], max_bin).cuts[0]
    return np.searchsorted(values, cuts, side="right") / values.size


def mismatch(ranking: CutRanking, feature: PublicFeature, edges_at: np.ndarray | None = None) -> float:
    """How badly a ranked group fits a column. Missing values: the share the group flags against
    the public share. More thresholds than the column has
    bin edges cannot be. A value most rows share forces a tie at least that large, and few
    thresholds explain only so large a tie otherwise. Thresholds must sit near the edges the
    column's public distribution implies."""
    missing, levels, tie = group_traits(ranking)
    edges = max(feature.n_value_bins - 1, 1)
    atom = largest_atom(feature)
    levels_at = np.unique(ranking.thresholds[(ranking.thresholds > 0) & (ranking.thresholds < 1)])
    distance = 0.0
    if edges_at is not None and edges_at.size and levels_at.size:
        distance = float(np.abs(levels_at[:, None] - edges_at[None, :]).min(axis=1).mean()) * 20
    return (distance + abs(missing - feature.missing_share) * 10
            + max(0, levels - edges) / edges * 3
            + max(0.0, atom - tie - 0.1) * 5
            + max(0.0, tie - max(atom, 2.5 / (levels + 1))) * 5)


def attribute(rankings: list[CutRanking], sizes: list[int], features: list[PublicFeature],
              max_bin: int, signatures: list | None = None) -> dict[int, int]:
    """feature position -> group position, for the groups the assignment gives a column. A
    group whose cuts' constraints were seen (``signatures``) goes only to a column with the
    same public constraints."""
    # the largest groups, one per column at most: a big group left unnamed would otherwise cost
    # nothing, and splinters would win columns by fitting loosely
    ranked = sorted((i for i, size in enumerate(sizes) if size >= MIN_GROUP_CUTS), key=lambda i: -sizes[i])
    candidates = ranked[: len(features)]
    if not candidates or not features:
        return {}
    edges = [expected_edges(f, max_bin) for f in features]
    cost = np.array([[mismatch(rankings[i], f, e) for f, e in zip(features, edges)] for i in candidates])
    if signatures is not None:
        for row, i in enumerate(candidates):
            for column, feature in enumerate(features):
                if signatures[i] is not None and feature.signature is not None and signatures[i] != feature.signature:
                    cost[row, column] = _EXCLUDED
    groups, columns = linear_sum_assignment(cost)
    return {int(f): candidates[int(g)] for g, f in zip(groups, columns) if cost[g, f] < _EXCLUDED}


#: The cost of matching a group to a column whose public constraints differ from its cuts'.
_EXCLUDED = 1e12
