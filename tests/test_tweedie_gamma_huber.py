"""XGBoost's reg:tweedie, reg:gamma and reg:pseudohubererror: their gradients, base margins
and links against XGBoost 3.2's own training, their labels checked, their parameters carried
into the model file, the XGBoost export and every protocol (strict's enclave included)."""

import json
from dataclasses import replace
from functools import lru_cache

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb

from teeboost import VerticalBoostRegressor
from teeboost.cli import main
from teeboost.config import BoostParams, ProtocolOptions
from teeboost.core.loss import Gamma, PseudoHuber, Tweedie, infer_objective, make_objective
from teeboost.data import split_columns
from teeboost.deploy.config import load_config
from teeboost.errors import ConfigError, DataError
from teeboost.export import export_part, merge_parts
from teeboost.federation import FederatedModel, train_local
from teeboost.metrics import mphe

from .helpers import federated_descriptions
from .trained_models import load_booster

#: XGBoost grows in float32; where its trees and ours coincide (every feature value its own
#: bin), predictions agree to a relative 2e-6 (measured: 2.4e-7 tweedie, 2.1e-7 gamma,
#: 3.9e-7 pseudo-Huber for 10 trees of depth 3 on 1,000 rows; 2.0e-6 for 30 of depth 4).
PARITY = 1e-5

#: name -> (XGBoost's objective, its extra parameters, ours)
OBJECTIVES = {
    "tweedie": ("reg:tweedie", {"tweedie_variance_power": 1.3}),
    "gamma": ("reg:gamma", {}),
    "pseudohuber": ("reg:pseudohubererror", {"huber_slope": 0.7}),
}


def _frame(objective, n=1000, seed=3):
    """Integer features with 10 values each (every value its own bin, for us and XGBoost); the
    label an insurance-like amount: gamma amounts, 40% zero claims for Tweedie, and a few
    outliers for pseudo-Huber."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 10, size=(n, 6)).astype(float)
    mean = np.exp(-0.2 + 0.15 * x[:, 0] - 0.1 * x[:, 1] + 0.08 * x[:, 4])
    amount = rng.gamma(2.0, mean / 2.0)
    if objective == "tweedie":
        amount = np.where(rng.random(n) < 0.4, 0.0, amount)
    elif objective == "pseudohuber":
        amount = amount + rng.normal(scale=4.0, size=n) * (rng.random(n) < 0.1)
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(6)])
    frame["amount"] = amount
    return frame


def _parties(frame):
    return split_columns(frame, [["f3", "f4", "f5"]], label="amount", source="claims.csv")


def _predict(model, active, passives):
    return model.predict(active.features, [p.features for p in passives])


# ---- the losses themselves

def _loss(objective, y, m):
    """Each objective's loss per row, written from its definition (XGBoost's docs)."""
    if isinstance(objective, Tweedie):
        rho = objective.rho
        if rho == 1.0:  # the limit: Poisson's loss
            return -y * m + np.exp(m)
        return -y * np.exp((1 - rho) * m) / (1 - rho) + np.exp((2 - rho) * m) / (2 - rho)
    if isinstance(objective, Gamma):
        return y * np.exp(-m) + m
    slope = objective.slope
    return slope**2 * (np.sqrt(1 + ((m - y) / slope) ** 2) - 1)


@pytest.mark.parametrize("objective", [Tweedie(1.3), Tweedie(1.0), Gamma(), PseudoHuber(0.7)],
                         ids=["tweedie-1.3", "tweedie-1.0", "gamma", "pseudohuber"])
def test_gradients_and_hessians_are_the_losses_derivatives(objective):
    y = np.array([0.5, 1.0, 4.0, 2.0, 7.5])
    margin = np.array([[0.3], [-1.2], [2.0], [0.0], [0.4]])
    g, h = objective.gradients(y, margin)
    eps = 1e-5
    loss = lambda m: _loss(objective, y, m[:, 0])  # noqa: E731
    assert np.allclose(g[:, 0], (loss(margin + eps) - loss(margin - eps)) / (2 * eps), rtol=1e-6, atol=1e-7)
    slope = (objective.gradients(y, margin + eps)[0] - objective.gradients(y, margin - eps)[0]) / (2 * eps)
    assert np.allclose(h, slope, rtol=1e-6, atol=1e-9)


def test_base_margins_are_xgboosts_intercepts():
    """XGBoost 3.2: the log of the weighted label mean for Tweedie and gamma; for pseudo-Huber
    one unregularised Newton step from margin 0 (not the mean, not the median)."""
    y = np.array([0.0, 1.0, 4.0, 2.0, 11.0])
    weight = np.array([1.0, 0.0, 3.0, 2.0, 0.5])
    for objective in (Tweedie(1.3), Gamma()):
        assert objective.base_margin(y)[0] == pytest.approx(np.log(np.mean(y)), rel=1e-12)
        assert objective.base_margin(y, weight)[0] == pytest.approx(np.log(np.average(y, weights=weight)), rel=1e-12)
        assert np.allclose(objective.predict(np.array([[0.5], [-2.0]])), np.exp([0.5, -2.0]))
    huber = PseudoHuber(0.7)
    g, h = huber.gradients(y, np.zeros((5, 1)))
    assert huber.base_margin(y, weight)[0] == pytest.approx(-np.sum(weight * g[:, 0]) / np.sum(weight * h[:, 0]))
    assert huber.base_margin(y)[0] not in (pytest.approx(np.mean(y)), pytest.approx(np.median(y)))
    for label, extra in OBJECTIVES.values():
        x = np.arange(10.0)[:, None]
        booster = xgb.train({"objective": label, **extra}, xgb.DMatrix(x, label=y[np.arange(10) % 5] + 0.5,
                                                                      weight=weight[np.arange(10) % 5]), 1)
        stored = json.loads(booster.save_config())["learner"]["learner_model_param"]["base_score"]
        ours = make_objective(_name(label), **{k: v for k, v in extra.items()})
        margin = ours.base_margin(y[np.arange(10) % 5] + 0.5, weight[np.arange(10) % 5])
        assert ours.predict(margin[None, :])[0] == pytest.approx(float(stored.strip("[]")), rel=1e-6), label


def _name(xgboost_objective):
    return {"reg:tweedie": "tweedie", "reg:gamma": "gamma", "reg:pseudohubererror": "pseudohuber"}[xgboost_objective]


@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_predictions_match_xgboost_where_the_trees_coincide(objective):
    """Same bins, XGBoost's defaults for base_score and max_delta_step (none for these three)."""
    label, extra = OBJECTIVES[objective]
    active, passives = _parties(_frame(objective))
    x = np.hstack([active.features, passives[0].features])
    params = BoostParams(objective=label, n_trees=10, max_depth=3, subsample=1.0, max_bin=32, **extra)
    assert params.delta_step == 0.0
    model, run = train_local(active, passives, params)
    booster = xgb.train({"objective": label, "max_depth": 3, "eta": 0.3, "max_bin": 32, "tree_method": "hist",
                         "nthread": 2, **extra}, xgb.DMatrix(x, label=active.labels), 10)
    theirs = booster.predict(xgb.DMatrix(x)).astype(np.float64)
    ours = _predict(model, active, passives)
    assert np.max(np.abs(ours - theirs) / np.abs(theirs)) < PARITY
    assert run.objective == objective == model.active.ensemble.objective
    assert model.active.ensemble.objective_params == make_objective(objective, **extra).params


