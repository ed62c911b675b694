import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from teeboost.cli import main
from teeboost.datasets import bundled_path

from .helpers import SMALL_FLAGS

REQUIRED = {"protocol", "n_samples", "n_trees", "metric", "value", "train_seconds", "bytes_total", "bytes"}


def test_train_json_contract_and_predict(tmp_path, capsys):
    model_dir = tmp_path / "model"
    assert main(["train", *SMALL_FLAGS, "--json", "--n-trees", "3", "--model-dir", str(model_dir)]) == 0
    out = capsys.readouterr().out
    report = json.loads(out)  # exactly one JSON object
    assert REQUIRED <= set(report)
    assert report["protocol"] == "plain" and report["metric"] == "auc" and report["value"] > 0.8
    assert report["bytes_total"] == sum(report["bytes"].values()) > 0
    assert report["n_samples"] == 13999 and report["n_trees"] == 3
    # which defaults: XGBoost's, and what this run changed from them (the flags given, nothing else)
    assert report["params"]["defaults"] == "xgboost"
    assert report["params"]["changed"] == {"n_trees": 3, "max_depth": 3, "subsample": 0.8, "max_bin": 32}
    assert {"learning_rate", "reg_lambda", "objective"} <= set(report["params"]["at_default"])

    output = tmp_path / "predictions.csv"
    assert main(["predict", "--model-dir", str(model_dir), "--data", str(bundled_path()),
                 "--output", str(output)]) == 0
    predictions = pd.read_csv(output)
    assert len(predictions) == 19999
    assert predictions["probability_1"].between(0, 1).all()


def test_predict_reports_missing_columns(tmp_path, capsys):
    model_dir = tmp_path / "model"
    main(["train", *SMALL_FLAGS, "--json", "--n-trees", "1", "--model-dir", str(model_dir)])
    capsys.readouterr()
    data = tmp_path / "partial.csv"
    pd.read_csv(bundled_path()).drop(columns=["age"]).to_csv(data, index=False)
    assert main(["predict", "--model-dir", str(model_dir), "--data", str(data), "--output",
                 str(tmp_path / "p.csv")]) == 2
    err = capsys.readouterr().err
    assert "'age'" in err and "passive party 1" in err
    assert not (tmp_path / "p.csv").exists()


def test_console_script_demo_runs_in_a_fresh_process(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "teeboost.cli", "demo", "--json", "--model-dir", str(tmp_path / "demo")],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert result.returncode == 0, result.stderr
    demo = json.loads(result.stdout)
    reports = demo["demo"]
    assert {r["protocol"] for r in reports} >= {"plain"}
    assert "small demo settings" in demo["settings"] and "XGBoost's 100 x 6 x 256" in demo["settings"]
    assert all(r["params"]["changed"].items() >= {"n_trees": 5, "max_depth": 3, "subsample": 0.8,
                                                   "max_bin": 32}.items() for r in reports)
    assert all(r["value"] > 0.8 for r in reports)


@pytest.mark.parametrize("protocol, extra", [("ntee", []), ("onetee", ["--onetee-bins-once"])])
def test_train_tee_protocols_say_simulated(tmp_path, capsys, protocol, extra):
    assert main(["train", *SMALL_FLAGS, "--protocol", protocol, "--allow-simulated-tee", "--n-trees", "2",
                 "--model-dir", str(tmp_path / "m"), *extra]) == 0
    out = capsys.readouterr().out
    assert f"protocol        {protocol}" in out
    assert "enclaves        simulated backend" in out


