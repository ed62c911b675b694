"""Checkpoint after every round, ``--resume`` ends with the uninterrupted run's model."""

import numpy as np
import pytest

from teeboost.checkpoint import ActiveCheckpoint, active_checkpoint_file, passive_checkpoint_file
from teeboost.config import BoostParams, ProtocolOptions
from teeboost.data import PartyData
from teeboost.errors import CheckpointError, IntegrityError, ProtocolError
from teeboost.federation import train_local
from teeboost.transport.transcript import read_transcript

from .helpers import SMALL_FLAGS, federated_descriptions

PARAMS = BoostParams(n_trees=4, max_depth=3, subsample=0.8, max_bin=32)


class Crash(Exception):
    """Stands in for a killed process: raised from the progress callback mid-run."""


def crash_after(n_trees):
    def on_tree(progress):
        if progress.tree_index + 1 == n_trees:
            raise Crash
    return on_tree


def model_files(model, directory):
    """Every party's saved model file, byte for byte (record ids and leaf values included)."""
    return {p.name: p.read_bytes() for p in model.save(directory)}


def interrupted_then_resumed(tmp_path, active, passives, params, protocol="plain", crash_at=2, **kwargs):
    checkpoints = tmp_path / "ckpt"
    with pytest.raises(Crash):
        train_local(active, passives, params, protocol, checkpoint_dir=checkpoints,
                    on_tree=crash_after(crash_at), **kwargs)
    resumed, run = train_local(active, passives, params, protocol, checkpoint_dir=checkpoints, resume=True,
                               **kwargs)
    return resumed, run


@pytest.mark.parametrize("protocol, options", [
    ("plain", None),
    ("secureboost", ProtocolOptions(key_bits=512, insecure_key_bits=True)),
    ("ntee", ProtocolOptions(allow_simulated_tee=True)),
    ("onetee", ProtocolOptions(allow_simulated_tee=True)),
    ("onetee", ProtocolOptions(onetee_bins_once=True, allow_simulated_tee=True)),
    ("strict", ProtocolOptions(allow_simulated_tee=True)),
], ids=["plain", "secureboost", "ntee", "onetee", "onetee-bins-once", "strict"])
def test_resumed_model_equals_uninterrupted(tmp_path, small_credit, protocol, options):
    active, passives = small_credit
    reference, _ = train_local(active, passives, PARAMS, protocol, options=options)
    resumed, run = interrupted_then_resumed(tmp_path, active, passives, PARAMS, protocol, options=options)
    if protocol == "strict":  # random record ids (their order says nothing): compare what the splits mean
        assert federated_descriptions(resumed, statistics=False) == federated_descriptions(reference, statistics=False)
    else:
        assert model_files(resumed, tmp_path / "resumed") == model_files(reference, tmp_path / "reference")
    assert [t["tree"] for t in run.to_dict()["per_tree"]] == [0, 1, 2, 3]


def test_checkpoint_files_per_party_after_each_round(tmp_path, small_credit):
    active, passives = small_credit
    seen = []

    def on_tree(progress):
        seen.append(sorted(p.name for p in (tmp_path / "ckpt").glob("*.ckpt")))

    train_local(active, passives, PARAMS, checkpoint_dir=tmp_path / "ckpt", on_tree=on_tree)
    assert seen[0] == [] and seen[1] == ["active.ckpt", "passive-1.ckpt"]


def test_multiclass_with_early_stopping_resumes(tmp_path, small_credit):
    active, passives = small_credit
    column = np.nan_to_num(active.features[:, 0])
    labels = np.digitize(column, np.quantile(column, [1 / 3, 2 / 3])).astype(float)  # 3 classes
    features = np.delete(active.features, 0, axis=1)
    names = active.feature_names[1:]
    three = PartyData(active.name, active.source, features, names, ids=active.ids, labels=labels,
                      label_name="age_band")
    rows = np.arange(three.n_rows)
    fit, valid = rows[:2400], rows[2400:]
    params = BoostParams(n_trees=5, max_depth=2, early_stopping_rounds=2, subsample=0.8, max_bin=32)
    validation = (three.take(valid), [p.take(valid) for p in passives])
    train = (three.take(fit), [p.take(fit) for p in passives])
    reference, _ = train_local(*train, params, validation=validation)
    resumed, _ = interrupted_then_resumed(tmp_path, *train, params, crash_at=5, validation=validation)
    assert model_files(resumed, tmp_path / "resumed") == model_files(reference, tmp_path / "reference")


def test_transcript_continues_across_resume(tmp_path, small_credit):
    active, passives = small_credit
    reference_path, resumed_path = tmp_path / "reference.tbt", tmp_path / "resumed.tbt"
    train_local(active, passives, PARAMS, transcript=reference_path)
    interrupted_then_resumed(tmp_path, active, passives, PARAMS, transcript=resumed_path)
    assert not resumed_path.with_name("resumed.tbt.partial").exists()

    def notes(path):
        return [type(r.message).__name__ for r in read_transcript(path) if r.kind_name == "note"]

    assert notes(resumed_path) == notes(reference_path)  # no tree noted twice, none lost


def test_resume_refuses_another_runs_checkpoint(tmp_path, small_credit):
    active, passives = small_credit
    with pytest.raises(Crash):
        train_local(active, passives, PARAMS, checkpoint_dir=tmp_path, on_tree=crash_after(2))
    with pytest.raises(CheckpointError, match="another run"):
        train_local(active, passives, BoostParams(n_trees=4, max_depth=2, subsample=0.8, max_bin=32),
                    checkpoint_dir=tmp_path, resume=True)


