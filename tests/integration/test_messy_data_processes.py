"""The data organisations bring, across real processes over gRPC with mutual TLS: a passive
party's semicolon-separated file with a text column and a constant one, an active party with
a text column of its own; ntee trains and federated prediction scores a batch holding a
category nobody saw in training."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd

from teeboost.deploy.active import shutdown_peers
from teeboost.deploy.config import load_config
from teeboost.deploy.demo import set_peer_addresses, start_passive, write_federation
from teeboost.model_files import load_active, load_passive


def run_cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "teeboost.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_text_columns_and_semicolons_across_processes(tmp_path):
    configs = write_federation(tmp_path, n_passive=1, training={"n_trees": 3, "max_depth": 3,
                                                                 "min_samples_leaf": 20, "protocol": "ntee"})
    passive = pd.read_csv(tmp_path / "passive-1.csv", dtype={"id": str})
    age = passive["age"].to_numpy()
    passive["life_stage"] = np.select([age < 30, age < 50, age < 67], ["Berufseinstieg", "Familie", "Reife"],
                                      "Ruhestand")
    passive["country"] = "DE"  # constant: dropped with a warning
    passive.to_csv(tmp_path / "passive-1.csv", index=False, sep=";")
    active = pd.read_csv(tmp_path / "active.csv", dtype={"id": str})
    lines = active["NumberOfTime30-59DaysPastDueNotWorse"].to_numpy()
    active["channel"] = np.where(lines > 0, "Filiale", np.where(active["DebtRatio"] > 1, "Online", "App"))
    new = active[active["id"].isin(passive["id"])].sample(n=60, random_state=3)  # customers both hold
    active.drop(index=new.index).to_csv(tmp_path / "active.csv", index=False)
    new = new.drop(columns=["SeriousDlqin2yrs"])
    new.loc[new.index[:5], "channel"] = "Telefon"  # a channel training never saw
    new.to_csv(tmp_path / "new.csv", index=False)

    process, address = start_passive(configs["passive-1"], tmp_path / "p1.address", tmp_path / "p1.log")
    set_peer_addresses(configs["active"], {1: ("passive-1", address)})
    try:
        trained = run_cli("party", "--config", str(configs["active"]), "--allow-simulated-tee", "--json")
        assert trained.returncode == 0, trained.stderr
        assert "Traceback" not in trained.stderr
        report = json.loads(trained.stdout)
        assert report["protocol"] == "ntee" and report["value"] > 0.7
        predicted = run_cli("predict", "--config", str(configs["active"]), "--data", str(tmp_path / "new.csv"),
                            "--output", str(tmp_path / "predictions.csv"), "--allow-simulated-tee")
        assert predicted.returncode == 0, predicted.stderr
        out = pd.read_csv(tmp_path / "predictions.csv")
        assert len(out) == 60 and out["prediction"].notna().all()
    finally:
        shutdown_peers(load_config(configs["active"]))
        process.wait(timeout=60)
    log = (tmp_path / "p1.log").read_text()
    assert "'country' (constant 'DE')" in log and "Traceback" not in log
    own = load_passive(tmp_path / "model-passive-1" / "passive-1.json")
    assert "country" not in own.feature_names
    assert set(own.vocabularies["life_stage"].names) == {"Berufseinstieg", "Familie", "Reife", "Ruhestand"}
    assert set(load_active(tmp_path / "model-active" / "active.json").vocabularies["channel"].names) == \
        {"Filiale", "Online", "App"}