def test_default_metrics_are_xgboosts():
    """What XGBoost 3.2 reports for each objective (``gamma-deviance``, not ``gamma-nloglik``)."""
    for label, extra in OBJECTIVES.values():
        booster = xgb.train({"objective": label, **extra}, xgb.DMatrix(np.arange(4.0)[:, None],
                                                                      label=[1.0, 2.0, 3.0, 5.0]), 1)
        theirs = [m["name"] for m in json.loads(booster.save_config())["learner"]["metrics"]]
        params = BoostParams(objective=label, **extra)
        assert list(params.metrics_for(params.objective)) == theirs == [make_objective(params.objective,
                                                                                        **extra).metric]


def test_validation_metric_history_uses_the_runs_power_and_slope():
    frame = _frame("tweedie", n=400)
    active, passives = _parties(frame)
    train, valid = np.arange(300), np.arange(300, 400)
    data = (active.take(train), [p.take(train) for p in passives])
    validation = (active.take(valid), [p.take(valid) for p in passives])
    params = BoostParams(objective="reg:tweedie", tweedie_variance_power=1.2, n_trees=2, max_depth=2,
                         eval_metric=("rmse", "tweedie-nloglik"))
    _, run = train_local(*data, params, validation=validation)
    assert list(run.evals_result["validation_0"]) == ["rmse", "tweedie-nloglik@1.2"]
    params = BoostParams(objective="reg:pseudohubererror", huber_slope=3.0, n_trees=2, max_depth=2)
    model, run = train_local(*data, params, validation=validation)
    expected = mphe(validation[0].labels, _predict(model, *validation), slope=3.0)
    assert run.evals_result["validation_0"]["mphe"][-1] == pytest.approx(expected, rel=1e-12)
    assert expected != pytest.approx(mphe(validation[0].labels, _predict(model, *validation)), rel=1e-3)


# ---- bad input

