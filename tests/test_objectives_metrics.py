"""Poisson regression and held-out metrics by XGBoost's names, against scikit-learn and
XGBoost itself; the evaluation history (``evals_result``) and early stopping on its last metric."""

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb
from scipy.special import pseudo_huber
from scipy.stats import expon, poisson
from sklearn import metrics as sk

from teeboost import VerticalBoostClassifier
from teeboost.config import METRICS, BoostParams, ProtocolOptions
from teeboost.core.loss import Poisson, infer_objective, make_objective
from teeboost.data import split_columns
from teeboost.errors import ConfigError, DataError
from teeboost.federation import train_active, train_local
from teeboost.metrics import HIGHER_IS_BETTER, evaluate
from teeboost.protocols.env import ProtocolEnv
from teeboost.transport.inmemory import InMemoryChannel

from .helpers import SMALL, federated_descriptions
from .test_checkpoint import interrupted_then_resumed

#: XGBoost computes in float32: our Poisson predictions agree with its ``count:poisson`` to
#: a relative 4e-7 on the data below (measured: 3.0e-7 for 10 trees of depth 3, 3.8e-7 for
#: 30 of depth 4); the test allows 1e-5.
POISSON_PARITY = 1e-5


def _counts(n=3000, seed=3):
    """Integer features with 10 values each (every value its own bin, for us and XGBoost) and
    Poisson counts whose log-mean is linear in some of them, at both parties."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 10, size=(n, 6)).astype(float)
    mean = np.exp(-0.5 + 0.15 * x[:, 0] - 0.1 * x[:, 1] + 0.08 * x[:, 4] + 0.05 * x[:, 5])
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(6)])
    frame["count"] = rng.poisson(mean).astype(float)
    return split_columns(frame, [["f3", "f4", "f5"]], label="count")


def _predict(model, active, passives):
    return model.predict(active.features, [p.features for p in passives])


# ---- metrics

def _predictions(rng, n=400):
    y_bin = rng.integers(0, 2, n).astype(float)
    p = np.clip(np.round(rng.random(n) * 0.8 + 0.15 * y_bin, 2), 0.01, 0.99)  # ties, never exactly 0.5
    p[p == 0.5] = 0.51
    y_multi = rng.integers(0, 3, n).astype(float)
    probs = rng.dirichlet(np.ones(3), n)
    probs[np.arange(n), y_multi.astype(int)] += 0.3
    probs /= probs.sum(axis=1, keepdims=True)
    y_reg = rng.normal(size=n)
    pred_reg = y_reg + rng.normal(scale=0.5, size=n)
    y_count = rng.poisson(2.0, n).astype(float)
    mean = np.exp(rng.normal(0.7, 0.3, n))
    y_amount = rng.gamma(2.0, mean / 2.0)
    y_claim = np.where(rng.random(n) < 0.4, 0.0, y_amount)
    return {
        "tweedie-nloglik": (y_claim, mean), "gamma-deviance": (y_amount, mean), "gamma-nloglik": (y_amount, mean),
        "mphe": (y_reg, pred_reg),
        "auc": (y_bin, p), "logloss": (y_bin, p), "error": (y_bin, p),
        "mlogloss": (y_multi, probs), "merror": (y_multi, probs), "accuracy": (y_multi, probs),
        "rmse": (y_reg, pred_reg), "mae": (y_reg, pred_reg), "poisson-nloglik": (y_count, mean),
    }


#: The name each metric is evaluated under: Tweedie's names its variance power, as XGBoost's.
_NAMED = {"tweedie-nloglik": "tweedie-nloglik@1.3"}
_HUBER_SLOPE = 2.5  # mphe at a slope other than its default: the slope must reach the metric


def _sklearn(metric, y, prediction, weight):
    if metric == "tweedie-nloglik":  # scikit-learn's deviance less the saturated model's term
        rho = 1.3
        saturated = y ** (2 - rho) / ((1 - rho) * (2 - rho))
        deviance = sk.mean_tweedie_deviance(y, prediction, sample_weight=weight, power=rho)
        return deviance / 2 - float(np.average(saturated, weights=weight))
    if metric == "gamma-deviance":
        return sk.mean_gamma_deviance(y, prediction, sample_weight=weight)
    if metric == "gamma-nloglik":  # the gamma density at dispersion 1: exponential of that mean
        return float(np.average(-expon.logpdf(y, scale=prediction), weights=weight))
    if metric == "mphe":
        return float(np.average(pseudo_huber(_HUBER_SLOPE, y - prediction), weights=weight))
    if metric == "auc":
        return sk.roc_auc_score(y, prediction, sample_weight=weight)
    if metric == "logloss":
        return sk.log_loss(y, prediction, sample_weight=weight)
    if metric == "error":
        return 1 - sk.accuracy_score(y, prediction > 0.5, sample_weight=weight)
    if metric == "mlogloss":
        return sk.log_loss(y, prediction, sample_weight=weight)
    if metric == "merror":
        return 1 - sk.accuracy_score(y, prediction.argmax(axis=1), sample_weight=weight)
    if metric == "accuracy":
        return sk.accuracy_score(y, prediction.argmax(axis=1), sample_weight=weight)
    if metric == "rmse":
        return math.sqrt(sk.mean_squared_error(y, prediction, sample_weight=weight))
    if metric == "mae":
        return sk.mean_absolute_error(y, prediction, sample_weight=weight)
    assert metric == "poisson-nloglik"
    return float(np.average(-poisson.logpmf(y, prediction), weights=weight))


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("metric", METRICS)
def test_every_metric_matches_scikit_learn(metric, weighted):
    rng = np.random.default_rng(1)
    y, prediction = _predictions(rng)[metric]
    weight = rng.random(y.size) * 3 if weighted else None
    ours = evaluate(_NAMED.get(metric, metric), y, prediction, weight, huber_slope=_HUBER_SLOPE)
    # XGBoost's gamma-deviance adds 1e-6 to label and mean, scikit-learn's does not
    tolerance = 1e-5 if metric == "gamma-deviance" else 1e-12
    assert ours == pytest.approx(_sklearn(metric, y, prediction, weight), rel=tolerance, abs=1e-12)


_XGB_OBJECTIVE = {"auc": "binary:logistic", "logloss": "binary:logistic", "error": "binary:logistic",
                  "mlogloss": "multi:softprob", "merror": "multi:softprob", "rmse": "reg:squarederror",
                  "mae": "reg:squarederror", "poisson-nloglik": "count:poisson", "tweedie-nloglik": "reg:tweedie",
                  "gamma-deviance": "reg:gamma", "gamma-nloglik": "reg:gamma", "mphe": "reg:pseudohubererror"}


def _xgboost_eval(metric, y, prediction, weight):
    """XGBoost's own evaluation of these predictions: a booster of no trees whose base margin
    is the margin of each prediction."""
    objective = _XGB_OBJECTIVE[metric]
    if objective == "binary:logistic":
        margin = np.log(prediction / (1 - prediction))
    elif objective == "multi:softprob":
        margin = np.log(prediction)
    elif objective in ("count:poisson", "reg:tweedie", "reg:gamma"):
        margin = np.log(prediction)
    else:
        margin = prediction
    data = xgb.DMatrix(np.zeros((y.size, 1)), label=y, weight=weight, base_margin=margin)
    params = {"objective": objective, "eval_metric": _NAMED.get(metric, metric)}
    if metric == "mphe":
        params["huber_slope"] = _HUBER_SLOPE
    if objective == "multi:softprob":
        params["num_class"] = prediction.shape[1]
    booster = xgb.train(params, data, 0)
    text = booster.eval(data)  # "[0]\teval-auc:0.65897..."
    return float(text.rsplit(":", 1)[1])


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("metric", [m for m in METRICS if m != "accuracy"])  # XGBoost has no accuracy: 1 - merror
def test_every_metric_matches_xgboosts_own_evaluation(metric, weighted):
    rng = np.random.default_rng(2)
    y, prediction = _predictions(rng)[metric]
    weight = rng.random(y.size) * 3 if weighted else None
    # XGBoost evaluates float32 predictions
    ours = evaluate(_NAMED.get(metric, metric), y, prediction, weight, huber_slope=_HUBER_SLOPE)
    assert ours == pytest.approx(_xgboost_eval(metric, y, prediction, weight), rel=1e-6, abs=1e-7)


def test_every_metric_says_which_direction_is_better():
    assert set(HIGHER_IS_BETTER) == set(METRICS)
    assert [m for m in METRICS if HIGHER_IS_BETTER[m]] == ["auc", "accuracy"]


def test_auc_of_one_class_is_nan_and_unknown_metrics_are_refused():
    assert math.isnan(evaluate("auc", np.ones(4), np.linspace(0, 1, 4)))
    with pytest.raises(ValueError, match="unknown metric"):
        evaluate("gini", np.ones(4), np.ones(4))


# ---- Poisson

def test_poisson_gradients_hessians_base_margin_and_link():
    objective = make_objective("poisson", delta_step=0.7)
    assert isinstance(objective, Poisson) and objective.metric == "poisson-nloglik"
    y = np.array([0.0, 1.0, 4.0, 2.0])
    margin = np.array([[0.3], [-1.2], [2.0], [0.0]])
    g, h = objective.gradients(y, margin)

    def nll(m):
        return np.exp(m[:, 0]) - y * m[:, 0]

    eps = 1e-6
    assert np.allclose(g[:, 0], (nll(margin + eps) - nll(margin - eps)) / (2 * eps), atol=1e-6)
    assert np.allclose(h[:, 0], np.exp(margin[:, 0] + 0.7))  # XGBoost's max_delta_step in the hessian
    assert np.allclose(objective.base_margin(y), np.log(np.mean(y)))
    weight = np.array([1.0, 0.0, 3.0, 2.0])
    assert np.allclose(objective.base_margin(y, weight), np.log(np.average(y, weights=weight)))
    assert np.allclose(objective.predict(margin), np.exp(margin[:, 0]))
    assert BoostParams(objective="count:poisson", **SMALL).delta_step == 0.7


def test_poisson_trains_and_beats_the_mean():
    active, passives = _counts()
    train, test = np.arange(2400), np.arange(2400, 3000)
    params = BoostParams(objective="poisson", n_trees=20, max_depth=3, subsample=1.0, max_bin=32)
    model, run = train_local(active.take(train), [p.take(train) for p in passives], params,
                             validation=(active.take(test), [p.take(test) for p in passives]))
    assert run.objective == "poisson" and model.active.ensemble.objective == "poisson"
    y = active.labels[test]
    prediction = _predict(model, active.take(test), [p.take(test) for p in passives])
    assert np.all(prediction > 0)
    ours = evaluate("poisson-nloglik", y, prediction)
    mean = evaluate("poisson-nloglik", y, np.full(y.size, active.labels[train].mean()))
    assert ours < mean - 0.1, (ours, mean)
    history = run.evals_result["validation_0"]["poisson-nloglik"]
    assert len(history) == 20 and history[-1] == pytest.approx(ours, rel=1e-12)
    assert history[-1] < history[0]


def test_poisson_matches_xgboost_count_poisson():
    active, passives = _counts()
    y = active.labels
    x = np.hstack([active.features, passives[0].features])
    for n_trees, depth in [(10, 3), (30, 4)]:
        params = BoostParams(objective="count:poisson", n_trees=n_trees, max_depth=depth, learning_rate=0.3,
                             subsample=1.0, max_bin=32)
        model, _ = train_local(active, passives, params)
        ours = _predict(model, active, passives)
        booster = xgb.train({"objective": "count:poisson", "max_depth": depth, "eta": 0.3, "reg_lambda": 1.0,
                             "min_child_weight": 1.0, "max_bin": 32, "tree_method": "hist", "subsample": 1.0,
                             "nthread": 2},  # XGBoost 3.2 starts from the label mean, as we do
                            xgb.DMatrix(x, label=y), n_trees)
        theirs = booster.predict(xgb.DMatrix(x)).astype(np.float64)
        assert np.max(np.abs(ours - theirs) / theirs) < POISSON_PARITY


def test_poisson_needs_non_negative_numeric_labels():
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0], "b": [4.0, 3.0, 2.0, 1.0], "claims": [0.0, 2.0, -1.0, 1.0]})
    active, passives = split_columns(frame, [["b"]], label="claims", source="claims.csv")
    with pytest.raises(DataError, match=r"claims\.csv.*'claims'.*negative value -1 in data row 3"):
        train_local(active, passives, BoostParams(objective="poisson", **SMALL))
    frame["claims"] = ["none", "one", "two", "none"]
    active, passives = split_columns(frame, [["b"]], label="claims", source="claims.csv")
    with pytest.raises(DataError, match=r"claims\.csv.*'claims' is text.*poisson"):
        train_local(active, passives, BoostParams(objective="poisson", **SMALL))


def test_poisson_is_never_inferred():
    counts = np.random.default_rng(0).poisson(2.0, 500).astype(float)
    assert infer_objective(counts) != "poisson"


# ---- evaluation history and early stopping

@pytest.fixture(scope="module")
def credit_split(credit_parties):
    active, passives = credit_parties
    train, valid = np.arange(0, 6000), np.arange(6000, 8000)
    return ((active.take(train), [p.take(train) for p in passives]),
            (active.take(valid), [p.take(valid) for p in passives]))


def test_evals_result_is_shaped_like_xgboosts(credit_split):
    (active, passives), (v_active, v_passives) = credit_split
    params = BoostParams(n_trees=4, max_depth=3, eval_metric=("logloss", "error", "auc"), subsample=0.8, max_bin=32)
    model, run = train_local(active, passives, params, validation=(v_active, v_passives))
    assert list(run.evals_result) == ["validation_0"]
    history = run.evals_result["validation_0"]
    assert list(history) == ["logloss", "error", "auc"] and all(len(v) == 4 for v in history.values())
    prediction = _predict(model, v_active, v_passives)
    for metric, values in history.items():
        assert values[-1] == pytest.approx(evaluate(metric, v_active.labels, prediction), rel=1e-12)
    assert [t.valid_metric for t in run.trees] == history["auc"]  # progress shows the watched (last) metric
    report = run.to_dict()
    assert report["evals_result"] == run.evals_result
    assert report["best_iteration"] is None and report["best_score"] is None  # set by early stopping only
    # the default: one metric per objective
    _, run = train_local(active, passives, BoostParams(n_trees=2, max_depth=2, subsample=0.8, max_bin=32), validation=(v_active, v_passives))
    assert list(run.evals_result["validation_0"]) == ["auc"]
    _, run = train_local(active, passives, BoostParams(n_trees=2, max_depth=2, subsample=0.8, max_bin=32))
    assert run.evals_result == {} and run.to_dict()["evals_result"] == {}


@pytest.mark.parametrize("metrics", [("auc", "logloss"), ("logloss", "auc")])
def test_early_stopping_watches_the_last_metric(credit_split, metrics):
    (active, passives), validation = credit_split
    params = BoostParams(n_trees=40, max_depth=5, learning_rate=0.9, early_stopping_rounds=3, eval_metric=metrics, subsample=0.8, max_bin=32)
    model, run = train_local(active, passives, params, validation=validation)
    watched = metrics[-1]
    history = run.evals_result["validation_0"][watched]
    best = int(np.argmax(history)) if watched == "auc" else int(np.argmin(history))  # first best, as XGBoost
    assert len(history) == best + 4 < 40  # stopped 3 rounds without improvement
    assert run.best_iteration == best == model.active.ensemble.best_round
    assert run.best_score == history[best] == model.active.ensemble.best_score
    assert len(model.active.ensemble.trees) == best + 1
    assert run.to_dict()["best_iteration"] == best and run.to_dict()["best_score"] == history[best]


def test_early_stopping_without_validation_rows_is_an_error(small_credit):
    active, passives = small_credit
    params = BoostParams(n_trees=3, early_stopping_rounds=2, max_depth=3, subsample=0.8, max_bin=32)
    with pytest.raises(ConfigError, match="early_stopping_rounds=2"):
        train_local(active, passives, params)
    with pytest.raises(ConfigError, match="early_stopping_rounds=2"):
        train_active(active, InMemoryChannel({}), params, "plain", env=ProtocolEnv(), party_names={})
    with pytest.raises(ConfigError, match="early_stopping_rounds=2"):
        VerticalBoostClassifier(n_trees=3, early_stopping_rounds=2, max_depth=3, subsample=0.8, max_bin=32).fit(active, passives)


def test_resumed_run_keeps_its_evaluation_history(tmp_path, small_credit):
    active, passives = small_credit
    train, valid = np.arange(2400), np.arange(2400, 3000)
    params = BoostParams(n_trees=4, max_depth=3, eval_metric=("error", "logloss"), subsample=0.8, max_bin=32)
    kwargs = dict(validation=(active.take(valid), [p.take(valid) for p in passives]))
    _, reference = train_local(active.take(train), [p.take(train) for p in passives], params, **kwargs)
    _, resumed = interrupted_then_resumed(tmp_path, active.take(train), [p.take(train) for p in passives], params,
                                          crash_at=3, **kwargs)
    assert resumed.evals_result == reference.evals_result
    assert len(reference.evals_result["validation_0"]["logloss"]) == 4


def test_strict_keeps_its_metrics_inside_and_resumes_with_them(tmp_path, small_credit):
    """Strict mode publishes no validation metric (rows of the host's choosing would make it a
    prediction oracle): evals_result is empty, best_score None; early stopping's outcome (the
    model's size, best_iteration) is all that comes out, equal to plain's. The enclave's
    sealed checkpoint carries the history through a resume."""
    active, passives = small_credit
    train, valid = np.arange(2400), np.arange(2400, 3000)
    params = BoostParams(n_trees=8, max_depth=3, learning_rate=0.9, early_stopping_rounds=2,
                         eval_metric=("auc", "logloss"), subsample=0.8, max_bin=32)
    data = (active.take(train), [p.take(train) for p in passives])
    kwargs = dict(validation=(active.take(valid), [p.take(valid) for p in passives]))
    plain, plain_run = train_local(*data, params, **kwargs)
    options = ProtocolOptions(allow_simulated_tee=True)
    strict, run = train_local(*data, params, "strict", options=options, **kwargs)
    resumed, resumed_run = interrupted_then_resumed(tmp_path, *data, params, "strict", crash_at=2, options=options,
                                                    **kwargs)
    assert plain_run.evals_result and plain_run.best_score is not None
    for model, report in ((strict, run), (resumed, resumed_run)):
        assert report.evals_result == {} and report.best_score is None
        assert report.best_iteration == plain_run.best_iteration == model.active.ensemble.best_round
        assert model.active.ensemble.best_score is None
        assert federated_descriptions(model, statistics=False) == federated_descriptions(plain, statistics=False)


def test_eval_metric_must_score_the_inferred_objective(small_credit):
    active, passives = small_credit
    with pytest.raises(ConfigError, match="eval_metric='rmse'"):
        train_local(active, passives, BoostParams(n_trees=1, eval_metric="rmse", max_depth=3, subsample=0.8, max_bin=32))



def test_poisson_validation_counts_must_be_non_negative_too():
    active, passives = _counts(n=400)
    valid = active.take(np.arange(300, 400))
    valid = replace(valid, labels=np.where(np.arange(100) == 7, -3.0, valid.labels))
    with pytest.raises(DataError, match="negative value -3 in data row 8"):
        train_local(active.take(np.arange(300)), [p.take(np.arange(300)) for p in passives],
                    BoostParams(objective="poisson", n_trees=1, max_depth=3, subsample=0.8, max_bin=32),
                    validation=(valid, [p.take(np.arange(300, 400)) for p in passives]))
