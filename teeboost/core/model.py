"""The active party's model: base margins, trees and what the objective needs to predict.

It holds no thresholds of any party (not even its own: those live in its owner table), so
it can be shared with a passive party's auditor without revealing anyone's data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ModelFileError
from .loss import Objective, make_objective
from .predict import RoutingOracle, leaf_assignments, tree_outputs
from .tree import Tree

__all__ = ["Ensemble"]


@dataclass
class Ensemble:
    objective: str
    base_margin: np.ndarray  # (n_outputs,)
    trees: list[Tree] = field(default_factory=list)
    classes: list[Any] | None = None  # original label values for classifiers
    best_round: int | None = None
    best_score: float | None = None  # the watched validation metric at ``best_round`` (early stopping)
    # what defines the loss besides its name (tweedie_variance_power, huber_slope): the export and
    # the held-out metric need it
    objective_params: dict[str, float] = field(default_factory=dict)

    @property
    def n_outputs(self) -> int:
        return int(self.base_margin.size)

    @property
    def loss(self) -> Objective:
        # predicting: delta_step is moot
        return make_objective(self.objective, max(self.n_outputs, 2), **self.objective_params)

    def margin(self, n_rows: int, oracle: RoutingOracle) -> np.ndarray:
        rows = np.arange(n_rows)
        out = np.tile(self.base_margin, (n_rows, 1))
        if self.trees:
            out += tree_outputs(self.trees, leaf_assignments(self.trees, rows, oracle), self.n_outputs)
        return out

    def predict(self, n_rows: int, oracle: RoutingOracle) -> np.ndarray:
        """Probabilities of class 1 (binary), class probabilities (multiclass) or values."""
        return self.loss.predict(self.margin(n_rows, oracle))

    def to_dict(self) -> dict[str, Any]:
        return {
            "objective": self.objective,
            "base_margin": [float(v) for v in self.base_margin],
            "classes": self.classes,
            "best_round": self.best_round,
            # only when set: a strict model publishes none, and its digest must not change
            **({"best_score": self.best_score} if self.best_score is not None else {}),
            # only when the loss has any: older models' digests stay as they were
            **({"objective_params": dict(self.objective_params)} if self.objective_params else {}),
            "trees": [t.to_dict() for t in self.trees],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Ensemble":
        try:
            ensemble = cls(
                objective=str(data["objective"]),
                base_margin=np.asarray(data["base_margin"], dtype=np.float64),
                trees=[Tree.from_dict(t) for t in data["trees"]],
                classes=data.get("classes"),
                best_round=data.get("best_round"),
                best_score=None if data.get("best_score") is None else float(data["best_score"]),
                objective_params={str(k): float(v) for k, v in (data.get("objective_params") or {}).items()},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ModelFileError(f"malformed ensemble: {exc}") from None
        unknown = set(ensemble.objective_params) - {"tweedie_variance_power", "huber_slope"}
        if unknown:
            raise ModelFileError(f"malformed ensemble: unknown objective parameter(s) {', '.join(sorted(unknown))}")
        for index, tree in enumerate(ensemble.trees):
            if not 0 <= tree.output < ensemble.n_outputs:
                raise ModelFileError(f"tree {index} adds to output {tree.output} of {ensemble.n_outputs}")
        return ensemble