def test_out_of_range_labels_are_refused_naming_column_value_and_row():
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0], "b": [4.0, 3.0, 2.0, 1.0], "amount": [0.5, 2.0, -1.5, 1.0]})
    active, passives = split_columns(frame, [["b"]], label="amount", source="claims.csv")
    with pytest.raises(DataError, match=r"claims\.csv.*'amount' has negative value -1\.5 in data row 3.*'tweedie'"):
        train_local(active, passives, BoostParams(objective="reg:tweedie"))
    frame["amount"] = [0.5, 2.0, 0.0, 1.0]  # zero: a Tweedie claim, not a gamma amount
    active, passives = split_columns(frame, [["b"]], label="amount", source="claims.csv")
    train_local(active, passives, BoostParams(objective="reg:tweedie", n_trees=1, max_depth=1))
    with pytest.raises(DataError, match=r"claims\.csv.*'amount' has value 0 in data row 3.*'gamma' needs positive"):
        train_local(active, passives, BoostParams(objective="reg:gamma"))
    frame["amount"] = ["low", "high", "low", "mid"]
    active, passives = split_columns(frame, [["b"]], label="amount", source="claims.csv")
    for objective in ("gamma", "pseudohuber"):
        with pytest.raises(DataError, match=rf"'amount' is text; objective '{objective}' needs"):
            train_local(active, passives, BoostParams(objective=objective))


def test_gamma_validation_amounts_must_be_positive_too():
    active, passives = _parties(_frame("gamma", n=400))
    valid = active.take(np.arange(300, 400))
    valid = replace(valid, labels=np.where(np.arange(100) == 4, 0.0, valid.labels))
    with pytest.raises(DataError, match="value 0 in data row 5"):
        train_local(active.take(np.arange(300)), [p.take(np.arange(300)) for p in passives],
                    BoostParams(objective="gamma", n_trees=1),
                    validation=(valid, [p.take(np.arange(300, 400)) for p in passives]))


@pytest.mark.parametrize("values, message", [
    (dict(objective="reg:tweedie", tweedie_variance_power=2.0), r"tweedie_variance_power=2\.0 must be < 2"),
    (dict(objective="reg:tweedie", tweedie_variance_power=0.9), r"tweedie_variance_power=0\.9 must be >= 1"),
    (dict(objective="gamma", tweedie_variance_power=1.2), r"tweedie_variance_power=1\.2 applies to objective 'tw"),
    (dict(objective="pseudohuber", huber_slope=0.0), r"huber_slope=0\.0 must be > 0"),
    (dict(objective="binary", huber_slope=2.0), r"huber_slope=2\.0 applies to objective 'pseudohuber'"),
    (dict(objective="tweedie", eval_metric="tweedie-nloglik@2.5"), r"'tweedie-nloglik@2\.5'.*must be in \[1, 2\)"),
    (dict(objective="gamma", eval_metric="mphe"), r"eval_metric='mphe' does not score objective='gamma'"),
])
def test_bad_parameters_are_named(values, message):
    with pytest.raises(ConfigError, match=message):
        BoostParams(**values)


def test_new_objectives_are_never_inferred():
    amounts = np.random.default_rng(0).gamma(2.0, 3.0, 500)
    assert infer_objective(amounts) == "regression"


# ---- every protocol, the model file, the export, the estimator

SMALL_KEY = ProtocolOptions(key_bits=768, insecure_key_bits=True, crypto_workers=1)
SIMULATED = ProtocolOptions(allow_simulated_tee=True)
_LEAN = dict(n_trees=2, max_depth=2, max_bin=16, subsample=1.0)


@lru_cache(maxsize=None)  # each protocol's run is compared with one plain run per objective (read only)
def _lean_run(objective, protocol="plain"):
    label, extra = OBJECTIVES[objective]
    active, passives = _parties(_frame(objective, n=200))
    options = SMALL_KEY if protocol == "secureboost" else SIMULATED
    return train_local(active, passives, BoostParams(objective=label, **_LEAN, **extra), protocol, options=options)[0]


@pytest.mark.parametrize("protocol", ["secureboost", "ntee", "onetee", "strict"])
@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_every_protocol_grows_plains_trees(objective, protocol):
    """The loss (and its parameter) reach strict's enclave, which computes the gradients there."""
    model, plain = _lean_run(objective, protocol), _lean_run(objective)
    statistics = protocol != "strict"  # strict publishes no gains or node sizes
    assert federated_descriptions(model, statistics) == federated_descriptions(plain, statistics)
    assert model.active.ensemble.objective_params == plain.active.ensemble.objective_params
    assert np.array_equal(model.active.ensemble.base_margin, plain.active.ensemble.base_margin)


