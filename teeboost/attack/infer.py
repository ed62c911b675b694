"""Stage 1: every target feature's order of rows, from the transcript and public knowledge.

Its inputs are the attacked host's view and what the attack assumes is public (``PublicFeature``:
deciles, min/max, missing share, whole numbers); no argument carries ground truth, so nothing
here can read it. Two sources, strongest first:

- bin sums (plain, SecureBoost): the exact solver and EM of ``order`` give each row's bin;
- passive cuts (every protocol): cuts grouped by feature (``cuts``), each group ranked
  (``ranking``) and matched to a column (``attribution``); under plain and SecureBoost the
  feature of each cut is revealed, so no grouping is needed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .attribution import MIN_GROUP_CUTS, PublicFeature, attribute, group_traits
from .cuts import CutSet, indicator, cluster_cuts, cut_set
from .order import infer_bins
from .ranking import CutRanking, rank_rows
from .view import ActiveView

__all__ = ["InferredOrder", "infer_orders", "infer_held_orders"]


@dataclass
class InferredOrder:
    """What stage 1 concluded about one feature's rows."""

    scores: np.ndarray  # larger score, larger value; compared only within the feature
    missing: np.ndarray  # rows the attack believes have no value
    bins: np.ndarray  # bin where the transcript pins it (max_bin: missing), else -1
    source: str  # "bin sums", "revealed cuts", "grouped cuts" or "nothing"
    detail: dict = field(default_factory=dict)
    cuts: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))  # splits used (view index)


def _nothing(n_rows: int) -> InferredOrder:
    return InferredOrder(np.zeros(n_rows), np.zeros(n_rows, dtype=bool), np.full(n_rows, -1), "nothing")


def _from_histograms(view: ActiveView, party: int, feature: int) -> InferredOrder:
    posterior = infer_bins(view, party, feature)
    determined = posterior.determined()
    bins = np.where(determined, posterior.probabilities.argmax(axis=1), -1)
    missing = posterior.likely_missing()
    revealed = np.array([i for i, s in enumerate(view.splits) if s.party == party and s.feature == feature],
                        dtype=np.int64)
    return InferredOrder(posterior.expected_value_bin(), missing, bins, "bin sums",
                         {"observed_sums": posterior.constraints, "threshold_splits": posterior.split_constraints},
                         revealed)


def _extreme_tie(ranking: CutRanking) -> bool:
    """Most tied rows sit below or above every threshold: what missing values look like when
    all of a group's cuts send them the same way."""
    placed = ranking.touched & ~ranking.missing
    if not placed.any():
        return False
    values, counts = np.unique(ranking.scores[placed], return_counts=True)
    return int(counts.argmax()) in (0, values.size - 1) and counts.max() > 0.05 * placed.sum()


def _signature(view: ActiveView, cuts, group: np.ndarray):
    """The public constraints the cuts of a group were seen with (None: not seen, or mixed)."""
    seen = {view.splits[int(i)].signature for i in cuts.index[group]}
    return seen.pop() if len(seen) == 1 else None


def _by_signature(view: ActiveView, cuts, groups: list[np.ndarray]) -> list[np.ndarray]:
    """Cuts seen with different public constraints are on different columns: a group mixing
    them is split by them (what constraints let an N-TEE or 1-TEE active host tell apart)."""
    out = []
    for group in groups:
        signatures = [view.splits[int(i)].signature for i in cuts.index[group]]
        for signature in dict.fromkeys(signatures):
            out.append(group[[s == signature for s in signatures]])
    return out


def _join_split_features(cuts, groups: list[np.ndarray], rankings: list[CutRanking]):
    """Cuts on one column with missing values can form two groups, one per default side: the
    missing rows cross every pair between them. Two groups are joined when one ranking of both,
    with missing values modelled, contradicts no more cut sides than the two apart (plus 0.2%)."""
    groups, rankings = list(groups), list(rankings)
    merged = True
    while merged:
        merged = False
        for i in range(len(groups)):
            for j in range(i + 1, len(groups)):
                if min(groups[i].size, groups[j].size) < MIN_GROUP_CUTS:
                    continue
                if not (_extreme_tie(rankings[i]) or _extreme_tie(rankings[j])):
                    continue
                both = np.concatenate([groups[i], groups[j]])
                joint = rank_rows(cuts.subset(both))
                incidences = cuts.left[both].nnz + cuts.right[both].nnz
                if joint.contradictions <= rankings[i].contradictions + rankings[j].contradictions + 0.002 * incidences:
                    groups[i], rankings[i] = np.sort(both), joint
                    del groups[j], rankings[j]
                    merged = True
                    break
            if merged:
                break
    return groups, rankings


