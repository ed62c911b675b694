"""Small trained federations shared by the explanation and export tests (each trained once
per session): a model, and held-out rows as each party holds them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
import xgboost as xgb

from teeboost.config import BoostParams, ProtocolOptions
from teeboost.data import PartyData, split_columns
from teeboost.datasets import (DIAMONDS_LABEL, DIAMONDS_PASSIVE, GIVE_ME_SOME_CREDIT_ID, GIVE_ME_SOME_CREDIT_LABEL,
                               GIVE_ME_SOME_CREDIT_PASSIVE, load_diamonds, load_give_me_some_credit)
from teeboost.estimator import party_features
from teeboost.federation import FederatedModel, train_local

SIMULATED = ProtocolOptions(allow_simulated_tee=True)
N_TRAIN = 8000


@dataclass
class Trained:
    model: FederatedModel
    active_x: np.ndarray  # held-out rows, each party's columns in its model's order
    passive_x: list[np.ndarray]

    @property
    def joined_x(self) -> np.ndarray:
        """The joined table of an export: active's columns, then each passive's."""
        return np.hstack([self.active_x, *self.passive_x])


def _train(frame: pd.DataFrame, passive_columns: list[list[str]], label: str, params: BoostParams,
           protocol: str = "plain", n_train: int = N_TRAIN) -> Trained:
    if passive_columns:
        active, passives = split_columns(frame, passive_columns, label=label, id_column=GIVE_ME_SOME_CREDIT_ID)
    else:
        active, passives = PartyData.from_frame(frame, id_column=GIVE_ME_SOME_CREDIT_ID, label=label,
                                                name="active"), []
    train, test = np.arange(n_train), np.arange(n_train, active.n_rows)
    model, _ = train_local(active.take(train), [p.take(train) for p in passives], params, protocol,
                           options=SIMULATED)
    active_x, passive_x = party_features(model, active.take(test), [p.take(test) for p in passives])
    return Trained(model, active_x, passive_x)


def _credit() -> pd.DataFrame:
    return load_give_me_some_credit()


@lru_cache(maxsize=None)
def credit_binary(protocol: str = "plain") -> Trained:
    return _train(_credit(), [GIVE_ME_SOME_CREDIT_PASSIVE], GIVE_ME_SOME_CREDIT_LABEL,
                  BoostParams(n_trees=10, max_depth=4, subsample=0.8, max_bin=32), protocol)


@lru_cache(maxsize=None)
def credit_strict() -> Trained:
    return _train(_credit(), [GIVE_ME_SOME_CREDIT_PASSIVE], GIVE_ME_SOME_CREDIT_LABEL,
                  BoostParams(n_trees=2, max_depth=2, subsample=0.8, max_bin=32), "strict", n_train=1500)


@lru_cache(maxsize=None)
def credit_two_passives() -> Trained:
    """Three parties: the active one, demographics, credit lines."""
    passives = [["age", "MonthlyIncome", "NumberOfDependents"],
                ["NumberOfOpenCreditLinesAndLoans", "NumberRealEstateLoansOrLines", "DebtRatio"]]
    return _train(_credit(), passives, GIVE_ME_SOME_CREDIT_LABEL, BoostParams(n_trees=8, max_depth=4, subsample=0.8, max_bin=32))


@lru_cache(maxsize=None)
def credit_multiclass() -> Trained:
    """Three classes: times 30-59 days late, capped at 2."""
    frame = _credit().drop(columns=[GIVE_ME_SOME_CREDIT_LABEL])
    frame["late"] = np.minimum(frame.pop("NumberOfTime30-59DaysPastDueNotWorse"), 2)
    return _train(frame, [GIVE_ME_SOME_CREDIT_PASSIVE], "late",
                  BoostParams(n_trees=6, max_depth=3, objective="multiclass", subsample=0.8, max_bin=32))


@lru_cache(maxsize=None)
def credit_regression() -> Trained:
    """Age from the other columns (age itself left out)."""
    frame = _credit().drop(columns=[GIVE_ME_SOME_CREDIT_LABEL])
    frame = frame[frame["age"] > 0]
    return _train(frame, [[c for c in GIVE_ME_SOME_CREDIT_PASSIVE if c != "age"]], "age",
                  BoostParams(n_trees=10, max_depth=4, objective="regression", subsample=0.8, max_bin=32))


@lru_cache(maxsize=None)
def credit_poisson() -> Trained:
    """Number of dependents (a count) from the other columns."""
    frame = _credit().drop(columns=[GIVE_ME_SOME_CREDIT_LABEL])
    frame = frame[frame["NumberOfDependents"].notna()]
    return _train(frame, [[c for c in GIVE_ME_SOME_CREDIT_PASSIVE if c != "NumberOfDependents"]],
                  "NumberOfDependents", BoostParams(n_trees=10, max_depth=4, objective="poisson", subsample=0.8, max_bin=32))


@lru_cache(maxsize=None)
def credit_one_party() -> Trained:
    """Every feature at the active party: its players are exactly XGBoost's features."""
    return _train(_credit(), [], GIVE_ME_SOME_CREDIT_LABEL, BoostParams(n_trees=10, max_depth=4, subsample=0.8, max_bin=32), n_train=3000)