def test_full_kaggle_format_file_uses_the_default_split(tmp_path, capsys):
    # same format as Kaggle's cs-training.csv: unnamed index column, NA for missing
    kaggle = tmp_path / "cs-training.csv"
    kaggle.write_text(bundled_path().read_text())
    assert main(["train", *SMALL_FLAGS, "--json", "--n-trees", "2", "--data", str(kaggle), "--model-dir", str(tmp_path / "m")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "age" in report["parties"]["passive-1"] and report["value"] > 0.8


def test_train_secureboost_from_the_command_line(tmp_path, capsys):
    code = main(["train", *SMALL_FLAGS, "--protocol", "secureboost", "--key-bits", "768", "--insecure-key-bits",
                 "--crypto-workers", "1", "--n-trees", "2", "--json", "--model-dir", str(tmp_path / "m")])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["protocol"] == "secureboost" and report["value"] > 0.8
    assert report["options"]["scheme"] == "paillier" and report["phases"]["encrypt"] > 0
    assert report["bytes_by_message"]["EncryptedGradients"]["active_to_passive"] > 0


@pytest.mark.parametrize("flags, bits", [([], 384), (["--short-randomizer"], 160), (["--scheme", "ou"], 160),
                                         (["--scheme", "ou", "--full-randomizer"], 384)])
def test_the_report_names_the_random_exponent_length(tmp_path, capsys, flags, bits):
    code = main(["train", *SMALL_FLAGS, "--protocol", "secureboost", "--key-bits", "768", "--insecure-key-bits", *flags,
                 "--crypto-workers", "1", "--n-trees", "1", "--json", "--model-dir", str(tmp_path / "m")])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert f"{bits}-bit random exponents" in report["protection"]


def test_short_keys_are_refused_without_the_flag(tmp_path, capsys):
    assert main(["train", *SMALL_FLAGS, "--protocol", "secureboost", "--key-bits", "1024", "--model-dir", str(tmp_path / "m")]) == 2
    assert "key_bits=1024 is below 2048" in capsys.readouterr().err


def test_progress_bar_draws_one_step_per_tree(capsys):
    from teeboost.cli.common import _Progress
    from teeboost.core.boosting import TreeProgress

    progress = _Progress(2, enabled=True)
    progress(TreeProgress(0, 0, 0, n_leaves=8, seconds=0.1))
    progress(TreeProgress(1, 1, 0, n_leaves=7, seconds=0.1, valid_metric=0.84))
    progress.close()
    err = capsys.readouterr().err
    assert "training" in err and "2/2" in err and "leaves=7" in err


def test_train_takes_xgboost_names_weights_and_metrics(tmp_path, capsys):
    """--n-estimators/--eta/--gamma spell --n-trees/--learning-rate/--min-split-gain; a weight
    column is no feature; the reported metric is the last of --eval-metric."""
    frame = pd.read_csv(bundled_path()).iloc[:6000]
    frame["w"] = 1.0 + (frame["SeriousDlqin2yrs"] == 1) * 2.0
    data = tmp_path / "joined.csv"
    frame.to_csv(data, index=False)
    model_dir = tmp_path / "model"
    assert main(["train", *SMALL_FLAGS, "--json", "--data", str(data), "--id", "Unnamed: 0", "--label", "SeriousDlqin2yrs",
                 "--passive-columns", "age,MonthlyIncome", "--weight-column", "w", "--n-estimators", "4",
                 "--eta", "0.2", "--gamma", "0.1", "--reg-alpha", "0.5", "--colsample-bytree", "0.5",
                 "--max-delta-step", "1", "--eval-metric", "auc,logloss", "--early-stopping-rounds", "2",
                 "--model-dir", str(model_dir)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["metric"] == "logloss" and 0 < report["value"] < 0.5
    saved = json.loads((model_dir / "active.json").read_text())
    assert "w" not in saved["features"]
    params = saved["params"]
    assert (params["n_trees"], params["learning_rate"], params["min_split_gain"], params["reg_alpha"],
            params["colsample_bytree"], params["max_delta_step"], params["eval_metric"]) == \
        (4, 0.2, 0.1, 0.5, 0.5, 1.0, ["auc", "logloss"])
    assert main(["train", *SMALL_FLAGS, "--data", str(data), "--id", "Unnamed: 0", "--label", "SeriousDlqin2yrs",
                 "--passive-columns", "age,MonthlyIncome", "--eval-metric", "rmse",
                 "--model-dir", str(model_dir)]) == 2
    assert "eval_metric='rmse' does not score objective='binary'" in capsys.readouterr().err
