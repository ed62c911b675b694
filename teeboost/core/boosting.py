"""The boosting loop the active party runs: gradients, subsampling, trees, early stopping.

It is protocol-free: split finding goes through a ``SplitFinder`` and prediction of rows the
tree did not see (rows left out by subsampling, validation rows) through a
``RoutingOracle``. Randomness comes only from ``params.random_state``.

Sample weights (and ``scale_pos_weight``) multiply each row's (g, h) here, before the
gradients are encoded: every protocol then encrypts, masks or seals weighted gradients
exactly as it does unweighted ones, so weights never leave the active party in the clear.
Every round scores the validation rows by each metric of ``params.metrics_for`` (XGBoost's
``evals_result``); early stopping watches the last one, as XGBoost does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..config import BoostParams
from ..errors import ConfigError
from ..metrics import evaluate, higher_is_better
from .gradients import EncodedGradients
from .grower import SplitFinder, TreeGrower
from .loss import Objective
from .model import Ensemble
from .predict import RoutingOracle, leaf_assignments, tree_outputs

__all__ = ["Booster", "BoostState", "TreeProgress", "Validation", "sample_rows", "row_weights"]


@dataclass(frozen=True)
class TreeProgress:
    """Reported after every tree (drives progress bars and the run report)."""

    tree_index: int
    round_index: int
    output: int
    n_leaves: int
    seconds: float
    valid_metric: float | None = None  # the metric early stopping watches (the last one), after a round


@dataclass
class Validation:
    """Held-out rows for early stopping; their features stay with their parties. ``weight``:
    optional sample weights of the metrics (not scaled by ``scale_pos_weight``, as XGBoost)."""

    labels: np.ndarray
    oracle: RoutingOracle
    weight: np.ndarray | None = None


def row_weights(params: BoostParams, objective: str, labels: np.ndarray,
                sample_weight: np.ndarray | None) -> np.ndarray | None:
    """Each training row's weight: its sample weight times ``scale_pos_weight`` for positive
    rows (label 1) of a binary objective; None when every row weighs 1."""
    weight = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    if weight is not None and weight.shape != labels.shape:
        raise ValueError(f"{weight.size} sample weights for {labels.size} training rows")
    if params.scale_pos_weight != 1.0:
        if objective != "binary":
            raise ConfigError(f"scale_pos_weight={params.scale_pos_weight} applies to binary classification only, "
                              f"not objective={objective!r}")
        scale = np.where(labels == 1, params.scale_pos_weight, 1.0)
        weight = scale if weight is None else weight * scale
    if weight is not None and np.all(weight == 1.0):
        return None  # an unweighted run, bit for bit
    return weight


def sample_rows(rng: np.random.Generator, n_rows: int, fraction: float) -> np.ndarray:
    """Rows kept for one round (each with probability ``fraction``, XGBoost-style)."""
    if fraction >= 1.0:
        return np.arange(n_rows, dtype=np.int64)
    rows = np.flatnonzero(rng.random(n_rows) < fraction).astype(np.int64)
    if rows.size == 0:  # tiny data: never grow a tree over nothing
        rows = np.array([int(rng.integers(n_rows))], dtype=np.int64)
    return rows


@dataclass
class BoostState:
    """Everything the boosting loop carries from one round to the next. Saving it after a
    round and continuing from it grows exactly the trees an uninterrupted run grows: the
    margins are kept bit for bit and the subsampling generator resumes mid-stream."""

    ensemble: Ensemble
    margin: np.ndarray  # (n_rows, n_outputs) training margins
    rng_state: dict
    next_round: int = 0
    valid_margin: np.ndarray | None = None
    best_value: float | None = None  # of the watched (last) metric: XGBoost's best_score
    best_round: int = -1
    evals: dict[str, list[float]] = field(default_factory=dict)  # metric -> value after each round

    @classmethod
    def start(cls, objective: str, base_margin: np.ndarray, n_rows: int, random_state: int,
              classes: list | None, n_valid: int | None, objective_params: dict | None = None) -> "BoostState":
        return cls(
            ensemble=Ensemble(objective, base_margin, classes=classes, objective_params=dict(objective_params or {})),
            margin=np.tile(base_margin, (n_rows, 1)),
            rng_state=np.random.default_rng(random_state).bit_generator.state,
            valid_margin=None if n_valid is None else np.tile(base_margin, (n_valid, 1)),
        )

    def check_fits(self, n_rows: int, n_outputs: int, n_valid: int | None) -> None:
        """A state saved for other data is refused rather than silently continued."""
        if self.margin.shape != (n_rows, n_outputs):
            raise ValueError(f"boosting state has margins for {self.margin.shape} rows x outputs, "
                             f"this run {(n_rows, n_outputs)}")
        saved_valid = None if self.valid_margin is None else self.valid_margin.shape[0]
        if saved_valid != n_valid:
            raise ValueError(f"boosting state has {saved_valid} validation rows, this run {n_valid}")


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
        self.state: BoostState | None = None  # of the last ``fit``

    def fit(
        self,
        labels: np.ndarray,
        *,
        classes: list | None = None,
        validation: Validation | None = None,
        state: BoostState | None = None,
        on_round: Callable[[BoostState], None] | None = None,
        sample_weight: np.ndarray | None = None,
    ) -> Ensemble:
        """Grow the ensemble; from ``state`` (a checkpoint) if given. ``on_round`` sees the
        state after every completed round, which is all a checkpoint needs. The state stays
        on ``self.state`` (evaluation history, best score)."""
        params, objective = self.params, self.objective
        n_rows = labels.size
        n_out = objective.n_outputs
        weight = row_weights(params, objective.name, labels, sample_weight)
        grower = TreeGrower(self.finder, params, n_rows)
        self.finder.expect_trees(params.n_trees * n_out)
        if state is None:
            state = BoostState.start(objective.name, objective.base_margin(labels, weight), n_rows,
                                     params.random_state, classes,
                                     None if validation is None else validation.labels.size, objective.params)
        else:
            state.check_fits(n_rows, n_out, None if validation is None else validation.labels.size)
        self.state = state
        ensemble, margin = state.ensemble, state.margin
        rng = np.random.default_rng()
        rng.bit_generator.state = state.rng_state
        metrics = params.metrics_for(objective.name)
        watched = metrics[-1]
        higher_better = higher_is_better(watched)
        stopped = False

        for round_index in range(state.next_round, params.n_trees):
            g, h = objective.gradients(labels, margin)
            if weight is not None:
                g, h = g * weight[:, None], h * weight[:, None]
            rows = sample_rows(rng, n_rows, params.subsample)
            in_sample = np.zeros(n_rows, dtype=bool)
            in_sample[rows] = True
            left_out = np.flatnonzero(~in_sample)
            del in_sample
            new_trees = []
            for output in range(n_out):
                started = time.perf_counter()
                tree_index = round_index * n_out + output
                gradients = EncodedGradients.encode(g[:, output], h[:, output], rows, n_rows)
                if output == n_out - 1:
                    g = h = None  # every output is encoded: the float gradients need not outlive them
                grown = grower.grow(tree_index, output, rows, gradients)
                del gradients  # before the next tree's are encoded
                tree = grown.tree
                for leaf, leaf_rows in grown.leaf_rows.items():
                    margin[leaf_rows, output] += tree.value[leaf]
                if left_out.size:
                    leaves = leaf_assignments([tree], left_out, self.train_oracle)
                    margin[left_out, output] += np.asarray(tree.value)[leaves[0]]
                del grown  # its leaves' rows
                ensemble.trees.append(tree)
                new_trees.append(tree)
                progress = TreeProgress(
                    tree_index, round_index, output,
                    n_leaves=sum(tree.is_leaf(n) for n in range(tree.n_nodes)),
                    seconds=time.perf_counter() - started,
                )
                if validation is None or output < n_out - 1:
                    self.on_tree(progress)

            if validation is not None:
                n_valid = validation.labels.size
                leaves = leaf_assignments(new_trees, np.arange(n_valid), validation.oracle)
                state.valid_margin += tree_outputs(new_trees, leaves, n_out)
                prediction = objective.predict(state.valid_margin)
                for name in metrics:
                    state.evals.setdefault(name, []).append(
                        evaluate(name, validation.labels, prediction, validation.weight,
                                 huber_slope=params.huber_slope))
                value = state.evals[watched][-1]
                self.on_tree(
                    TreeProgress(
                        progress.tree_index, round_index, n_out - 1, progress.n_leaves,
                        progress.seconds, valid_metric=value,
                    )
                )
                best = state.best_value
                if best is None or (value > best if higher_better else value < best):
                    state.best_value, state.best_round = value, round_index
                elif (
                    params.early_stopping_rounds is not None
                    and round_index - state.best_round >= params.early_stopping_rounds
                ):
                    stopped = True
            state.next_round = round_index + 1
            state.rng_state = rng.bit_generator.state
            if stopped:
                break
            if on_round is not None and state.next_round < params.n_trees:
                on_round(state)

        if validation is not None and params.early_stopping_rounds is not None:
            keep = (state.best_round + 1) * n_out
            if keep < len(ensemble.trees):
                del ensemble.trees[keep:]
                self.on_truncate(keep)
            ensemble.best_round = state.best_round
            ensemble.best_score = state.best_value
        return ensemble

    def evals_result(self) -> dict[str, dict[str, list[float]]]:
        """XGBoost's shape: ``{"validation_0": {metric: [value per round]}}``; empty without
        validation rows."""
        if self.state is None or not self.state.evals:
            return {}
        return {"validation_0": {name: list(values) for name, values in self.state.evals.items()}}