@lru_cache(maxsize=None)
def credit_one_party_multiclass() -> Trained:
    frame = _credit().drop(columns=[GIVE_ME_SOME_CREDIT_LABEL])
    frame["late"] = np.minimum(frame.pop("NumberOfTime30-59DaysPastDueNotWorse"), 2)
    return _train(frame, [], "late", BoostParams(n_trees=5, max_depth=3, objective="multiclass", subsample=0.8, max_bin=32), n_train=3000)


@lru_cache(maxsize=None)
def diamonds_frame() -> pd.DataFrame:
    """12,000 diamonds: the first N_TRAIN rows train :func:`diamonds_categorical`, the rest are held out."""
    return load_diamonds().sample(12000, random_state=0).reset_index(drop=True)


@lru_cache(maxsize=None)
def diamonds_categorical() -> Trained:
    """Text grades as categories: cut at the active party, color and clarity at the lab."""
    return _train(diamonds_frame().copy(), [DIAMONDS_PASSIVE], DIAMONDS_LABEL, BoostParams(n_trees=10, max_depth=4, subsample=0.8, max_bin=32))


@lru_cache(maxsize=None)
def categorical_with_other_and_missing() -> Trained:
    """A passive categorical column with rare categories sharing "other", and missing values."""
    return _train(shops_frame().copy(), [["shop", "z"]], "y", BoostParams(n_trees=8, max_depth=3, subsample=0.8, max_bin=32), n_train=4000)


@lru_cache(maxsize=None)
def shops_frame() -> pd.DataFrame:
    """90 shops (some rare), every 13th missing; the first 4,000 rows train, the rest are held out."""
    rng = np.random.default_rng(3)
    n = 6000
    shop = rng.integers(0, 90, n)
    x = rng.normal(size=n)
    effect = np.sin(shop)  # shops differ, rare ones included
    y = (effect + 0.7 * x + rng.normal(scale=0.5, size=n) > 0).astype(int)
    frame = pd.DataFrame({"id": [f"r{i}" for i in range(n)], "x": x, "y": y,
                          "shop": [f"shop{s}" for s in shop], "z": rng.normal(size=n)})
    frame.loc[::13, "shop"] = None
    return frame


def load_booster(document: dict) -> xgb.Booster:
    booster = xgb.Booster()
    booster.load_model(bytearray(json.dumps(document).encode("utf-8")))
    return booster


def joined_matrix(booster: xgb.Booster, x: np.ndarray) -> xgb.DMatrix:
    """Joined rows as XGBoost reads them: NaN missing, categorical columns as category codes."""
    return xgb.DMatrix(x, feature_names=booster.feature_names, feature_types=booster.feature_types, missing=np.nan,
                       enable_categorical=True)
