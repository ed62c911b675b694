"""Vertical ``plain`` training must grow exactly the trees central training grows."""

import numpy as np
import pandas as pd
import pytest

from teeboost.config import BoostParams
from teeboost.core.central import LocalOracle, train_central
from teeboost.data import split_columns
from teeboost.federation import train_local

from .helpers import federated_descriptions, split_descriptions


def central(active, passives, params, objective, n_classes=2, y=None):
    features = np.hstack([active.features, *[p.features for p in passives]])
    names = list(active.feature_names) + [n for p in passives for n in p.feature_names]
    labels = y if y is not None else active.labels
    widths = [len(active.feature_names)] + [len(p.feature_names) for p in passives]  # column samples are per party
    ensemble, owner = train_central(features, labels, params, objective, n_classes, party_features=widths)
    prediction = ensemble.predict(features.shape[0], LocalOracle(owner, features))
    return split_descriptions(ensemble, {0: (owner, names)}), prediction


@pytest.mark.parametrize("subsample, extra", [
    (1.0, {}), (0.8, {}), (0.8, {"colsample_bytree": 0.5, "reg_alpha": 0.5, "max_delta_step": 0.3}),
], ids=["all-rows", "subsample", "xgboost-regularised"])
def test_binary_vertical_equals_central(small_credit, subsample, extra):
    active, passives = small_credit
    params = BoostParams(n_trees=4, max_depth=4, subsample=subsample, random_state=7, max_bin=32, **extra)
    model, _ = train_local(active, passives, params)
    central_trees, central_pred = central(active, passives, params, "binary")
    assert federated_descriptions(model) == central_trees
    assert any(t.party[n] == 1 for t in model.active.ensemble.trees for n in range(t.n_nodes)), \
        "the passive party must own some splits, or the test proves nothing"
    pred = model.predict(active.features, [p.features for p in passives])
    assert np.array_equal(pred, central_pred)


def test_three_passive_parties_multiclass(credit_frame):
    frame = credit_frame.iloc[:2500].copy()
    frame["risk_class"] = pd.cut(frame["DebtRatio"].rank(pct=True), [0, 0.3, 0.7, 1.0], labels=False)
    frame = frame.drop(columns=["SeriousDlqin2yrs", "DebtRatio"])
    groups = [["age", "MonthlyIncome"], ["NumberOfDependents", "NumberOfOpenCreditLinesAndLoans"],
              ["NumberRealEstateLoansOrLines", "NumberOfTimes90DaysLate"]]
    active, passives = split_columns(frame, groups, label="risk_class", id_column="id")
    params = BoostParams(n_trees=3, max_depth=3, subsample=0.9, min_samples_leaf=5, max_bin=32)
    model, _ = train_local(active, passives, params)
    assert model.active.ensemble.objective == "multiclass"
    assert len(model.active.ensemble.trees) == 9  # one tree per class per round
    central_trees, central_pred = central(active, passives, params, "multiclass", 3)
    assert federated_descriptions(model) == central_trees
    owners = {t.party[n] for t in model.active.ensemble.trees for n in range(t.n_nodes) if not t.is_leaf(n)}
    assert owners - {0}, "passive parties must own splits"
    assert np.array_equal(model.predict(active.features, [p.features for p in passives]), central_pred)


def test_regression_vertical_equals_central(credit_frame):
    frame = credit_frame.iloc[:2000].drop(columns=["SeriousDlqin2yrs"])
    frame = frame.dropna(subset=["MonthlyIncome"])
    frame["log_income"] = np.log1p(frame.pop("MonthlyIncome"))
    active, passives = split_columns(frame, [["age", "NumberOfDependents"]], label="log_income", id_column="id")
    params = BoostParams(n_trees=3, max_depth=3, subsample=1.0, max_bin=32)
    model, _ = train_local(active, passives, params)
    assert model.active.ensemble.objective == "regression"
    central_trees, central_pred = central(active, passives, params, "regression")
    assert federated_descriptions(model) == central_trees
    assert np.array_equal(model.predict(active.features, [p.features for p in passives]), central_pred)
