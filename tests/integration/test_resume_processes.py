"""Kill a party mid-training, restart it, and end with the uninterrupted run's model.

Real processes over gRPC with mutual TLS, real kill -9, real checkpoint files on disk.
"""

import subprocess
import sys
import time

import numpy as np
import pytest

from teeboost.checkpoint import ActiveCheckpoint, active_checkpoint_file, passive_checkpoint_file
from teeboost.config import BoostParams, ProtocolOptions
from teeboost.data import PartyData
from teeboost.deploy.active import shutdown_peers
from teeboost.deploy.config import load_config
from teeboost.deploy.demo import set_peer_addresses, start_passive, write_federation
from teeboost.errors import CheckpointError
from teeboost.federation import FederatedModel, train_local
from teeboost.model_files import load_active, load_passive
from teeboost.row_matching import align_parties, train_test_rows

from ..helpers import federated_descriptions

TRAINING = {"n_trees": 8, "max_depth": 3, "subsample": 0.8, "max_bin": 32, "min_samples_leaf": 20}
PROTOCOL = "ntee"  # enclaves at every party: their state is rebuilt and re-attested on resume


def active_command(config, *extra):
    return [sys.executable, "-m", "teeboost.cli", "party", "--config", str(config), *extra]


def wait_for_checkpoint(path, n_trees, process, timeout=120):
    """Block until the active party has checkpointed at least ``n_trees`` trees."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1]
        try:
            if ActiveCheckpoint.load(path, 10**6).n_trees >= n_trees:
                return
        except CheckpointError:
            pass  # not written yet
        time.sleep(0.05)
    raise AssertionError(f"no checkpoint of {n_trees} trees within {timeout} s")


@pytest.fixture
def federation(tmp_path):
    configs = write_federation(tmp_path, n_passive=2, training={**TRAINING}, rows=5000)
    text = configs["active"].read_text().replace('protocol = "plain"', f'protocol = "{PROTOCOL}"')
    configs["active"].write_text(text.replace("connect_timeout = 30", "connect_timeout = 30\nrecover_timeout = 90"))
    passives, addresses = {}, {}
    for k in (1, 2):
        name = f"passive-{k}"
        process, address = start_passive(configs[name], tmp_path / f"{name}.address", tmp_path / f"{name}.log")
        passives[k] = process
        addresses[k] = (name, address)
        # a restarted party comes back on the same address
        configs[name].write_text(configs[name].read_text().replace("127.0.0.1:0", address))
    set_peer_addresses(configs["active"], addresses)
    yield tmp_path, configs, passives
    config = load_config(configs["active"])
    config.connect_timeout = 3.0
    try:
        shutdown_peers(config, "test finished")
    except Exception:
        for process in passives.values():
            process.terminate()
    for process in passives.values():
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def uninterrupted_reference(workdir):
    """The same run in one process without interruption, on the ids the parties share."""
    frames = {name: PartyData.from_csv(workdir / f"{name}.csv", id_column="id", name=name,
                                       label="SeriousDlqin2yrs" if name == "active" else None)
              for name in ("active", "passive-1", "passive-2")}
    active = frames["active"]
    common = set(frames["passive-1"].ids) & set(frames["passive-2"].ids)
    active = active.take(np.array([i for i, x in enumerate(active.ids) if x in common]))
    passives = align_parties(active, [frames[f"passive-{k}"].take(np.flatnonzero(np.isin(frames[f"passive-{k}"].ids,
                                                                                         active.ids)))
                                      for k in (1, 2)])
    train, _ = train_test_rows(active.n_rows, 0.3, 0)
    reference, _ = train_local(active.take(train), [p.take(train) for p in passives], BoostParams(**TRAINING),
                               PROTOCOL, options=ProtocolOptions(allow_simulated_tee=True))
    return reference


def deployed_model(workdir):
    return FederatedModel(load_active(workdir / "model-active" / "active.json"),
                          [load_passive(workdir / f"model-passive-{k}" / f"passive-{k}.json") for k in (1, 2)])


def assert_same_model(workdir):
    deployed, reference = deployed_model(workdir), uninterrupted_reference(workdir)
    assert federated_descriptions(deployed) == federated_descriptions(reference)
    assert [t.to_dict() for t in deployed.active.ensemble.trees] == \
        [t.to_dict() for t in reference.active.ensemble.trees]  # record ids and leaf values too
    for mine, theirs in zip(deployed.passives, reference.passives):
        assert mine.owner.to_list() == theirs.owner.to_list()


def test_active_killed_and_resumed_ends_with_the_uninterrupted_model(federation):
    workdir, configs, _ = federation
    checkpoint = active_checkpoint_file(workdir / "model-active" / "checkpoint")
    active = subprocess.Popen(active_command(configs["active"]), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    wait_for_checkpoint(checkpoint, 3, active)
    active.kill()  # SIGKILL: no clean-up runs
    active.wait()
    assert not (workdir / "model-active" / "active.json").exists()
    for k in (1, 2):
        assert passive_checkpoint_file(workdir / f"model-passive-{k}" / "checkpoint", k).exists()

    resumed = subprocess.run(active_command(configs["active"], "--resume", "--json"), capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert_same_model(workdir)
    assert not checkpoint.parent.exists()  # removed, folder and all, once every party saved its model
    for k in (1, 2):
        assert not passive_checkpoint_file(workdir / f"model-passive-{k}" / "checkpoint", k).parent.exists()


def test_passive_killed_and_restarted_the_active_recovers_on_its_own(federation):
    workdir, configs, passives = federation
    checkpoint = active_checkpoint_file(workdir / "model-active" / "checkpoint")
    active = subprocess.Popen(active_command(configs["active"], "--json"), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    wait_for_checkpoint(checkpoint, 3, active)
    passives[2].kill()
    passives[2].wait()
    time.sleep(1.0)  # the active party notices and starts waiting
    ready = workdir / "passive-2.restarted"
    passives[2], _ = start_passive(configs["passive-2"], ready, workdir / "passive-2.restarted.log")
    _, stderr = active.communicate(timeout=300)
    assert active.returncode == 0, stderr
    assert "resuming from the last checkpoint" in stderr
    assert_same_model(workdir)