def test_resume_refuses_changed_passive_data(tmp_path, small_credit):
    active, passives = small_credit
    with pytest.raises(Crash):
        train_local(active, passives, PARAMS, checkpoint_dir=tmp_path, on_tree=crash_after(2))
    changed = passives[0]
    features = changed.features.copy()
    features[0, 0] += 1.0
    changed = PartyData(changed.name, changed.source, features, changed.feature_names, ids=changed.ids)
    with pytest.raises(ProtocolError, match="data or parameters changed"):
        train_local(active, [changed], PARAMS, checkpoint_dir=tmp_path, resume=True)


def test_resume_names_missing_and_corrupt_checkpoints(tmp_path, small_credit):
    active, passives = small_credit
    with pytest.raises(CheckpointError, match="no checkpoint to resume from"):
        train_local(active, passives, PARAMS, checkpoint_dir=tmp_path, resume=True)
    with pytest.raises(Crash):
        train_local(active, passives, PARAMS, checkpoint_dir=tmp_path, on_tree=crash_after(2))
    path = active_checkpoint_file(tmp_path)
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(CheckpointError, match="corrupt"):
        train_local(active, passives, PARAMS, checkpoint_dir=tmp_path, resume=True)
    passive_checkpoint_file(tmp_path, 1).unlink()
    with pytest.raises(CheckpointError):
        train_local(active, passives, PARAMS, checkpoint_dir=tmp_path, resume=True)


BINS_ONCE = ProtocolOptions(onetee_bins_once=True, allow_simulated_tee=True)


def bins_records(path):
    return [r for r in read_transcript(path) if getattr(r.message, "kind", None) == "bins" and r.kind_name == "received"]


def test_one_tee_enclave_state_is_sealed_and_restored_not_resent(tmp_path, small_credit):
    """The bin assignments only the enclave holds come back from its sealed checkpoint."""
    active, passives = small_credit
    transcript = tmp_path / "run.tbt"
    with pytest.raises(Crash):
        train_local(active, passives, PARAMS, "onetee", options=BINS_ONCE, checkpoint_dir=tmp_path / "ckpt",
                    on_tree=crash_after(2), transcript=transcript)
    sealed = ActiveCheckpoint.load(active_checkpoint_file(tmp_path / "ckpt"), 10).sealed_enclave
    assert sealed
    train_local(active, passives, PARAMS, "onetee", options=BINS_ONCE, checkpoint_dir=tmp_path / "ckpt",
                resume=True, transcript=transcript)
    assert len(bins_records(transcript)) == 1  # sent once, before the crash; not again


def test_tampered_sealed_enclave_state_is_refused(tmp_path, small_credit):
    active, passives = small_credit
    with pytest.raises(Crash):
        train_local(active, passives, PARAMS, "onetee", options=BINS_ONCE, checkpoint_dir=tmp_path,
                    on_tree=crash_after(2))
    path = active_checkpoint_file(tmp_path)
    saved = ActiveCheckpoint.load(path, 10)
    blob = bytearray(saved.sealed_enclave)
    blob[len(blob) // 2] ^= 1
    saved.sealed_enclave = bytes(blob)
    saved.save(path)
    with pytest.raises(IntegrityError):
        train_local(active, passives, PARAMS, "onetee", options=BINS_ONCE, checkpoint_dir=tmp_path, resume=True)


def test_cli_train_killed_and_resumed(tmp_path):
    """``teeboost train`` killed with SIGKILL mid-run; ``--resume`` writes the uninterrupted model."""
    import subprocess
    import sys
    import time

    args = ["--protocol", "ntee", "--allow-simulated-tee", "--n-trees", "10", "--max-depth", "3", "--subsample", "0.8"]

    def command(model_dir, *extra):
        return [sys.executable, "-m", "teeboost.cli", "train", *SMALL_FLAGS, *args, "--model-dir", str(model_dir),
                "--transcript", str(model_dir / "run.tbt"), "--json", *extra]

    (tmp_path / "reference").mkdir()
    (tmp_path / "resumed").mkdir()
    done = subprocess.run(command(tmp_path / "reference"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    checkpoint = active_checkpoint_file(tmp_path / "resumed" / "checkpoint")
    process = subprocess.Popen(command(tmp_path / "resumed"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while True:
        assert process.poll() is None and time.monotonic() < deadline, "training ended before it could be killed"
        try:  # any round after the first: killed with most of the run still to go
            if ActiveCheckpoint.load(checkpoint, 10).n_trees >= 2:
                break
        except CheckpointError:
            pass
        time.sleep(0.01)  # polling must not starve the run it watches on a 2-core machine
    process.kill()
    process.wait()
    assert not (tmp_path / "resumed" / "active.json").exists()
    resumed = subprocess.run(command(tmp_path / "resumed", "--resume"), capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    for name in ("active.json", "passive-1.json"):
        assert (tmp_path / "resumed" / name).read_bytes() == (tmp_path / "reference" / name).read_bytes()
    notes = [[type(r.message).__name__ for r in read_transcript(tmp_path / d / "run.tbt") if r.kind_name == "note"]
             for d in ("reference", "resumed")]
    assert notes[0] == notes[1]
    assert not (tmp_path / "resumed" / "checkpoint").exists()
