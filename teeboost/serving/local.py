"""``LocalScorer``: a locally trained model directory (every party's files), scored in this process.

One operator holds every party's part of the model (a ``teeboost train`` directory, or an
active-only model with no passive part), so a request row carries every party's columns: the
active party's, then each passive party's, in the model's order. Scoring takes the path of
``teeboost predict --model-dir`` (``FederatedModel.predict_margin`` and the objective's link),
so both give the same numbers for the same rows.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from ..config import ProtocolOptions
from ..errors import ConfigError, DataError
from ..federation import FederatedModel
from ..parties.active import ensemble_digest
from .scorer import ScoredRows, plain_label

__all__ = ["LocalScorer"]


class LocalScorer:
    """A ``Scorer`` over a model directory holding every party's files. Rows are scored one
    request at a time (a lock): the model's routing is cheap next to HTTP, and a strict model
    starts its simulated enclaves per call."""

    kind = "local"

    def __init__(self, name: str, model_dir: str | Path, *, allow_simulated_tee: bool = False) -> None:
        self.name = name
        self.model_dir = Path(model_dir)
        if not (self.model_dir / "active.json").is_file():
            raise ConfigError(f"model {name!r}: {self.model_dir} holds no model (no active.json; 'teeboost train "
                              "--model-dir DIR' writes one)")
        model = FederatedModel.load(self.model_dir, ProtocolOptions(allow_simulated_tee=allow_simulated_tee))
        if model.strict and not allow_simulated_tee:
            raise ConfigError(f"model {name!r} in {self.model_dir} is a strict model: its rows are routed between "
                              "simulated enclaves (no hardware isolation); serve it with --allow-simulated-tee")
        ensemble = model.active.ensemble
        self._model = model
        self.version = ensemble_digest(ensemble)[:16]
        self.protocol = model.active.protocol
        self.objective = ensemble.objective
        self.classes = [plain_label(c) for c in ensemble.classes] if ensemble.classes is not None else []
        self.party_columns = [("active", list(model.active.feature_names)),
                              *((m.name, list(m.feature_names)) for m in model.passives)]
        self.feature_names = [c for _, columns in self.party_columns for c in columns]
        if len(set(self.feature_names)) != len(self.feature_names):
            raise ConfigError(f"model {name!r} in {self.model_dir}: two parties name a column alike, so a request "
                              "row could not say whose it is")
        self.vocabularies = {**model.active.vocabularies, **{n: v for m in model.passives
                                                             for n, v in m.vocabularies.items()}}
        edges = np.cumsum([0, *(len(columns) for _, columns in self.party_columns)])
        self._slices = [slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]
        self._lock = threading.Lock()

    def score(self, ids: list[str], features: np.ndarray) -> ScoredRows:
        features = np.asarray(features, dtype=np.float64)
        if features.ndim != 2 or features.shape != (len(ids), len(self.feature_names)):
            raise DataError(f"model {self.name!r}: {len(ids)} ids and features of shape {features.shape}; expected "
                            f"({len(ids)}, {len(self.feature_names)})")
        width = len(self.classes) if self.objective == "multiclass" else 1
        if not ids:
            return ScoredRows(np.empty((0, width)), [])
        parts = [features[:, s] for s in self._slices]
        with self._lock:
            model = self._model
            if model is None:
                raise RuntimeError(f"model {self.name!r} version {self.version} was closed: a request outlived its "
                                   "scorer")
            margin, traffic = model.predict_margin(parts[0], parts[1:])
        values = np.asarray(model.active.ensemble.loss.predict(margin), dtype=np.float64)
        return ScoredRows(values.reshape(len(ids), width), [None] * len(ids), traffic)

    def close(self) -> None:
        """Drop the model (after the registry's last request on it)."""
        with self._lock:
            self._model = None

    @property
    def closed(self) -> bool:
        return self._model is None
