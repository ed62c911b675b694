"""Online scoring against a real passive party process (gRPC, mutual TLS): the federated
scorer gives exactly batch prediction's answers, says which rows it could not score, and
never runs PSI over the passive party's whole id list per request."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest

from teeboost.data import PartyData
from teeboost.deploy.config import load_config
from teeboost.deploy.demo import set_peer_addresses, start_passive, write_federation
from teeboost.model_files import load_active
from teeboost.serving.federated import FederatedScorer

from ..helpers import stop_passive_parties

TRAINING = {"n_trees": 5, "max_depth": 3}


def cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "teeboost.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("online")
    configs = write_federation(tmp_path, n_passive=1, training=TRAINING)
    process, address = start_passive(configs["passive-1"], tmp_path / "passive-1.address", tmp_path / "passive-1.log")
    set_peer_addresses(configs["active"], {1: ("passive-1", address)})
    yield tmp_path, configs, process
    stop_passive_parties(configs["active"], [process])


def _rows(tmp_path, n=300):
    frame = pd.read_csv(tmp_path / "active.csv", dtype={"id": str}).head(n).drop(columns=["SeriousDlqin2yrs"])
    return frame


def _batch_predictions(tmp_path, config, frame):
    new = tmp_path / "new.csv"
    frame.to_csv(new, index=False)
    out = tmp_path / "batch.csv"
    done = cli("predict", "--config", str(config), "--data", str(new), "--output", str(out), "--json")
    assert done.returncode == 0, done.stderr
    return pd.read_csv(out, dtype={"id": str})


@pytest.mark.parametrize("protocol", ["ntee", "strict"])
def test_online_scores_equal_batch_prediction_and_unheld_ids_are_named(federation, protocol):
    tmp_path, configs, _ = federation
    trained = cli("party", "--config", str(configs["active"]), "--protocol", protocol, "--json")
    assert trained.returncode == 0, trained.stderr
    frame = _rows(tmp_path)
    frame.loc[frame.index[:3], "id"] = ["nobody-1", "nobody-2", "nobody-3"]  # ids the passive party does not hold
    batch = _batch_predictions(tmp_path, configs["active"], frame)
    config = load_config(configs["active"])
    scorer = FederatedScorer(config, "credit")
    try:
        model = load_active(config.model_dir / "active.json")
        data = PartyData.from_frame(frame[["id", *model.feature_names]], id_column="id", name="active",
                                    source="test").conform(model.feature_names, model.vocabularies, "model")
        ids = list(frame["id"])
        # twenty concurrent callers, one row each, then the rest in one request
        with ThreadPoolExecutor(20) as pool:
            singles = list(pool.map(lambda i: scorer.score([ids[i]], data.features[i:i + 1]), range(40)))
        rest = scorer.score(ids[40:], data.features[40:])
    finally:
        scorer.close()
    values = np.concatenate([s.values for s in singles] + [rest.values])[:, 0]
    reasons = [r for s in singles for r in s.reasons] + rest.reasons
    expected = batch.filter(like="probability_").to_numpy()[:, 0]
    assert [r is not None for r in reasons] == list(np.isnan(expected))
    assert all("does not hold this id" in r for r in reasons[:3])
    np.testing.assert_allclose(values[3:], expected[3:], rtol=0, atol=1e-12)
    assert scorer.counts["id_set_fetches"] == 1
