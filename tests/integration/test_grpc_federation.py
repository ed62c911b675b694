"""Parties as real processes on 127.0.0.1 over gRPC with mutual TLS."""

import json
import subprocess
import sys
import time

import numpy as np
import pytest

from teeboost.config import BoostParams
from teeboost.core.release import quantize_margins
from teeboost.data import PartyData
from teeboost.deploy.demo import set_peer_addresses, start_passive, write_federation
from teeboost.federation import FederatedModel, train_local
from teeboost.model_files import load_active, load_passive
from teeboost.row_matching import align_parties, train_test_rows
from teeboost.transport.tls import create_federation_certs

from ..helpers import federated_descriptions, stop_passive_parties

TRAINING = {"n_trees": 3, "max_depth": 3, "subsample": 0.8, "max_bin": 32, "min_samples_leaf": 20}


def run_cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "teeboost.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def federation(tmp_path):
    """Active + two passive parties; passives running as processes; stopped afterwards."""
    configs = write_federation(tmp_path, n_passive=2, training=TRAINING, rows=5000)
    processes, addresses = [], {}
    for k in (1, 2):
        name = f"passive-{k}"
        process, address = start_passive(configs[name], tmp_path / f"{name}.address", tmp_path / f"{name}.log")
        processes.append(process)
        addresses[k] = (name, address)
    set_peer_addresses(configs["active"], addresses)
    yield tmp_path, configs, processes
    stop_passive_parties(configs["active"], processes)


def in_memory_reference(workdir):
    """The same training in one process, on the intersection in the active party's order."""
    frames = {name: PartyData.from_csv(workdir / f"{name}.csv", id_column="id", name=name,
                                       label="SeriousDlqin2yrs" if name == "active" else None)
              for name in ("active", "passive-1", "passive-2")}
    active = frames["active"]
    common = set(frames["passive-1"].ids) & set(frames["passive-2"].ids)
    rows = np.array([i for i, x in enumerate(active.ids) if x in common])
    active = active.take(rows)
    passives = align_parties(active, [frames[f"passive-{k}"].take(np.flatnonzero(np.isin(frames[f"passive-{k}"].ids,
                                                                                        active.ids))) for k in (1, 2)])
    train, _ = train_test_rows(active.n_rows, 0.3, 0)
    reference, _ = train_local(active.take(train), [p.take(train) for p in passives], BoostParams(**TRAINING))
    return active, passives, reference, rows.size