@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_model_file_and_xgboost_export_keep_the_objective_and_its_parameter(tmp_path, objective):
    label, extra = OBJECTIVES[objective]
    model = _lean_run(objective)
    model.save(tmp_path)
    loaded = FederatedModel.load(tmp_path)
    assert loaded.active.ensemble.objective_params == model.active.ensemble.objective_params
    document = merge_parts([json.loads(json.dumps(export_part(p))) for p in [model.active, *model.passives]])
    written = document["learner"]["objective"]
    assert written["name"] == label
    for key, value in extra.items():  # as XGBoost writes the float32
        assert [section[key] for section in written.values() if isinstance(section, dict)] == \
            [f"{np.float32(value):.9g}"]
    booster = load_booster(document)
    active, passives = _parties(_frame(objective, n=200))
    theirs = booster.predict(xgb.DMatrix(np.hstack([active.features, passives[0].features]),
                                         feature_names=booster.feature_names)).astype(np.float64)
    ours = _predict(model, active, passives)
    assert np.max(np.abs(ours - theirs)) <= 1e-6 * max(1.0, np.abs(ours).max())
    config = json.loads(booster.save_config())["learner"]["objective"]
    assert config == {**written, **config}  # XGBoost read back the same loss parameter


def test_regressor_takes_xgboosts_objective_names_and_parameters():
    frame = _frame("tweedie", n=300)
    X, y = frame.drop(columns=["amount"]), frame["amount"]
    model = VerticalBoostRegressor(parties={"bank": ["f3", "f4", "f5"]}, objective="reg:tweedie",
                                   tweedie_variance_power=1.3, n_estimators=2, max_depth=2).fit(X, y)
    assert model.get_params()["tweedie_variance_power"] == 1.3
    assert np.allclose(np.exp(model.predict(X, output_margin=True)), model.predict(X))
    with pytest.raises(ConfigError, match="huber_slope=2 applies to objective 'pseudohuber'"):
        VerticalBoostRegressor(parties={"bank": ["f3"]}, objective="gamma", huber_slope=2).fit(X, y + 1)


def test_cli_trains_tweedie_with_its_power_and_reports_its_metric(tmp_path, capsys):
    frame = _frame("tweedie", n=300)
    frame.to_csv(tmp_path / "claims.csv", index=False)
    capsys.readouterr()
    assert main(["train", "--json", "--data", str(tmp_path / "claims.csv"), "--label", "amount",
                 "--passive-columns", "f3,f4,f5", "--objective", "reg:tweedie", "--tweedie-variance-power", "1.3",
                 "--n-trees", "2", "--max-depth", "2", "--model-dir", str(tmp_path / "m")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["objective"], report["metric"]) == ("tweedie", "tweedie-nloglik@1.3")
    assert FederatedModel.load(tmp_path / "m").active.ensemble.objective_params == {"tweedie_variance_power": 1.3}


def test_party_config_takes_the_objective_and_its_parameter(tmp_path):
    path = tmp_path / "active.toml"
    path.write_text("""
[party]
name = "insurer"
role = "active"
data = "claims.csv"
id_column = "id"
label = "amount"

[tls]
insecure = true

[[peers]]
name = "telco"
index = 1
address = "127.0.0.1:50051"

[training]
objective = "reg:tweedie"
tweedie_variance_power = 1.3
""")
    params = load_config(path).params
    assert (params.objective, params.tweedie_variance_power, params.metrics_for("tweedie")) == \
        ("tweedie", 1.3, ("tweedie-nloglik@1.3",))
    path.write_text(path.read_text().replace("1.3", "2.5"))
    with pytest.raises(ConfigError, match=r"active\.toml.*tweedie_variance_power=2\.5 must be < 2"):
        load_config(path)


def test_strict_enclave_refuses_a_loss_other_than_the_parameters_name(monkeypatch):
    """The host loads its enclave with gamma while the parameters (and the run's digest) say
    tweedie: the enclave, which computes the gradients, refuses rather than fit another loss."""
    from teeboost.errors import ProtocolError
    from teeboost.protocols.strict.hosts import StrictActive

    honest = StrictActive.fit

    def swapped(self, labels, classes, objective, *rest, **named):
        return honest(self, labels, classes, "gamma", *rest, **named)

    monkeypatch.setattr(StrictActive, "fit", swapped)
    label, extra = OBJECTIVES["tweedie"]
    active, passives = _parties(_frame("gamma", n=200))
    with pytest.raises(ProtocolError, match="loaded objective 'gamma', the parameters name 'tweedie'"):
        train_local(active, passives, BoostParams(objective=label, **_LEAN, **extra), "strict", options=SIMULATED)
