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

    active_x = active.conform(model.active.feature_names, model.active.vocabularies,
                              "the active party's model").features
    passive_x = [d.conform(m.feature_names, m.vocabularies, f"passive party {m.index} ({m.name})").features
                 for d, m in zip(passives, model.passives)]
    return active_x, passive_x


def _labels_of(active: PartyData) -> np.ndarray:
    if active.labels is None:
        raise DataError(f"{active.source}: the active party has no label column")
    return active.labels


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
        params = self.params.replace(objective=self._objective_for(active))  # a mismatch surfaces before training
        model, run = train_local(active, passive, params, self.protocol, validation=eval_set,
                                 transcript=self.transcript, on_tree=self.on_tree, options=self.options)
        self.model_, self.report_ = model, run.to_dict()
        return self

    def _objective_for(self, active: PartyData) -> str:
        """The objective this estimator trains for these labels (its own, or the one it was given)."""
        raise NotImplementedError

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
    def load(cls, model_dir: str | Path, *, allow_simulated_tee: bool = False) -> "_VerticalBoost":
        """``allow_simulated_tee``: a strict model predicts between enclaves, which here are
        simulated (no hardware isolation) and so run only when asked to."""
        options = ProtocolOptions(allow_simulated_tee=allow_simulated_tee)
        model = FederatedModel.load(model_dir, options)
        estimator = cls(model.active.protocol, options=options)
        estimator.model_ = model
        return estimator


class VerticalBoostClassifier(_VerticalBoost):
    """Binary (logistic) or multiclass (softmax) classification."""

    _objectives = ("binary", "multiclass")

    def _objective_for(self, active: PartyData) -> str:
        labels = _labels_of(active)
        distinct = np.unique(labels)
        if self.params.objective is not None:
            return self.params.objective
        if distinct.size == 2:
            return "binary"
        if labels.dtype != object and not np.all(np.mod(distinct, 1) == 0):
            raise DataError(f"{active.source}: label column {active.label_name!r} holds continuous values "
                            f"(e.g. {distinct[np.flatnonzero(np.mod(distinct, 1))[0]]!r}); "
                            "use VerticalBoostRegressor for a numeric target")
        return "multiclass"

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

    def _objective_for(self, active: PartyData) -> str:
        labels = _labels_of(active)
        if labels.dtype == object:
            raise DataError(f"{active.source}: label column {active.label_name!r} holds text "
                            f"(e.g. {labels[0]!r}); use VerticalBoostClassifier for classes")
        return "regression"

    def predict(self, active: PartyData, passive: list[PartyData]) -> np.ndarray:
        return self._predict_raw(active, passive)