def test_three_processes_with_mtls_equal_the_in_memory_model(federation):
    workdir, configs, _ = federation
    result = run_cli("party", "--config", str(configs["active"]), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["tls"] == "mutual TLS" and report["transport"] == "grpc"
    assert report["bytes_total"] > 0 and report["psi"]["bytes"] > 0
    assert report["bytes"]["active_to_passive"] > 0 and report["bytes"]["passive_to_active"] > 0

    active, passives, reference, n_common = in_memory_reference(workdir)
    n_active = len(PartyData.from_csv(workdir / "active.csv", id_column="id", name="active").ids)
    assert report["psi"]["intersection"] == n_common < n_active  # ids only partly overlap

    deployed = FederatedModel(load_active(workdir / "model-active" / "active.json"),
                              [load_passive(workdir / f"model-passive-{k}" / f"passive-{k}.json") for k in (1, 2)])
    assert federated_descriptions(deployed) == federated_descriptions(reference)

    # federated prediction with the parties online: one prediction per input row
    new_rows = workdir / "new.csv"
    import pandas as pd

    pd.read_csv(workdir / "active.csv", dtype={"id": str}).set_index("id").loc[active.ids[:50]].reset_index() \
        .drop(columns=["SeriousDlqin2yrs"]).to_csv(new_rows, index=False)
    predicted = run_cli("predict", "--config", str(configs["active"]), "--data", str(new_rows),
                        "--output", str(workdir / "p.csv"), "--json")
    assert predicted.returncode == 0, predicted.stderr
    output = pd.read_csv(workdir / "p.csv")
    assert len(output) == 50
    expected = reference.predict(active.features[:50], [p.features[:50] for p in passives])
    assert np.allclose(output["probability_1"].to_numpy(), expected, rtol=0, atol=1e-12)


def test_strict_mode_over_grpc_grows_plains_trees_and_predicts_between_enclaves(federation):
    """Three processes, strict: the model equals the in-memory one (without the statistics
    strict does not publish), held-out and new rows are predicted enclave to enclave."""
    workdir, configs, _ = federation
    result = run_cli("party", "--config", str(configs["active"]), "--protocol", "strict", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["protocol"] == "strict" and "simulated" in report["enclaves"] and report["value"] > 0.6
    assert "RouteRequest" not in report["bytes_by_message"]  # no routing question in the clear
    passive_files = [workdir / f"model-passive-{k}" / f"passive-{k}.json" for k in (1, 2)]
    assert all(load_passive(path).records_sealed for path in passive_files)  # no record in a passive host's clear
    for k in (1, 2):  # the label owner consents, each passive party opens its records (to compare the trees)
        consent = workdir / f"consent-{k}.json"
        assert run_cli("consent", "--config", str(configs["active"]), "--party", f"passive-{k}",
                       "--out", str(consent)).returncode == 0
        opened = run_cli("disclose", "--config", str(configs[f"passive-{k}"]), "--consent", str(consent))
        assert opened.returncode == 0, opened.stderr
    deployed = FederatedModel(load_active(workdir / "model-active" / "active.json"),
                              [load_passive(path) for path in passive_files])
    assert deployed.active.protocol == "strict" and all(p.protocol == "strict" for p in deployed.passives)
    assert all(set(t.gain) == {0.0} for t in deployed.active.ensemble.trees)
    active, passives, reference, _ = in_memory_reference(workdir)
    assert federated_descriptions(deployed, statistics=False) == federated_descriptions(reference, statistics=False)

    import pandas as pd

    new_rows = workdir / "new.csv"
    pd.read_csv(workdir / "active.csv", dtype={"id": str}).set_index("id").loc[active.ids[:40]].reset_index() \
        .drop(columns=["SeriousDlqin2yrs"]).to_csv(new_rows, index=False)
    predicted = run_cli("predict", "--config", str(configs["active"]), "--data", str(new_rows),
                        "--output", str(workdir / "p.csv"), "--json")
    assert predicted.returncode == 0, predicted.stderr
    output = pd.read_csv(workdir / "p.csv")
    # the passive parties' default policy releases each output at 8 bits (teeboost.core.release)
    margin, _ = reference.predict_margin(active.features[:40], [p.features[:40] for p in passives])
    ensemble = reference.active.ensemble
    expected = ensemble.loss.predict(quantize_margins(ensemble, margin, 8))
    assert len(output) == 40 and np.allclose(output["probability_1"].to_numpy(), expected, rtol=0, atol=1e-12)
    assert not np.allclose(expected, reference.predict(active.features[:40], [p.features[:40] for p in passives]),
                           rtol=0, atol=1e-12)  # the quantization is at work


def test_party_with_a_certificate_from_another_ca_is_refused(federation):
    workdir, configs, _ = federation
    rogue = create_federation_certs(workdir / "rogue", ["active"])["active"]
    text = configs["active"].read_text()
    text = text.replace('cert = "certs/active.pem"', f'cert = "{rogue.cert}"').replace(
        'key = "certs/active.key"', f'key = "{rogue.key}"').replace("connect_timeout = 30", "connect_timeout = 5")
    configs["active"].write_text(text)
    started = time.monotonic()
    result = run_cli("party", "--config", str(configs["active"]))
    assert result.returncode == 2
    assert "passive party 1 (passive-1)" in result.stderr and "unreachable" in result.stderr
    assert time.monotonic() - started < 60


def test_peer_killed_mid_training_stops_the_others_with_a_clear_error(federation):
    """With recovery switched off (``recover_timeout = 0``) a lost peer ends the run at once."""
    workdir, configs, processes = federation
    text = configs["active"].read_text().replace('protocol = "plain"', 'protocol = "plain"\nn_trees = 400')
    configs["active"].write_text(text.replace("n_trees = 3\n", "").replace("timeout = 300", "timeout = 20")
                                 .replace("connect_timeout = 30", "connect_timeout = 30\nrecover_timeout = 0"))
    active = subprocess.Popen([sys.executable, "-m", "teeboost.cli", "party", "--config", str(configs["active"])],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    model_dir = workdir / "model-active"
    checkpoint = model_dir / "checkpoint" / "active.ckpt"
    deadline = time.monotonic() + 60
    while not checkpoint.exists() and time.monotonic() < deadline and active.poll() is None:
        time.sleep(0.1)  # PSI done, and training under way: its first checkpoint is written
    assert checkpoint.exists(), "the active party never checkpointed"
    processes[1].kill()
    started = time.monotonic()
    _, stderr = active.communicate(timeout=120)
    assert active.returncode == 2, stderr
    assert "passive party 2 (passive-2)" in stderr and ("unreachable" in stderr or "went away" in stderr)
    assert time.monotonic() - started < 60
    assert not (model_dir / "active.json").exists()  # a failed run writes no model
