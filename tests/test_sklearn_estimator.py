"""The estimators under scikit-learn's contract: parameters, clone, tools, checks, files."""

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.impute import SimpleImputer
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

from teeboost import PartyData, VerticalBoostClassifier, VerticalBoostRegressor
from teeboost.datasets import load_give_me_some_credit
from teeboost.errors import ConfigError, DataError

from .helpers import SMALL_ESTIMATOR

TELCO = {"telco": ["age", "MonthlyIncome"]}


@pytest.fixture(scope="module")
def credit():
    data = load_give_me_some_credit().iloc[:4000].reset_index(drop=True)
    return data.drop(columns=["id", "SeriousDlqin2yrs"]), data["SeriousDlqin2yrs"]


#: scikit-learn's checks a federated estimator does not meet, and why. Empty: all apply and pass
#: (sample weights, NaN as missing, text as categories, error wording included).
EXCLUDED_CHECKS: dict[str, str] = {}


@parametrize_with_checks([VerticalBoostClassifier(n_estimators=3, subsample=1.0, max_depth=3, max_bin=32),
                          VerticalBoostRegressor(n_estimators=3, subsample=1.0, max_depth=3, max_bin=32)],
                         expected_failed_checks=lambda estimator: EXCLUDED_CHECKS)
def test_scikit_learn_estimator_checks(estimator, check):
    """A one-party run (no ``parties``): what scikit-learn's checks can drive."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


def test_parameters_follow_the_contract_and_clone():
    model = VerticalBoostClassifier(protocol="ntee", parties=TELCO, n_estimators=7, eta=0.1, max_depth=4, subsample=0.8, max_bin=32)
    params = model.get_params()
    assert params["n_estimators"] == 7 and params["eta"] == 0.1 and params["parties"] is TELCO
    copy = clone(model)
    assert copy.get_params() == params
    copy.set_params(max_depth=2, reg_alpha=0.5)
    assert copy.max_depth == 2 and model.max_depth == 4
    with pytest.raises(ValueError, match="Invalid parameter"):
        model.set_params(n_tree=3)


def test_xgboost_names_are_training_parameters(credit):
    X, y = credit
    model = VerticalBoostClassifier(parties=TELCO, n_estimators=4, eta=0.2, gamma=0.1, reg_alpha=0.3,
                                    colsample_bytree=0.5, min_child_weight=2.0, max_delta_step=1.0,
                                    scale_pos_weight=3.0, subsample=1.0, max_depth=3, max_bin=32).fit(X, y)
    saved = model.model_.active.params
    assert (saved["n_trees"], saved["learning_rate"], saved["min_split_gain"], saved["reg_alpha"],
            saved["colsample_bytree"], saved["min_child_weight"], saved["max_delta_step"],
            saved["scale_pos_weight"]) == (4, 0.2, 0.1, 0.3, 0.5, 2.0, 1.0, 3.0)
    assert len(model.model_.active.ensemble.trees) == 4
    # the spellings teeboost had before: n_trees and min_split_gain
    older = VerticalBoostClassifier(parties=TELCO, n_trees=4, min_split_gain=0.1, subsample=1.0, max_depth=3, max_bin=32).fit(X, y)
    assert older.model_.active.params["n_trees"] == 4 and older.model_.active.params["min_split_gain"] == 0.1
    with pytest.raises(ConfigError, match="n_trees=3 and n_estimators=4 name the same parameter"):
        VerticalBoostClassifier(n_estimators=4, n_trees=3, max_depth=3, subsample=0.8, max_bin=32).fit(X, y)
    with pytest.raises(ConfigError, match="scale_pos_weight"):
        VerticalBoostRegressor(scale_pos_weight=2.0, **SMALL_ESTIMATOR).fit(X, y)


def test_fitted_attributes(credit):
    X, y = credit
    model = VerticalBoostClassifier(parties=TELCO, n_estimators=3, max_depth=3, subsample=0.8, max_bin=32).fit(X, y)
    assert list(model.classes_) == [0, 1] and model.classes_.dtype.kind == "i"
    assert model.n_features_in_ == X.shape[1]
    assert list(model.feature_names_in_) == list(X.columns)
    assert model.model_.passives[0].feature_names == ["age", "MonthlyIncome"]  # the mapping made two parties
    assert 0.9 < model.score(X, y) <= 1.0
    assert set(model.predict(X)) <= {0, 1}
    text = VerticalBoostClassifier(parties=TELCO, n_estimators=2, max_depth=3, subsample=0.8, max_bin=32).fit(X, np.where(y == 1, "late", "paid"))
    assert list(text.classes_) == ["late", "paid"] and set(text.predict(X.iloc[:50])) <= {"late", "paid"}


def test_cross_val_score_grid_search_and_pipeline(credit):
    X, y = credit
    model = VerticalBoostClassifier(parties=TELCO, n_estimators=3, max_depth=3, subsample=0.8, max_bin=32)
    scores = cross_val_score(model, X, y, cv=KFold(3), scoring="roc_auc")
    assert scores.shape == (3,) and np.all(scores > 0.75)
    search = GridSearchCV(model, {"max_depth": [2, 3], "n_estimators": [2, 4]}, cv=2, scoring="roc_auc").fit(X, y)
    assert search.best_params_["n_estimators"] in (2, 4) and search.best_score_ > 0.75
    assert search.best_estimator_.model_.passives[0].name == "telco"
    pipeline = make_pipeline(SimpleImputer(strategy="median").set_output(transform="pandas"),
                             VerticalBoostClassifier(parties=TELCO, n_estimators=3, max_depth=3, subsample=0.8, max_bin=32)).fit(X, y)
    assert pipeline.score(X, y) > 0.9


def test_cross_validation_runs_a_tee_protocol(credit):
    X, y = credit
    model = VerticalBoostClassifier(protocol="ntee", allow_simulated_tee=True, parties=TELCO, n_estimators=2, max_depth=3, subsample=0.8, max_bin=32)
    plain = VerticalBoostClassifier(parties=TELCO, n_estimators=2, max_depth=3, subsample=0.8, max_bin=32)
    ours = cross_val_score(model, X.iloc[:1500], y.iloc[:1500], cv=KFold(2), scoring="roc_auc")
    reference = cross_val_score(plain, X.iloc[:1500], y.iloc[:1500], cv=KFold(2), scoring="roc_auc")
    assert np.array_equal(ours, reference)  # ntee grows plain's trees


def test_party_frames_and_party_data_are_accepted(credit):
    X, y = credit
    bank = X.drop(columns=TELCO["telco"]).assign(default=y)
    telco = X[TELCO["telco"]]
    with pytest.raises(DataError, match="label="):
        VerticalBoostClassifier(n_estimators=2, max_depth=3, subsample=0.8, max_bin=32).fit(bank, [telco])
    by_frames = VerticalBoostClassifier(n_estimators=2, max_depth=3, subsample=0.8, max_bin=32).fit(bank, [telco], label="default")
    joined = VerticalBoostClassifier(parties=TELCO, n_estimators=2, max_depth=3, subsample=0.8, max_bin=32).fit(X, y)
    active = PartyData.from_frame(bank, label="default", name="bank")
    passive = [PartyData.from_frame(telco, name="telco")]
    by_parties = VerticalBoostClassifier(n_estimators=2, max_depth=3, subsample=0.8, max_bin=32).fit(active, passive)
    expected = joined.predict_proba(X)
    assert np.array_equal(by_parties.predict_proba(active, passive), expected)
    assert np.array_equal(by_frames.predict_proba(PartyData.from_frame(bank.drop(columns="default")),
                                                  [PartyData.from_frame(telco)]), expected)
    with pytest.raises(DataError, match="fitted on PartyData"):
        by_parties.predict(X)


def test_layout_errors_name_the_column_and_party(credit):
    X, y = credit
    with pytest.raises(DataError, match="party 'telco' holds column 'height'"):
        VerticalBoostClassifier(parties={"telco": ["height"]}, **SMALL_ESTIMATOR).fit(X, y)
    with pytest.raises(DataError, match="'age' is given to both 'telco' and 'insurer'"):
        VerticalBoostClassifier(parties={"telco": ["age"], "insurer": ["age"]}, **SMALL_ESTIMATOR).fit(X, y)
    model = VerticalBoostClassifier(parties=TELCO, n_estimators=2, max_depth=3, subsample=0.8, max_bin=32).fit(X, y)
    with pytest.raises(DataError, match="lacks column"):
        model.predict(X.drop(columns=["age"]))
    with pytest.raises(DataError, match="has 3 features, but VerticalBoostClassifier is expecting 10"):
        model.predict(X.to_numpy()[:, :3])


def test_early_stopping_needs_an_eval_set_and_reports_history(credit):
    X, y = credit
    with pytest.raises(ConfigError, match="early_stopping_rounds=3 needs validation data"):
        VerticalBoostClassifier(parties=TELCO, early_stopping_rounds=3, **SMALL_ESTIMATOR).fit(X, y)
    model = VerticalBoostClassifier(parties=TELCO, n_estimators=40, learning_rate=0.9, max_depth=5,
                                    early_stopping_rounds=3, eval_metric=["logloss", "auc"], subsample=0.8, max_bin=32)
    model.fit(X.iloc[:3000], y.iloc[:3000], eval_set=[(X.iloc[3000:], y.iloc[3000:])])
    history = model.evals_result()
    assert set(history) == {"validation_0"} and set(history["validation_0"]) == {"logloss", "auc"}
    auc = history["validation_0"]["auc"]
    assert model.best_iteration == int(np.argmax(auc)) and len(auc) == model.best_iteration + 4
    assert len(model.model_.active.ensemble.trees) == model.best_iteration + 1
    with pytest.raises(AttributeError, match="early stopping"):
        VerticalBoostClassifier(parties=TELCO, n_estimators=2, max_depth=3, subsample=0.8, max_bin=32).fit(X, y).best_iteration


def test_load_gives_back_settings_report_and_exact_predictions(tmp_path, credit):
    X, y = credit
    model = VerticalBoostClassifier(parties=TELCO, n_estimators=7, max_depth=4, learning_rate=0.1,
                                    reg_alpha=0.2, subsample=0.8, max_bin=32).fit(X, y)
    model.save(tmp_path)
    loaded = VerticalBoostClassifier.load(tmp_path)
    assert loaded.get_params() == {**model.get_params(), "on_tree": None, "options": None, "transcript": None}
    assert (loaded.n_estimators, loaded.max_depth, loaded.learning_rate) == (7, 4, 0.1)
    assert loaded.report_ == model.report_ and loaded.report_["n_samples"] == X.shape[0]
    assert np.array_equal(loaded.predict_proba(X), model.predict_proba(X))  # bit for bit
    assert np.array_equal(loaded.predict(X), model.predict(X)) and loaded.classes_.dtype == model.classes_.dtype
    assert np.array_equal(loaded.feature_importances_, model.feature_importances_)
    assert list(loaded.feature_names_in_) == list(X.columns)
    with pytest.raises(ConfigError, match="holds a VerticalBoostClassifier"):
        VerticalBoostRegressor.load(tmp_path)


def test_load_of_a_cli_model_takes_its_training_parameters(tmp_path, credit_parties):
    from teeboost.config import BoostParams
    from teeboost.federation import train_local

    active, passives = credit_parties
    model, _ = train_local(active.take(np.arange(3000)), [p.take(np.arange(3000)) for p in passives],
                           BoostParams(n_trees=7, max_depth=4, learning_rate=0.1, subsample=0.8, max_bin=32))
    model.save(tmp_path)
    loaded = VerticalBoostClassifier.load(tmp_path)
    assert (loaded.n_estimators, loaded.max_depth, loaded.learning_rate) == (7, 4, 0.1)
    assert loaded.report_ is None  # the CLI prints its report; files of one run stay byte-identical on resume


def test_regressor_predicts_values_and_margins(credit):
    X, _ = credit
    target = X["DebtRatio"].clip(upper=5.0)
    features = X.drop(columns=["DebtRatio"])
    model = VerticalBoostRegressor(parties=TELCO, n_estimators=10, subsample=1.0, max_depth=3, max_bin=32).fit(features, target)
    assert model.score(features, target) > 0.2
    assert np.array_equal(model.predict(features, output_margin=True), model.predict(features))
    counts = X["NumberOfOpenCreditLinesAndLoans"]
    poisson = VerticalBoostRegressor(parties=TELCO, objective="count:poisson", n_estimators=10, max_depth=3, subsample=0.8, max_bin=32).fit(
        X.drop(columns=["NumberOfOpenCreditLinesAndLoans"]), counts)
    margin = poisson.predict(X.drop(columns=["NumberOfOpenCreditLinesAndLoans"]), output_margin=True)
    assert np.allclose(np.exp(margin), poisson.predict(X.drop(columns=["NumberOfOpenCreditLinesAndLoans"])))


def test_estimator_explains_from_each_seat_and_exports(tmp_path, credit):
    import xgboost

    X, y = credit
    model = VerticalBoostClassifier(parties=TELCO, n_estimators=6, max_depth=3, subsample=0.8, max_bin=32).fit(X, y)
    rows = X.iloc[:300]
    margin = model.predict(rows, output_margin=True)
    for party in ("active", "telco"):
        values, expected = model.shap_values(rows, party=party)
        assert values.shape == (300, len(model.shap_players(party)))
        assert np.max(np.abs(values.sum(axis=1) + expected - margin)) < 1e-6
    assert model.shap_players("telco") == ["age", "MonthlyIncome", "party:active"]
    model.to_xgboost(tmp_path / "model.json")
    booster = xgboost.Booster()
    booster.load_model(str(tmp_path / "model.json"))
    joined = rows[booster.feature_names].to_numpy(dtype=np.float64)
    theirs = booster.predict(xgboost.DMatrix(joined, feature_names=booster.feature_names, missing=np.nan))
    assert np.max(np.abs(theirs - model.predict_proba(rows)[:, 1])) < 1e-6


def test_a_strict_model_ranks_features_by_split_counts(credit):
    """Strict mode publishes no gains: its importances are the split counts it does publish."""
    X, y = credit
    model = VerticalBoostClassifier(protocol="strict", allow_simulated_tee=True, parties=TELCO,
                                    n_estimators=2, max_depth=3, subsample=0.8, max_bin=32).fit(X.iloc[:1500], y.iloc[:1500])
    counts = model.feature_importances_
    assert counts.sum() == pytest.approx(1.0)
    splits = sum(not t.is_leaf(n) for t in model.model_.active.ensemble.trees for n in range(t.n_nodes))
    assert np.all(np.isclose(counts * splits, np.round(counts * splits)))  # whole numbers of splits
    with pytest.raises(ConfigError, match="cover"):
        model.shap_values(X.iloc[:10])


def test_a_model_file_does_not_choose_runtime_settings_or_the_protocol(tmp_path, credit):
    """Red-team findings: an edited active.json made a later fit write a transcript where the
    file said, and turned a strict model's estimator into a plain one."""
    import json

    from teeboost.errors import ModelFileError

    X, y = credit
    VerticalBoostClassifier(parties=TELCO, n_estimators=2, max_depth=3, subsample=0.8, max_bin=32).fit(X, y).save(tmp_path)
    active = tmp_path / "active.json"
    original = json.loads(active.read_text())
    for edit, message in [
        (lambda d: d["estimator"]["params"].update(transcript=str(tmp_path / "elsewhere.tbt")), "runtime-only"),
        (lambda d: d["estimator"]["params"].update(protocol="strict"), "trained with 'plain'"),
        (lambda d: d["estimator"]["params"].update(colour="red"), "unknown"),
        (lambda d: d["estimator"]["layout"]["parties"][1][1].append("DebtRatio"), "column layout"),
    ]:
        data = json.loads(json.dumps(original))
        edit(data)
        active.write_text(json.dumps(data))
        with pytest.raises(ModelFileError, match=message):
            VerticalBoostClassifier.load(tmp_path)
