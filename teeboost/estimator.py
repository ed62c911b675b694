"""The Python API: scikit-learn-like estimators over a federation run in this process.

    model = VerticalBoostClassifier(protocol="plain", n_trees=5).fit(active, [passive])
    proba = model.predict_proba(active_test, [passive_test])
    model.report_   # seconds, bytes by direction and message type, per-tree progress

The CLI calls exactly this code.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .config import BoostParams, ProtocolOptions
from .core.boosting import TreeProgress
from .data import PartyData, align_parties
from .errors import ConfigError, DataError
from .federation import FederatedModel, train_local

__all__ = ["VerticalBoostClassifier", "VerticalBoostRegressor", "party_features"]


def party_features(model: FederatedModel, active: PartyData, passives: list[PartyData]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Each party's columns in the order its model expects, selected by name."""
    if len(passives) != len(model.passives):
        raise DataError(f"the model was trained with {len(model.passives)} passive parties, got {len(passives)}")
    passives = align_parties(active, passives)

    def pick(data: PartyData, names: list[str], who: str) -> np.ndarray:
        position = {n: i for i, n in enumerate(data.feature_names)}
        missing = [n for n in names if n not in position]
        if missing:
            raise DataError(f"{data.source}: {who} needs column(s) {', '.join(map(repr, missing))}")
        return data.features[:, [position[n] for n in names]]

    active_x = pick(active, model.active.feature_names, "the active party's model")
    passive_x = [pick(d, m.feature_names, f"passive party {m.index} ({m.name})")
                 for d, m in zip(passives, model.passives)]
    return active_x, passive_x


class _VerticalBoost:
    _objectives: tuple[str, ...] = ()

    def __init__(self, protocol: str = "plain", *, transcript: str | Path | None = None,
                 on_tree: Callable[[TreeProgress], None] | None = None, options: ProtocolOptions | None = None,
                 allow_simulated_tee: bool = False, **params: Any) -> None:
        """``allow_simulated_tee``: ntee/onetee run on the simulated enclave backend (no
        hardware isolation) only when asked to."""
        self.protocol = protocol
        self.options = dataclasses.replace(options or ProtocolOptions(), allow_simulated_tee=allow_simulated_tee) \
            if allow_simulated_tee else (options or ProtocolOptions())
        self.transcript = transcript
        self.on_tree = on_tree
        self.params = BoostParams(**params)
        if self.params.objective is not None and self.params.objective not in self._objectives:
            raise ConfigError(f"objective={self.params.objective!r} is not valid for {type(self).__name__}")
        self.model_: FederatedModel | None = None
        self.report_: dict[str, Any] | None = None

    def fit(self, active: PartyData, passive: list[PartyData],
            eval_set: tuple[PartyData, list[PartyData]] | None = None) -> "_VerticalBoost":
        model, run = train_local(active, passive, self.params, self.protocol, validation=eval_set,
                                 transcript=self.transcript, on_tree=self.on_tree, options=self.options)
        if model.active.ensemble.objective not in self._objectives:
            raise DataError(
                f"{active.source}: the label looks like a {model.active.ensemble.objective} target; "
                f"use {'VerticalBoostRegressor' if model.active.ensemble.objective == 'regression' else 'VerticalBoostClassifier'}"
                " or set objective explicitly"
            )
        self.model_, self.report_ = model, run.to_dict()
        return self

    def _fitted(self) -> FederatedModel:
        if self.model_ is None:
            raise ConfigError(f"this {type(self).__name__} is not fitted yet; call fit first")
        return self.model_

    def _predict_raw(self, active: PartyData, passive: list[PartyData]) -> np.ndarray:
        model = self._fitted()
        active_x, passive_x = party_features(model, active, passive)
        return model.predict(active_x, passive_x)

    def save(self, model_dir: str | Path) -> list[Path]:
        return self._fitted().save(model_dir)

    @classmethod
    def load(cls, model_dir: str | Path) -> "_VerticalBoost":
        model = FederatedModel.load(model_dir)
        estimator = cls(model.active.protocol)
        estimator.model_ = model
        return estimator


class VerticalBoostClassifier(_VerticalBoost):
    """Binary (logistic) or multiclass (softmax) classification."""

    _objectives = ("binary", "multiclass")

    @property
    def classes_(self) -> list:
        return list(self._fitted().active.ensemble.classes or [])

    def predict_proba(self, active: PartyData, passive: list[PartyData]) -> np.ndarray:
        """(n_rows, n_classes) probabilities, columns in ``classes_`` order."""
        raw = self._predict_raw(active, passive)
        return np.column_stack([1.0 - raw, raw]) if raw.ndim == 1 else raw

    def predict(self, active: PartyData, passive: list[PartyData]) -> np.ndarray:
        proba = self.predict_proba(active, passive)
        return np.asarray(self.classes_, dtype=object)[np.argmax(proba, axis=1)]


class VerticalBoostRegressor(_VerticalBoost):
    """Squared-error regression."""

    _objectives = ("regression",)

    def predict(self, active: PartyData, passive: list[PartyData]) -> np.ndarray:
        return self._predict_raw(active, passive)
