"""The boosting loop the active party runs: gradients, subsampling, trees, early stopping.

It is protocol-free: split finding goes through a ``SplitFinder`` and prediction of rows the
tree did not see (rows left out by subsampling, validation rows) through a
``RoutingOracle``. Randomness comes only from ``params.random_state``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..config import BoostParams
from ..metrics import HIGHER_IS_BETTER, evaluate
from .gradients import EncodedGradients
from .grower import SplitFinder, TreeGrower
from .loss import Objective
from .model import Ensemble
from .predict import RoutingOracle, leaf_assignments, tree_outputs

__all__ = ["Booster", "TreeProgress", "Validation", "sample_rows"]


@dataclass(frozen=True)
class TreeProgress:
    """Reported after every tree (drives progress bars and the run report)."""

    tree_index: int
    round_index: int
    output: int
    n_leaves: int
    seconds: float
    valid_metric: float | None = None


@dataclass
class Validation:
    """Held-out rows for early stopping; their features stay with their parties."""

    labels: np.ndarray
    oracle: RoutingOracle


def sample_rows(rng: np.random.Generator, n_rows: int, fraction: float) -> np.ndarray:
    """Rows kept for one round (each with probability ``fraction``, XGBoost-style)."""
    if fraction >= 1.0:
        return np.arange(n_rows, dtype=np.int64)
    rows = np.flatnonzero(rng.random(n_rows) < fraction).astype(np.int64)
    if rows.size == 0:  # tiny data: never grow a tree over nothing
        rows = np.array([int(rng.integers(n_rows))], dtype=np.int64)
    return rows


class Booster:
    """Trains an ``Ensemble`` with any split finder."""

    def __init__(
        self,
        params: BoostParams,
        objective: Objective,
        finder: SplitFinder,
        train_oracle: RoutingOracle,
        *,
        on_tree: Callable[[TreeProgress], None] | None = None,
        on_truncate: Callable[[int], None] | None = None,
    ) -> None:
        self.params = params
        self.objective = objective
        self.finder = finder
        self.train_oracle = train_oracle
        self.on_tree = on_tree or (lambda progress: None)
        self.on_truncate = on_truncate or (lambda n_trees: None)

    def fit(
        self,
        labels: np.ndarray,
        *,
        classes: list | None = None,
        validation: Validation | None = None,
    ) -> Ensemble:
        params, objective = self.params, self.objective
        n_rows = labels.size
        n_out = objective.n_outputs
        rng = np.random.default_rng(params.random_state)
        grower = TreeGrower(self.finder, params, n_rows)
        ensemble = Ensemble(objective.name, objective.base_margin(labels), classes=classes)
        margin = np.tile(ensemble.base_margin, (n_rows, 1))
        metric = objective.metric
        higher_better = HIGHER_IS_BETTER[metric]
        if validation is not None:
            valid_margin = np.tile(ensemble.base_margin, (validation.labels.size, 1))
            best_value, best_round = None, -1

        for round_index in range(params.n_trees):
            g, h = objective.gradients(labels, margin)
            rows = sample_rows(rng, n_rows, params.subsample)
            in_sample = np.zeros(n_rows, dtype=bool)
            in_sample[rows] = True
            left_out = np.flatnonzero(~in_sample)
            new_trees = []
            for output in range(n_out):
                started = time.perf_counter()
                tree_index = round_index * n_out + output
                gradients = EncodedGradients.encode(g[:, output], h[:, output], rows, n_rows)
                grown = grower.grow(tree_index, output, rows, gradients)
                tree = grown.tree
                for leaf, leaf_rows in grown.leaf_rows.items():
                    margin[leaf_rows, output] += tree.value[leaf]
                if left_out.size:
                    leaves = leaf_assignments([tree], left_out, self.train_oracle)
                    margin[left_out, output] += np.asarray(tree.value)[leaves[0]]
                ensemble.trees.append(tree)
                new_trees.append(tree)
                progress = TreeProgress(
                    tree_index, round_index, output,
                    n_leaves=sum(tree.is_leaf(n) for n in range(tree.n_nodes)),
                    seconds=time.perf_counter() - started,
                )
                if validation is None or output < n_out - 1:
                    self.on_tree(progress)

            if validation is None:
                continue
            n_valid = validation.labels.size
            leaves = leaf_assignments(new_trees, np.arange(n_valid), validation.oracle)
            valid_margin += tree_outputs(new_trees, leaves, n_out)
            value = evaluate(metric, validation.labels, objective.predict(valid_margin))
            self.on_tree(
                TreeProgress(
                    progress.tree_index, round_index, n_out - 1, progress.n_leaves,
                    progress.seconds, valid_metric=value,
                )
            )
            improved = best_value is None or (value > best_value if higher_better else value < best_value)
            if improved:
                best_value, best_round = value, round_index
            elif (
                params.early_stopping_rounds is not None
                and round_index - best_round >= params.early_stopping_rounds
            ):
                break

        if validation is not None and params.early_stopping_rounds is not None:
            keep = (best_round + 1) * n_out
            if keep < len(ensemble.trees):
                del ensemble.trees[keep:]
                self.on_truncate(keep)
            ensemble.best_round = best_round
        return ensemble
