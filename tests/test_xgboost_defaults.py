"""The defaults a user meets are XGBoost's, read from XGBoost itself (issue #36).

An XGBoost user moving a model to teeboost expects ``n_estimators`` 100, ``max_depth`` 6,
``learning_rate`` 0.3, ``subsample`` 1 and 256 bins without saying so. The expected values are
not written here: they come from the configuration of a booster XGBoost trained at its own
defaults, so a change on either side fails this test.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import xgboost as xgb

from teeboost import VerticalBoostClassifier, VerticalBoostRegressor
from teeboost.cli.main_parser import _parser
from teeboost.config import BoostParams
from teeboost.deploy.config_schema import TABLES
from teeboost.param_defaults import DEMO_SETTINGS, demo_flags, params_report

#: teeboost's name -> where XGBoost's trained booster keeps the value in its saved configuration
_IN_TREE_PARAMS = {"max_depth": "max_depth", "learning_rate": "eta", "subsample": "subsample",
                   "max_bin": "max_bin", "reg_lambda": "lambda", "reg_alpha": "alpha",
                   "min_child_weight": "min_child_weight", "min_split_gain": "gamma",
                   "colsample_bytree": "colsample_bytree"}


@pytest.fixture(scope="module")
def xgboost_defaults() -> dict[str, float]:
    """Every compared parameter as XGBoost resolved it for a classifier given no parameters."""
    rng = np.random.default_rng(0)
    model = xgb.XGBClassifier(n_jobs=1).fit(rng.random((60, 2)), np.arange(60) % 2)
    config = json.loads(model.get_booster().save_config())["learner"]
    tree = config["gradient_booster"]["tree_train_param"]
    out = {name: float(tree[key]) for name, key in _IN_TREE_PARAMS.items()}
    out["n_trees"] = model.get_booster().num_boosted_rounds()
    out["scale_pos_weight"] = float(config["objective"]["reg_loss_param"]["scale_pos_weight"])
    return out


def _agree(ours: dict, theirs: dict) -> None:
    for name, value in theirs.items():
        # XGBoost keeps eta as a float32 (0.300000012)
        assert ours[name] == pytest.approx(value, rel=1e-6), f"{name}: ours {ours[name]!r}, XGBoost's {value!r}"


def test_the_xgboost_read_is_the_documented_one(xgboost_defaults):
    """XGBoost's documentation: 100 rounds, depth 6, eta 0.3, subsample 1, 256 bins."""
    assert (xgboost_defaults["n_trees"], xgboost_defaults["max_depth"], xgboost_defaults["subsample"],
            xgboost_defaults["max_bin"]) == (100, 6, 1, 256)
    assert xgboost_defaults["learning_rate"] == pytest.approx(0.3)


def test_boost_params_defaults_are_xgboosts(xgboost_defaults):
    default = BoostParams()
    _agree({name: getattr(default, name) for name in xgboost_defaults}, xgboost_defaults)


@pytest.mark.parametrize("estimator", [VerticalBoostClassifier, VerticalBoostRegressor])
def test_estimator_defaults_are_xgboosts(xgboost_defaults, estimator):
    params = estimator().get_params()
    params["n_trees"], params["min_split_gain"] = params["n_estimators"], params["gamma"]  # XGBoost's names
    _agree(params, xgboost_defaults)
    assert estimator()._boost_params() == BoostParams()


@pytest.mark.parametrize("command", ["train", "attack"])
def test_cli_defaults_are_xgboosts(xgboost_defaults, command):
    args = vars(_parser().parse_args([command] + (["--target", "age:2"] if command == "attack" else [])))
    _agree(args, xgboost_defaults)


def test_cli_help_shows_the_defaults(capsys):
    with pytest.raises(SystemExit):
        _parser().parse_args(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "training (defaults are XGBoost's)" in text
    for flag, value in (("--n-estimators N_TREES", "100"), ("--max-depth MAX_DEPTH", "6"),
                        ("--subsample SUBSAMPLE", "1.0"), ("--max-bin MAX_BIN", "256")):
        after = text.split(flag)[-1]  # the option's help (the usage line comes first)
        assert f"(default: {value})" in after.split(" --", 1)[0], flag


def test_party_config_defaults_are_xgboosts(xgboost_defaults):
    training = next(t for t in TABLES if t.name == "training")
    keys = {k.name: k.default for k in training.keys}
    _agree(keys, xgboost_defaults)
    assert keys["n_trees"] == 100 and "n_estimators" in training.aliases


def test_the_report_names_the_defaults_and_what_was_changed():
    report = params_report(BoostParams(**DEMO_SETTINGS, learning_rate=0.1))
    assert report["defaults"] == "xgboost"
    assert report["changed"] == {**DEMO_SETTINGS, "learning_rate": 0.1}
    assert "max_depth" not in report["at_default"] and "reg_lambda" in report["at_default"]
    everything = params_report(BoostParams())
    assert everything["changed"] == {} and "n_trees" in everything["at_default"]
    assert params_report(BoostParams(eval_metric=["auc", "logloss"]))["changed"] == {"eval_metric": ["auc", "logloss"]}


def test_demo_flags_give_the_demo_settings():
    args = _parser().parse_args(["train", *demo_flags()])
    assert {name: getattr(args, name) for name in DEMO_SETTINGS} == DEMO_SETTINGS
