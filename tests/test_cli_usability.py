"""Issue #17: the steps a new user takes with the command line work the first time.

Each test repeats one user's step through the real CLI (``teeboost.cli.main``) on the bundled
sample, with few trees and, for SecureBoost, small insecure keys, so the file stays fast.
"""

import argparse
import io
import json
import sys
from importlib.metadata import version

import pytest

from teeboost.checkpoint import passive_checkpoint_file, remove_checkpoint
from teeboost.cli import main
from teeboost.cli.main_parser import _all_parsers, _parser
from teeboost.datasets import bundled_path

from .helpers import SMALL_FLAGS

FAST = ["--n-trees", "2", "--max-depth", "2"]
SMALL_KEYS = ["--insecure-key-bits", "--key-bits", "512", "--crypto-workers", "1"]


def _train_json(capsys, *argv: str) -> dict:
    capsys.readouterr()
    assert main(["train", *SMALL_FLAGS, "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


# 1. help


def test_every_option_of_every_command_has_a_help_text():
    missing = []
    for parser in _all_parsers(_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                missing += [f"{parser.prog} {choice.dest}" for choice in action._choices_actions if not choice.help]
            elif not action.help:
                missing.append(f"{parser.prog} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, f"options without help: {missing}"


def test_help_shows_the_defaults_of_training_options(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # undo argparse's line wrapping
    for expected in ("boosting rounds", "(default: 100)", "(default: 0.3)", "(default: plain)", "(default: 2048)"):
        assert expected in text


# 2. --version


def test_version_prints_the_installed_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"teeboost {version('teeboost')}"


# 3. row counts as the README writes them


@pytest.mark.parametrize("option", ["--rows", "--scale-rows"])
def test_row_counts_accept_scientific_and_grouped_spellings(option):
    args = _parser().parse_args(["bench", option, "1e4", "2e4", "1.5e5", "10000", "10_000"])
    assert getattr(args, option[2:].replace("-", "_")) == [10_000, 20_000, 150_000, 10_000, 10_000]


@pytest.mark.parametrize("text, message", [("1.5", "not a whole number of rows"), ("lots", "not a number of rows"),
                                           ("0", "at least 1 row")])
def test_row_counts_refuse_what_is_not_a_whole_number_of_rows(capsys, text, message):
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "--rows", text])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_bench_runs_with_rows_written_as_in_the_readme(tmp_path, capsys):
    assert main(["bench", "--rows", "1.5e3", "--protocols", "plain", "--n-trees", "1", "--out", str(tmp_path)]) == 0
    entry = json.loads((tmp_path / "results.jsonl").read_text().splitlines()[0])
    assert entry["rows"] == 1500


# 4. progress shows what a slow step is doing


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_names_the_secureboost_phases(tmp_path, monkeypatch, capsys):
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["train", *SMALL_FLAGS, "--protocol", "secureboost", *SMALL_KEYS, *FAST, "--model-dir", str(tmp_path / "m")]) == 0
    shown = terminal.getvalue()
    assert "generating Paillier keys (512 bits)" in shown
    for tree in (1, 2):
        assert f"encrypting gradients for tree {tree}" in shown
        assert f"decrypting bin sums for tree {tree}" in shown


def test_json_runs_show_no_progress(tmp_path, monkeypatch, capsys):
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["train", *SMALL_FLAGS, "--json", "--protocol", "secureboost", *SMALL_KEYS, *FAST,
                 "--model-dir", str(tmp_path / "m")]) == 0
    assert "encrypting" not in terminal.getvalue()


# 5. early stopping says that it ended the run


def test_early_stopping_says_when_it_ended_the_run(tmp_path, capsys):
    argv = ["--n-trees", "40", "--early-stopping-rounds", "2", "--model-dir", str(tmp_path / "m")]
    report = _train_json(capsys, *argv)
    assert report["stopped_early"] is True and report["rounds_run"] < 40
    assert report["n_trees"] == report["best_round"] + 1 < report["rounds_run"]
    assert main(["train", *SMALL_FLAGS, *argv]) == 0
    out = capsys.readouterr().out
    assert f"stopped after {report['rounds_run']} rounds" in out
    assert f"kept the {report['best_round'] + 1} rounds up to the best validation auc" in out


def test_early_stopping_that_never_triggers_says_so(tmp_path, capsys):
    report = _train_json(capsys, "--n-trees", "2", "--early-stopping-rounds", "5", "--model-dir", str(tmp_path / "m"))
    assert report["stopped_early"] is False and report["rounds_run"] == 2


def test_runs_without_early_stopping_carry_no_early_stopping_fields(tmp_path, capsys):
    report = _train_json(capsys, *FAST, "--model-dir", str(tmp_path / "m"))
    assert "stopped_early" not in report and "best_round" not in report


# 6. the report names the protection each protocol used


@pytest.mark.parametrize("protocol, protection, options", [
    ("plain", "none", None),
    ("secureboost", "Paillier encryption", {"scheme": "paillier", "key_bits": 512}),
    ("ntee", "AES-128-GCM", {"aes_bits": 128}),
    ("onetee", "passive bins sealed to the active enclave", {"aes_bits": 128, "onetee_bins_once": True}),
    ("strict", "AES-128-GCM", {"aes_bits": 128}),
])
def test_report_names_what_the_protocol_used(tmp_path, capsys, protocol, protection, options):
    report = _train_json(capsys, "--protocol", protocol, "--allow-simulated-tee", *SMALL_KEYS, *FAST,
                         "--model-dir", str(tmp_path / "m"))
    if protocol == "onetee":
        index_sets = _train_json(capsys, "--protocol", protocol, "--allow-simulated-tee", "--onetee-index-sets",
                                 *SMALL_KEYS, *FAST, "--model-dir", str(tmp_path / "i"))
        assert "one-time pad in Z_2^64" in index_sets["protection"]
        assert index_sets["options"]["onetee_bins_once"] is False
    assert protection in report["protection"]
    if options is None:
        assert "options" not in report
    else:
        assert options.items() <= report["options"].items()
    if protocol != "secureboost":
        assert "scheme" not in report.get("options", {}) and "Paillier" not in report["protection"]


# 7. a model directory holds exactly the model last written there


def test_retraining_with_fewer_parties_leaves_no_stale_party_files(tmp_path, capsys):
    model_dir = tmp_path / "m"
    _train_json(capsys, "--data", str(bundled_path()), "--label", "SeriousDlqin2yrs",
                "--passive-columns", "age,MonthlyIncome", "--passive-columns", "DebtRatio",
                *FAST, "--model-dir", str(model_dir))
    assert (model_dir / "passive-2.json").exists()
    (model_dir / "notes.json").write_text('{"mine": true}')  # the user's files stay
    (model_dir / "passive-7.json").write_text('{"format": "something else"}')
    report = _train_json(capsys, *FAST, "--model-dir", str(model_dir))
    assert sorted(p.name for p in model_dir.iterdir()) == ["active.json", "notes.json", "passive-1.json",
                                                           "passive-7.json"]
    assert sorted(report["model_files"]) == sorted(str(model_dir / n) for n in ("active.json", "passive-1.json"))


@pytest.mark.parametrize("protocol", ["plain", "ntee"])
def test_a_finished_run_leaves_no_checkpoint_folder(tmp_path, capsys, protocol):
    model_dir = tmp_path / "m"
    _train_json(capsys, "--protocol", protocol, "--allow-simulated-tee", *FAST, "--model-dir", str(model_dir))
    assert sorted(p.name for p in model_dir.iterdir()) == ["active.json", "passive-1.json"]


def test_a_party_removing_its_checkpoint_removes_the_emptied_folder(tmp_path):
    """What every party of a deployment does once its model file is saved."""
    emptied = passive_checkpoint_file(tmp_path / "model-passive-1" / "checkpoint", 1)
    shared = passive_checkpoint_file(tmp_path / "shared", 1)
    for path in (emptied, shared):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"checkpoint")
    (shared.parent / "keep.txt").write_text("not teeboost's")
    remove_checkpoint(emptied)
    remove_checkpoint(shared)
    assert not emptied.parent.exists() and (tmp_path / "model-passive-1").exists()
    assert sorted(p.name for p in shared.parent.iterdir()) == ["keep.txt"]


# 8. predict finds the model train wrote


def test_predict_defaults_to_the_directory_train_writes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["train", *SMALL_FLAGS, "--json", *FAST]) == 0
    capsys.readouterr()
    assert main(["predict", "--data", str(bundled_path()), "--output", "p.csv"]) == 0
    assert "wrote 19999 predictions to p.csv" in capsys.readouterr().out


def test_predict_without_a_model_says_where_it_looked(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["predict", "--data", str(bundled_path()), "--output", "p.csv"]) == 2
    err = capsys.readouterr().err
    assert "no model in teeboost-model" in err and "--model-dir" in err
    assert not (tmp_path / "p.csv").exists()


def test_removing_a_checkpoint_also_removes_a_write_a_kill_interrupted(tmp_path):
    from teeboost.checkpoint import remove_checkpoint

    folder = tmp_path / "checkpoint"
    folder.mkdir()
    (folder / "active.ckpt").write_bytes(b"x")
    (folder / ".active.ckpt.k3j9x2").write_bytes(b"half")  # write_atomically's temporary name
    remove_checkpoint(folder / "active.ckpt")
    assert not folder.exists()
