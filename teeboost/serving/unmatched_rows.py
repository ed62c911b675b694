"""What ``teeboost predict`` does with a row its model cannot score (a passive party does not
hold the customer), the same choices ``teeboost serve`` offers (docs/serving.md):

- ``empty``: the row is written with empty scores, its ``reason`` column saying why;
- ``error``: nothing is written; the error counts the rows and names the party;
- ``fallback``: a named active-only model (``--fallback-model DIR``) scores it, and the row's
  ``scored_by`` column names that model and version (``reason`` says why).

Never silent: whenever a row was not scored by the model, the output gains ``scored_by`` and
``reason`` columns. The default is ``[serving] on_unmatched`` of the active party's config
(with ``[serving] fallback_model``), else ``empty``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ConfigError, DataError

if TYPE_CHECKING:
    import pandas as pd

    from ..data import PartyData

__all__ = ["UnmatchedPolicy", "write_unmatched", "POLICIES"]

POLICIES = ("empty", "error", "fallback")


@dataclass(frozen=True)
class UnmatchedPolicy:
    how: str
    fallback: Path | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace, config=None) -> "UnmatchedPolicy":
        how, fallback = args.on_unmatched, args.fallback_model
        serving = getattr(config, "serving", None)
        if how is None and serving is not None and isinstance(serving.on_unmatched, str):
            how = serving.on_unmatched
        if fallback is None and serving is not None and isinstance(serving.fallback_model, str):
            dirs = serving.models.get(serving.fallback_model)
            fallback = dirs[0] if dirs else None
            if how is None:
                how = "fallback"
        how = how or "empty"
        if how == "fallback" and fallback is None:
            raise ConfigError("--on-unmatched fallback needs --fallback-model DIR (a model trained on the active "
                              "party's columns only), or [serving] fallback_model naming one of [serving] models")
        return cls(how, fallback)


def write_unmatched(out: pd.DataFrame, reasons: list[str | None], active: PartyData, policy: UnmatchedPolicy,
                    model, allow_simulated_tee: bool = False) -> pd.DataFrame:
    """``out``: one row per input row, NaN scores where ``reasons[i]`` says why the model did
    not score it. -> the frame to write (error: raises)."""
    unscored = np.array([r is not None for r in reasons], dtype=bool)
    if not unscored.any():
        return out
    if policy.how == "error":
        first = next(r for r in reasons if r is not None)
        raise DataError(f"{int(unscored.sum())} of {len(reasons)} row(s) cannot be scored by the model ({first}; "
                        "--on-unmatched empty writes them with empty scores, --on-unmatched fallback scores them "
                        "with an active-only model)")
    out = out.copy()
    out["scored_by"] = np.where(unscored, "", model.label)
    out["reason"] = [r or "" for r in reasons]
    if policy.how == "fallback":
        _fallback(out, unscored, active, policy.fallback, model, allow_simulated_tee)
    return out


def _fallback(out: pd.DataFrame, unscored: np.ndarray, active: PartyData, directory: Path, model,
              allow_simulated_tee: bool) -> None:
    from ..config import ProtocolOptions
    from ..federation import FederatedModel
    from ..parties.active import ensemble_digest

    fallback = FederatedModel.load(directory, ProtocolOptions(allow_simulated_tee=allow_simulated_tee))
    ensemble = fallback.active.ensemble
    where = f"the fallback model in {directory}"
    if fallback.passives:
        raise ConfigError(f"{where} has passive parties; a fallback is trained on the active party's columns only")
    if (ensemble.objective, list(ensemble.classes or [])) != (model.objective, list(model.classes or [])):
        raise ConfigError(f"{where} predicts {ensemble.objective} {list(ensemble.classes or [])}, the model "
                          f"{model.objective} {list(model.classes or [])}")
    rows = np.flatnonzero(unscored)
    features = active.take(rows).conform(fallback.active.feature_names, fallback.active.vocabularies, where).features
    margin, _ = fallback.predict_margin(features, [])
    values = np.asarray(ensemble.loss.predict(margin))
    columns = [c for c in out.columns if c.startswith("probability_")]
    values = values.reshape(rows.size, -1) if values.ndim > 1 else values.reshape(rows.size, 1)
    for k, column in enumerate(columns or ["prediction"]):
        out.loc[out.index[rows], column] = values[:, k if values.shape[1] > 1 else 0]
    if columns and "prediction" in out.columns:
        classes = list(ensemble.classes)
        picked = (values[:, 0] >= 0.5).astype(int) if len(columns) == 1 else values.argmax(axis=1)
        labels = classes[1:] if len(columns) == 1 else classes
        out.loc[out.index[rows], "prediction"] = [classes[int(p)] if len(columns) > 1 else
                                                  (labels[0] if p else classes[0]) for p in picked]
    out.loc[out.index[rows], "scored_by"] = f"fallback@{ensemble_digest(ensemble)[:16]}"
