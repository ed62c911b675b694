"""Every protocol on a Ray cluster grows exactly the trees it grows on local processes, and a
Ray worker killed mid-run is rerun (or, with no reruns allowed, the run stops with a named
error). The cluster is a private local instance (``ray_backend`` fixture, 2 CPUs)."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from teeboost.compute import ComputeOptions
from teeboost.config import BoostParams, ProtocolOptions
from teeboost.errors import TeeboostError
from teeboost.federation import train_local

from ..helpers import SMALL_FLAGS, federated_descriptions

pytest.importorskip("ray")

PARAMS = BoostParams(n_trees=2, max_depth=3, subsample=0.8, max_bin=32)
SIMULATED = ProtocolOptions(allow_simulated_tee=True)
SMALL_KEY = dict(key_bits=1024, insecure_key_bits=True)
VARIANTS = {
    "plain": ("plain", ProtocolOptions()),
    "secureboost": ("secureboost", ProtocolOptions(**SMALL_KEY)),
    "secureboost-ou": ("secureboost", ProtocolOptions(scheme="ou", **SMALL_KEY)),
    "ntee": ("ntee", SIMULATED),
    "onetee": ("onetee", SIMULATED),
    "onetee-index-sets": ("onetee", ProtocolOptions(onetee_bins_once=False, allow_simulated_tee=True)),
    "strict": ("strict", SIMULATED),
}
ROWS = 1500


def _data(small_credit, rows=ROWS):
    active, passives = small_credit
    keep = np.arange(rows)
    return active.take(keep), [p.take(keep) for p in passives]


def _ray(ray_backend, **changes) -> ComputeOptions:
    """Options that reach the fixture's instance (already started: address 'local' reuses it)."""
    return ComputeOptions(backend="ray", shard_rows=1024, **changes)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_protocol_grows_the_same_trees_on_ray(small_credit, ray_backend, variant):
    protocol, options = VARIANTS[variant]
    active, passives = _data(small_credit)
    local, _ = train_local(active, passives, PARAMS, protocol, options=options)
    on_ray, run = train_local(active, passives, PARAMS, protocol, options=options, compute=_ray(ray_backend))
    assert federated_descriptions(on_ray) == federated_descriptions(local)
    features = [p.features for p in passives]
    assert np.array_equal(on_ray.predict(active.features, features), local.predict(active.features, features))
    assert run.compute.startswith("Ray at")


def _busy_ray_workers() -> list[int]:
    """Ray worker processes running one of our jobs now (Ray titles them by the task)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if f.read().startswith(b"ray::_run_job"):
                        pids.append(int(entry))
            except OSError:
                continue
    return pids


class _Killer(threading.Thread):
    """SIGKILLs the first Ray worker seen running a job, as the OOM killer or an operator would."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.killed: list[int] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set() and not self.killed:
            for pid in _busy_ray_workers()[:1]:
                os.kill(pid, signal.SIGKILL)
                self.killed.append(pid)
            time.sleep(0.002)


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds Ray workers through /proc")


@needs_proc
def test_a_ray_worker_killed_mid_run_is_rerun_and_the_model_is_unchanged(small_credit, ray_backend):
    protocol, options = VARIANTS["secureboost"]
    active, passives = _data(small_credit)
    local, _ = train_local(active, passives, PARAMS, protocol, options=options)
    killer = _Killer()
    killer.start()
    try:
        on_ray, _ = train_local(active, passives, PARAMS, protocol, options=options, compute=_ray(ray_backend))
    finally:
        killer.stop.set()
        killer.join()
    assert killer.killed, "no Ray worker was caught running a job"
    assert federated_descriptions(on_ray) == federated_descriptions(local)


@needs_proc
def test_with_no_reruns_a_killed_ray_worker_stops_the_run_with_a_named_error(small_credit, ray_backend):
    protocol, options = VARIANTS["secureboost"]
    active, passives = _data(small_credit)
    killer = _Killer()
    killer.start()
    try:
        # binning, histograms or encryption, whichever job the killer caught, named as such
        with pytest.raises(TeeboostError, match=r"a Ray worker died running teeboost\..* 0 reruns did not finish it"):
            train_local(active, passives, PARAMS, protocol, options=options,
                        compute=_ray(ray_backend, max_retries=0))
    finally:
        killer.stop.set()
        killer.join()
    assert killer.killed


def test_the_estimator_trains_and_predicts_on_ray(small_credit, ray_backend, tmp_path):
    from teeboost import VerticalBoostClassifier

    active, passives = _data(small_credit, 800)
    local = VerticalBoostClassifier(n_estimators=2, max_depth=3, subsample=0.8, max_bin=32).fit(active, passives)
    on_ray = VerticalBoostClassifier(n_estimators=2, compute=_ray(ray_backend), max_depth=3, subsample=0.8, max_bin=32).fit(active, passives)
    assert np.array_equal(on_ray.predict_proba(active, passives), local.predict_proba(active, passives))
    assert on_ray.report_["compute"].startswith("Ray at")
    on_ray.save(tmp_path / "model")  # the setting belongs to this machine and run, not to the model
    loaded = VerticalBoostClassifier.load(tmp_path / "model")
    assert loaded.get_params()["compute"] is None
    assert np.array_equal(loaded.predict_proba(active, passives), local.predict_proba(active, passives))


def test_cli_trains_on_ray_and_says_so(tmp_path, capsys, ray_backend):
    import json

    from teeboost.cli import main

    assert main(["train", *SMALL_FLAGS, "--json", "--compute", "ray", "--n-trees", "1", "--model-dir", str(tmp_path / "m")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["compute"].startswith("Ray at") and report["value"] > 0.6
