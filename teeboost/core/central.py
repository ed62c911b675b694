"""Centralised training on one joined table: the reference every federation must equal.

One ``PartyColumns`` holds every column and answers split finding and routing itself, so
no message, channel or second party is involved. ``tests`` train this and the vertical
protocols on the same rows and compare trees and predictions exactly. Column samples
(``colsample_bytree``) are drawn per party, as a federation draws them: the joined table is
the parties' columns side by side, active party's first, and ``party_features`` says how
many each holds.
"""

from __future__ import annotations

import numpy as np

from ..config import BoostParams
from .binning import fit_bins
from .boosting import Booster
from .columns import PartyColumns
from .constraints import PartyConstraints, PathColumns
from .grower import AppliedSplit, SplitFinder
from .loss import make_objective
from .model import Ensemble
from .predict import RoutingOracle
from .split import SplitCriteria, SplitInfo, sampled_features
from .tree import OwnerTable

__all__ = ["CentralFinder", "LocalOracle", "train_central"]


class CentralFinder(SplitFinder):
    def __init__(self, columns: PartyColumns, criteria: SplitCriteria,
                 party_features: list[int] | None = None, constraints: PartyConstraints | None = None) -> None:
        self.columns = columns
        self.criteria = criteria
        self.party_features = [columns.n_features] if party_features is None else list(party_features)
        if sum(self.party_features) != columns.n_features or min(self.party_features, default=0) < 0:
            raise ValueError(f"party column counts {self.party_features} do not add up to the table's "
                             f"{columns.n_features} columns")
        self._sampled = None
        self.constraints = constraints  # of the joined table's columns
        self._paths = PathColumns()
        self._tree = -1
        self._codec = None
        self._node_rows = None

    def begin_tree(self, tree_index, rows, gradients):
        self._tree = tree_index
        self._codec = gradients.codec
        self._sampled = np.concatenate([sampled_features(self.criteria, party, tree_index, n)
                                        for party, n in enumerate(self.party_features)])
        self.columns.begin_tree(gradients)
        self._paths.reset()

    def find_splits(self, nodes, node_rows, limits=None):
        self._node_rows = node_rows
        found = []
        constrained = {}
        if limits is not None and self.constraints is not None:
            constrained = {"directions": self.constraints.directions, "bounds": limits.bounds_of(nodes),
                           "allowed": self.constraints.allowed(limits.sets_of(nodes), self._paths.of(nodes))}
        bests = self.columns.best(nodes, node_rows, self._codec, self.criteria, self._sampled, **constrained)
        for node, best in zip(nodes, bests):
            found.append(SplitInfo(node, 0, best.gain, best.feature, best.bin, best.default_left)
                         if best.valid else None)
        return found

    def end_tree(self):
        self.columns.end_tree()

    def apply_splits(self, splits, children, *, next_min_rows=0):
        out = []
        for split, (left, right) in zip(splits, children):
            record, went_left = self.columns.apply(self._node_rows.rows(split.node_id), split.feature,
                                                   split.bin, split.default_left, self._tree)
            if self.constraints is None:
                out.append(AppliedSplit(record, went_left))
                continue
            self._paths.split(split.node_id, left, right, split.feature)
            out.append(AppliedSplit(record, went_left, int(self.constraints.directions[split.feature]),
                                    int(self.constraints.membership[split.feature])))
        return out


class LocalOracle(RoutingOracle):
    """Answers routing questions from one owner table over raw values in this process."""

    def __init__(self, owner: OwnerTable, raw: np.ndarray) -> None:
        self.owner = owner
        self.raw = raw

    def route(self, questions):
        return {party: [self.owner.go_left(self.raw, record, rows) for record, rows in asked]
                for party, asked in questions.items()}


def train_central(
    features: np.ndarray, labels: np.ndarray, params: BoostParams, objective: str, n_classes: int = 2,
    party_features: list[int] | None = None, feature_names: list[str] | None = None,
) -> tuple[Ensemble, OwnerTable]:
    """Train on a joined numeric table; returns the trees and the single owner table.
    ``party_features``: columns per party, active first (None: one party holds them all);
    ``feature_names``: the columns' names, which constraints name."""
    bins = fit_bins(features, params.max_bin)
    columns = PartyColumns(bins, bins.transform(features))
    constraints = None
    if params.constraints.any:
        names = list(feature_names) if feature_names is not None else [f"f{i}" for i in range(features.shape[1])]
        params.constraints.check_held(set(names))
        constraints = params.constraints.for_party(names)
    booster = Booster(params, make_objective(objective, n_classes, **params.objective_options()),
                      CentralFinder(columns, SplitCriteria.from_params(params), party_features, constraints),
                      LocalOracle(columns.owner, features),
                      on_truncate=columns.owner.keep_trees_below)
    return booster.fit(labels), columns.owner
