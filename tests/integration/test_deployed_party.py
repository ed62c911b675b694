"""A deployed passive party never answers wrong (issue #38): real processes, many at once.

The federation of the README walkthrough on loopback (``write_federation``: the active party's
config and one passive party process, mutual TLS, simulated enclaves). Each test drives the
active party the way its operator would, with ``teeboost party`` and ``teeboost predict``
processes, and checks what every process printed and wrote: right, or refused by name.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest

from teeboost.deploy.active import connect
from teeboost.deploy.config import load_config
from teeboost.deploy.demo import set_peer_addresses, start_passive, write_federation
from teeboost.deploy.messages import Finish, Setup
from teeboost.errors import ProtocolError
from teeboost.parties.psi import intersect_as_active
from teeboost.data import PartyData

from ..helpers import stop_passive_parties

TRAINING = {"n_trees": 5, "max_depth": 3}


def cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "teeboost.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def popen(*args):
    return subprocess.Popen([sys.executable, "-m", "teeboost.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.fixture
def deployed(tmp_path):
    """One active party's config (a second one training into another model directory) and a
    running passive party process; a strict model trained and saved by both."""
    configs = write_federation(tmp_path, n_passive=1, training=TRAINING, rows=5000)
    process, address = start_passive(configs["passive-1"], tmp_path / "passive-1.address", tmp_path / "passive-1.log")
    set_peer_addresses(configs["active"], {1: ("passive-1", address)})
    other = tmp_path / "active-b.toml"  # the same party, training a larger model into another model directory
    other.write_text(configs["active"].read_text().replace('model_dir = "model-active"', 'model_dir = "model-b"')
                     .replace("n_trees = 5", "n_trees = 20").replace("max_depth = 3", "max_depth = 4"))
    trained = cli("party", "--config", str(configs["active"]), "--protocol", "strict", "--json")
    assert trained.returncode == 0, trained.stderr
    new = tmp_path / "new.csv"
    pd.read_csv(tmp_path / "active.csv", dtype={"id": str}).head(200).drop(columns=["SeriousDlqin2yrs"]) \
        .to_csv(new, index=False)
    yield tmp_path, configs["active"], other, new, process
    stop_passive_parties(configs["active"], [process])


def passive_model(workdir):
    return (workdir / "model-passive-1" / "passive-1.json").read_bytes()


def test_twenty_concurrent_predictions_during_a_training_run_are_right_or_refused(deployed):
    """20 ``teeboost predict`` at once, while the same active party trains another model: every
    one exits 0 with exactly the sequential reference's predictions, or names its refusal."""
    workdir, active, other, new, _ = deployed
    reference = cli("predict", "--config", str(active), "--data", str(new), "--output", str(workdir / "ref.csv"))
    assert reference.returncode == 0, reference.stderr
    expected = pd.read_csv(workdir / "ref.csv")
    before = passive_model(workdir)
    training = popen("party", "--config", str(other), "--protocol", "ntee", "--json")
    time.sleep(1.0)  # it is aligning or training when the predictions arrive

    def predict(k):
        return cli("predict", "--config", str(active), "--data", str(new), "--output", str(workdir / f"p{k}.csv"))

    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(predict, range(20)))
    right = refused = 0
    for k, result in enumerate(results):
        if result.returncode == 0:
            got = pd.read_csv(workdir / f"p{k}.csv")
            pd.testing.assert_frame_equal(got, expected, check_exact=True)  # never a mix of sessions
            right += 1
        else:  # refused by name: the passive party now serves another model, or said busy for too long
            assert "refused" in result.stderr or "serves only" in result.stderr, result.stderr
            refused += 1
    out, err = training.communicate(timeout=600)
    assert training.returncode == 0, err
    assert right >= 10, [r.stderr[-300:] for r in results if r.returncode]
    print(f"20 concurrent predictions during training: {right} right, {refused} refused by name, 0 wrong")
    assert passive_model(workdir) != before  # the run replaced the saved model at its end, not before