def _attribute_by_known(rankings: list[CutRanking], sizes: list[int], known: dict[int, tuple[np.ndarray, np.ndarray]],
                        mapping: dict[int, int]) -> dict[int, int]:
    """With a few known values of a column, its group is the one whose order agrees with them
    best (rank correlation above 0.3); columns without known values keep the blind choice."""
    from ..metrics import spearman

    out = dict(mapping)
    for feature, (rows, values) in known.items():
        present = ~np.isnan(values)
        if present.sum() < 5:
            continue
        fits = [(spearman(r.scores[rows[present]], values[present]) if size >= 2 else -1.0, i)
                for i, (r, size) in enumerate(zip(rankings, sizes))]
        if not fits:
            continue
        best, group = max(fits)
        if best > 0.3:
            out = {f: g for f, g in out.items() if g != group}
            out[feature] = group
    return out


def infer_orders(view: ActiveView, party: int, public: list[PublicFeature], targets: list[int],
                 known: dict[int, tuple[np.ndarray, np.ndarray]] | None = None) -> dict[int, InferredOrder]:
    """feature position (in ``party``'s columns) -> inferred order, for each of ``targets``.

    ``known`` is optional side knowledge the attack may be assumed to have: for some columns,
    the true values of a few rows (rows, values); it only helps name cut groups."""
    out: dict[int, InferredOrder] = {}
    has_sums = any(note.party == party for note in view.histograms)
    if has_sums:
        for feature in targets:
            out[feature] = _from_histograms(view, party, feature)
        return out
    cuts = cut_set(view.splits, party, view.n_rows)
    revealed = cuts.n_cuts and all(view.splits[i].feature >= 0 for i in cuts.index)
    if revealed:
        features = np.array([view.splits[i].feature for i in cuts.index])
        seen = [f for f in targets if (features == f).any()]
        group_list = [np.flatnonzero(features == f) for f in seen]
        mapping = {f: i for i, f in enumerate(seen)}
        source = "revealed cuts"
    else:
        group_list = _by_signature(view, cuts, cluster_cuts(cuts))
        source = "grouped cuts"
    rankings = [rank_rows(cuts.subset(g)) for g in group_list]
    if not revealed:
        group_list, rankings = _join_split_features(cuts, group_list, rankings)
        mapping = attribute(rankings, [g.size for g in group_list], public, view.max_bin,
                            [_signature(view, cuts, g) for g in group_list])
        if known:
            mapping = _attribute_by_known(rankings, [g.size for g in group_list], known, mapping)
    for feature in targets:
        if feature not in mapping:
            out[feature] = _nothing(view.n_rows)
            continue
        group = mapping[feature]
        ranking = rankings[group].with_missing(public[feature].missing_share)
        missing_share, levels, tie = group_traits(ranking)
        n_value_bins = int(view.n_value_bins[party][feature])
        bins = ranking.exact_bins(n_value_bins)
        bins[ranking.missing] = view.max_bin  # the missing-value bin
        out[feature] = InferredOrder(
            ranking.scores, ranking.missing, bins, source,
            {"cuts": int(group_list[group].size), "cut_groups": len(group_list), "levels": levels,
             "flagged_missing_share": missing_share, "largest_tie": tie, "iterations": ranking.iterations},
            cuts.index[group_list[group]])
    return out


def infer_held_orders(view: ActiveView, orders: dict[int, InferredOrder],
                      public: list[PublicFeature]) -> dict[int, InferredOrder]:
    """Held-out rows (routed through every tree for early stopping) have no bin sums, but each
    routing answer puts one on a side of a cut: stage 1 ranks them with the cuts it already
    attributed to each feature."""
    out = {}
    for feature, order in orders.items():
        splits = [view.splits[i] for i in order.cuts]
        if view.n_held == 0 or not splits:
            out[feature] = _nothing(view.n_held)
            continue
        held = CutSet(indicator([s.held_left for s in splits], view.n_held),
                      indicator([s.held_right for s in splits], view.n_held), order.cuts)
        ranking = rank_rows(held).with_missing(public[feature].missing_share)
        out[feature] = InferredOrder(ranking.scores, ranking.missing, np.full(view.n_held, -1), "routing answers",
                                     {"cuts": len(splits)}, order.cuts)
    return out