def test_models_are_bound_and_replaced_only_by_a_finished_run(deployed):
    """Another run's model (20 trees) replaces the saved one at its ``Finish``, after which the
    active party's model of 5 trees is refused by name, never scored with the wrong model;
    ``Setup`` then ``Finish`` with no training keeps the saved model, and a second run while
    one is live is refused."""
    workdir, active, other, new, _ = deployed
    before = passive_model(workdir)
    retrained = cli("party", "--config", str(other), "--protocol", "ntee", "--json")
    assert retrained.returncode == 0, retrained.stderr
    assert passive_model(workdir) != before
    stale = cli("predict", "--config", str(active), "--data", str(new), "--output", str(workdir / "stale.csv"))
    assert stale.returncode != 0 and "serves only its saved model" in stale.stderr, stale.stderr
    assert not (workdir / "stale.csv").exists()

    saved = passive_model(workdir)
    config = load_config(active)
    channel = connect(config)
    try:
        data = PartyData.from_csv(workdir / "active.csv", id_column="id", name="active", label="SeriousDlqin2yrs")
        rows, _ = intersect_as_active(channel, data.ids)
        params = json.dumps({"n_trees": 2, "max_depth": 2, "min_samples_leaf": 20})
        empty = np.empty(0, dtype=np.int64)
        channel.request_all({1: Setup("empty-run", "ntee", params, 1, np.arange(rows.size), empty, empty)})
        with pytest.raises(ProtocolError, match="did not finish its model"):
            channel.request_all({1: Finish("ntee")})
        with pytest.raises(ProtocolError, match="Busy: .*is training run 'empty-run'"):  # overlapping runs
            channel.request_all({1: Setup("other-run", "ntee", params, 1, np.arange(rows.size), empty, empty)})
    finally:
        channel.close()
    assert passive_model(workdir) == saved
    fresh = cli("predict", "--config", str(other), "--data", str(new), "--output", str(workdir / "fresh.csv"))
    assert fresh.returncode == 0, fresh.stderr  # the saved model still serves, during the live run too


def test_passive_data_faults_reach_the_active_party_without_ids_values_or_paths(deployed):
    """A duplicate id and a bad cell in the passive party's file: the active party hears a
    reason code and a reference, its output and audit log hold no passive id, value or path,
    and the details are in the passive party's own log. A half-written file is not read."""
    workdir, active, _, new, _ = deployed
    data = workdir / "passive-1.csv"
    original = data.read_text()
    frame = pd.read_csv(data, dtype={"id": str})
    secret_id, secret_value = frame["id"].iloc[7], "91.5secretvalue"
    bad_value = frame.copy()
    bad_value["age"] = bad_value["age"].astype(object)
    bad_value.loc[bad_value.index[3], "age"] = secret_value
    for fault, faulty in (("duplicate id", pd.concat([frame, frame.iloc[[7]]])), ("bad value", bad_value)):
        tmp = workdir / "passive-1.csv.new"
        faulty.to_csv(tmp, index=False)
        tmp.replace(data)  # atomic, as the docs say; the content itself is bad
        result = cli("predict", "--config", str(active), "--data", str(new), "--output", str(workdir / "f.csv"))
        assert result.returncode != 0, fault
        shown = result.stdout + result.stderr + (workdir / "audit-active.jsonl").read_text()
        assert "cannot serve" in result.stderr and "reference" in result.stderr, result.stderr
        for secret in (f"'{secret_id}'", secret_value, str(data), "passive-1.csv"):
            assert secret not in shown, (fault, secret, shown[-2000:])
    passive_log = (workdir / "passive-1.log").read_text()
    assert "duplicate" in passive_log and secret_value in passive_log  # the details stay with its operator

    data.write_text(original)  # a good file again, then one a writer has not finished
    good = cli("predict", "--config", str(active), "--data", str(new), "--output", str(workdir / "good.csv"))
    assert good.returncode == 0, good.stderr
    data.write_text(original[: len(original) // 2])  # the last line has no newline yet
    half = cli("predict", "--config", str(active), "--data", str(new), "--output", str(workdir / "half.csv"))
    assert half.returncode == 0, half.stderr  # the data read before is served, not half a file
    pd.testing.assert_frame_equal(pd.read_csv(workdir / "half.csv"), pd.read_csv(workdir / "good.csv"))
    assert "half-written" in (workdir / "passive-1.log").read_text()
