"""The leakage-abuse attack: exact where the transcript determines bins, blind where it cannot."""

import csv
import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from teeboost.attack.guessing import accuracy_by_tolerance, approximate_deciles, guess
from teeboost.attack.order import infer_bins, recovery
from teeboost.attack.run import AttackTarget, run_attack
from teeboost.attack.view import read_view
from teeboost.cli import main
from teeboost.config import BoostParams, ProtocolOptions
from teeboost.core.binning import fit_bins
from teeboost.data import split_columns
from teeboost.federation import train_local

from ..helpers import SMALL_FLAGS


def attack_tiny(tmp_path, frame, label, params, protocol="plain"):
    active, passives = split_columns(frame, [["secret"]], label=label)
    path = tmp_path / f"{protocol}.tbt"
    train_local(active, passives, params, protocol, transcript=path)
    view = read_view(path)
    posterior = infer_bins(view, party=1, feature=0)
    bins = fit_bins(passives[0].features, params.max_bin).transform(passives[0].features)[:, 0].astype(int)
    return posterior, bins, passives[0].features[:, 0]


def test_three_sample_example_is_recovered_exactly(tmp_path):
    """Three samples, distinct gradients: each bin's gradient sum names its sample."""
    frame = pd.DataFrame({"own": [1.0, 2.0, 3.0], "secret": [30.0, 10.0, 20.0], "y": [1.0, 2.0, 4.0]})
    params = BoostParams(objective="regression", n_trees=1, max_depth=1, subsample=1.0, min_child_weight=0.0, max_bin=32)
    posterior, bins, values = attack_tiny(tmp_path, frame, "y", params)
    assert posterior.determined().all()
    assert posterior.probabilities.argmax(axis=1).tolist() == bins.tolist() == [2, 0, 1]
    stats = recovery(posterior, bins, values)
    assert stats["exact_share"] == 1.0 and stats["mean_abs_bin_error"] == 0 and stats["spearman"] == pytest.approx(1)


def test_exchangeable_samples_cannot_be_told_apart(tmp_path):
    """Same label, same node, same gradients: the sums say how many are in each bin, not which."""
    frame = pd.DataFrame({"own": [1.0, 2.0, 3.0, 4.0], "secret": [10.0, 20.0, 10.0, 20.0], "y": [0, 0, 1, 1]})
    params = BoostParams(n_trees=1, max_depth=1, subsample=1.0, min_child_weight=0.0, min_samples_leaf=2, max_bin=32)
    posterior, bins, values = attack_tiny(tmp_path, frame, "y", params)
    assert not posterior.determined().any()
    assert np.allclose(posterior.probabilities[:, :2], 0.5)  # each sample: either bin, equally likely
    assert recovery(posterior, bins, values)["exact_share"] == 0.0


def test_plain_transcript_orders_samples(tmp_path, small_credit):
    active, passives = small_credit
    path = tmp_path / "run.tbt"
    train_local(active, passives, BoostParams(n_trees=5, max_depth=3, subsample=0.8, max_bin=32), transcript=path)
    posterior = infer_bins(read_view(path), party=1, feature=0)
    bins = fit_bins(passives[0].features, 32).transform(passives[0].features)[:, 0].astype(int)
    assert recovery(posterior, bins, passives[0].features[:, 0])["spearman"] > 0.5


def test_guessing_methods_known_answers():
    rng = np.random.default_rng(0)
    truth = np.arange(100, dtype=float)
    deciles = approximate_deciles(truth, rng=rng)
    perfect = guess("attack_approx", truth, low=0, high=99, deciles=deciles, rng=rng, integer=True)
    assert accuracy_by_tolerance(perfect, truth, [1]) == [1.0]
    linear = guess("attack_minmax", truth, low=0, high=99, deciles=deciles, rng=rng, integer=False)
    assert np.allclose(linear, truth)
    assert accuracy_by_tolerance(guess("random_minmax", truth, low=0, high=99, deciles=deciles, rng=rng,
                                       integer=True), truth, [0])[0] < 0.2


def test_attack_cli_json_contract_and_files(tmp_path, capsys):
    out = tmp_path / "attack"
    code = main(["attack", *SMALL_FLAGS, "--protocol", "plain", "--target", "age:1,2", "--target", "MonthlyIncome:500,1000",
                 "--n-trees", "2", "--out", str(out), "--json"])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    (report,) = printed["reports"]
    assert {"results", "recovery", "labels", "assumptions", "seconds"} <= set(report)
    orders = {r["order"] for r in report["results"]}
    assert orders == {"inferred"}  # the true order is scored only with --upper-bound
    assert set(report["results"][0]) == {"rows", "feature", "order", "method", "tolerance", "accuracy", "scored_rows"}
    assert set(report["recovery"]["age"]) >= {"exact_share", "spearman", "missing_rows", "missing_flagged"}
    assert [row["role"] for row in report["labels"]] == ["active", "passive"]
    files = [Path(f) for f in printed["files"]]
    assert out / "transcript-plain-2x3.tbt" in files  # every file written is listed, transcripts too
    assert all(f.is_file() for f in files)
    assert {f.name for f in files} >= {"results.csv", "recovery.csv", "labels.csv", "assumptions.txt",
                                       "attack-plain-2x3-age.png"}


def test_upper_bound_rows_are_named_so_in_the_csv(tmp_path, capsys):
    out = tmp_path / "attack"
    assert main(["attack", *SMALL_FLAGS, "--protocol", "plain", "--target", "age:2", "--n-trees", "1", "--upper-bound",
                 "--out", str(out)]) == 0
    assert "true bin order (upper bound)" in capsys.readouterr().out
    with open(out / "results.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert {row["order"] for row in rows} == {"inferred", "true bin order (upper bound)"}
    # only method (iv) bounds anything: min-max is miscalibrated, a wrong order can beat the true one
    assert {row["method"] for row in rows if row["order"] != "inferred"} == {"attack_approx"}


def test_every_row_is_scored_and_missing_values_are_reported_apart(tmp_path, small_credit):
    active, passives = small_credit
    report = run_attack(active, passives, [AttackTarget("MonthlyIncome", (1000.0,))], BoostParams(n_trees=3, max_depth=3, subsample=0.8, max_bin=32),
                        "plain", out_dir=tmp_path)
    income = passives[0].features[:, passives[0].feature_names.index("MonthlyIncome")]
    trained = np.sort(np.random.default_rng(0).permutation(active.n_rows)[: active.n_rows // 2])
    truth = income[trained]
    rows = [r for r in report["results"] if r["feature"] == "MonthlyIncome"]
    assert {r["scored_rows"] for r in rows} == {int((~np.isnan(truth)).sum())}  # every row with a value
    recovery = report["recovery"]["MonthlyIncome"]
    assert recovery["rows"] == truth.size and recovery["missing_rows"] == int(np.isnan(truth).sum()) > 0
    assert 0 <= recovery["missing_flagged"] <= recovery["missing_rows"]


def test_inference_never_reads_ground_truth(tmp_path, small_credit, monkeypatch):
    """Same transcript, same public sample, different truth: stage 1 concludes exactly the same;
    only the scores change. Stage 1's signature carries no truth at all."""
    import inspect

    from teeboost.attack import run as run_module
    from teeboost.attack.infer import infer_orders

    assert set(inspect.signature(infer_orders).parameters) == {"view", "party", "public", "targets", "known"}
    active, passives = small_credit
    params = BoostParams(n_trees=12, max_depth=4, subsample=0.8, max_bin=32)
    options = ProtocolOptions(allow_simulated_tee=True)
    seen = []

    def recording(view, party, public, targets, known=None):
        assert known is None  # blind attack: no side knowledge either
        found = infer_orders(view, party, public, targets, known)
        seen.append({f: (o.scores.copy(), o.missing.copy(), o.bins.copy()) for f, o in found.items()})
        return found

    monkeypatch.setattr(run_module, "infer_orders", recording)
    target = [AttackTarget("age", (2.0,))]
    first = run_attack(active, passives, target, params, "ntee", options=options, out_dir=tmp_path / "a",
                       known_values=0)
    transcript = Path(first["transcript"])
    # the auditor's truth about the training rows, scrambled; the held-out (public) rows unchanged
    trained = np.sort(np.random.default_rng(0).permutation(active.n_rows)[: active.n_rows // 2])
    features = passives[0].features.copy()
    features[trained] = features[np.random.default_rng(9).permutation(trained)]
    scrambled = [dataclasses.replace(passives[0], features=features)]
    second = run_attack(active, scrambled, target, params, "ntee", options=options, transcript=transcript,
                        out_dir=tmp_path / "b", known_values=0)
    for feature in seen[0]:
        for a, b in zip(seen[0][feature], seen[1][feature]):
            assert np.array_equal(a, b)
    assert first["recovery"]["age"]["spearman"] != second["recovery"]["age"]["spearman"]


def test_sweep_plots_leakage_against_model_size_for_each_protocol(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["attack", *SMALL_FLAGS, "--protocols", "plain,ntee", "--allow-simulated-tee", "--sweep", "1x2,2x2",
                 "--target", "age:2", "--out", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [(r["protocol"], r["n_trees"]) for r in printed["reports"]] == [("plain", 1), ("plain", 2), ("ntee", 1),
                                                                          ("ntee", 2)]
    names = {Path(f).name for f in printed["files"]}
    assert {"leakage-vs-size-age.png", "leakage-vs-size-labels.png", "transcript-ntee-2x2.tbt"} <= names


def test_sweep_and_transcript_do_not_mix(tmp_path, capsys):
    transcript = tmp_path / "run.tbt"
    transcript.write_bytes(b"x")
    assert main(["attack", *SMALL_FLAGS, "--sweep", "1x2,2x2", "--transcript", str(transcript), "--target", "age:2",
                 "--out", str(tmp_path)]) == 2
    assert "--transcript attacks one recorded run" in capsys.readouterr().err
    assert main(["attack", *SMALL_FLAGS, "--sweep", "1x2,two", "--target", "age:2", "--out", str(tmp_path)]) == 2
    assert "TREESxDEPTH" in capsys.readouterr().err


def test_plots_stay_legible_for_column_names_no_installed_font_draws(tmp_path):
    from teeboost.attack.report import _feature_label, file_slug, write_outputs

    text, _ = _feature_label("年龄", 0)
    assert "column 0" in text or text == "年龄"  # drawn with a font that has the glyphs, or by position
    assert file_slug("年龄", 0) == "年龄" and file_slug("a/b c", 1) == "a_b_c" and file_slug("///", 2) == "column2"
    report = {"protocol": "plain", "n_trees": 1, "max_depth": 1, "assumptions": ["x"],
              "results": [{"feature": "年龄", "order": "inferred", "method": "attack_approx", "tolerance": 1.0,
                           "accuracy": 0.5, "scored_rows": 10}],
              "recovery": {"年龄": {"source": "bin sums", "exact_share": 0.1, "spearman": 0.5}},
              "labels": [{"party": 0, "role": "active"}]}
    written = write_outputs([report], tmp_path)
    assert (tmp_path / "attack-plain-1x1-年龄.png") in written
    assert "年龄" in (tmp_path / "results.csv").read_text(encoding="utf-8")


def test_attack_refuses_a_non_passive_target(tmp_path, capsys):
    assert main(["attack", *SMALL_FLAGS, "--protocol", "plain", "--target", "DebtRatio:1", "--out", str(tmp_path)]) == 2
    assert "not a passive party's column" in capsys.readouterr().err


def test_a_sweep_resumes_from_its_transcripts_and_refuses_other_parameters(tmp_path, capsys):
    out = tmp_path / "sweep"
    base = ["attack", *SMALL_FLAGS, "--protocol", "plain", "--target", "age:2", "--n-trees", "2", "--out", str(out), "--json"]
    assert main(base) == 0
    first = json.loads(capsys.readouterr().out)["reports"][0]
    assert main(base + ["--reuse-transcripts"]) == 0
    again = json.loads(capsys.readouterr().out)["reports"][0]
    assert again["transcript_reused"] and not again["transcript_written"]
    assert again["results"] == first["results"]
    (out / "transcript-plain-3x3.tbt").write_bytes((out / "transcript-plain-2x3.tbt").read_bytes())
    assert main(["attack", *SMALL_FLAGS, "--protocol", "plain", "--target", "age:2", "--n-trees", "3", "--out", str(out),
                 "--reuse-transcripts"]) == 2
    assert "other parameters" in capsys.readouterr().err


def test_a_public_sample_holding_attacked_rows_is_refused(tmp_path, capsys):
    from teeboost.datasets import load_give_me_some_credit

    aux = tmp_path / "aux.csv"
    load_give_me_some_credit().head(500)[["id", "age", "MonthlyIncome"]].to_csv(aux, index=False)
    assert main(["attack", *SMALL_FLAGS, "--target", "age:2", "--aux", str(aux), "--out", str(tmp_path / "out")]) == 2
    assert "--aux shares" in capsys.readouterr().err


def test_audits_into_one_directory_keep_each_others_rows(tmp_path, capsys):
    out = tmp_path / "audit"
    for trees in ("1", "2"):
        assert main(["attack", *SMALL_FLAGS, "--target", "age:2", "--n-trees", trees, "--out", str(out), "--json"]) == 0
        capsys.readouterr()
    with open(out / "results.csv", encoding="utf-8") as handle:
        assert {row["n_trees"] for row in csv.DictReader(handle)} == {"1", "2"}


def test_held_out_rows_routed_for_early_stopping_are_attacked_and_scored_apart(tmp_path, small_credit):
    """Early stopping routes the validation rows through every tree: each answer puts a row on
    one side of a passive cut, so those rows, never trained on, leak their order too."""
    active, passives = small_credit
    params = BoostParams(n_trees=30, max_depth=5, early_stopping_rounds=100, subsample=0.8, max_bin=32)
    report = run_attack(active, passives, [AttackTarget("age", (2.0,))], params, "ntee",
                        options=ProtocolOptions(allow_simulated_tee=True), out_dir=tmp_path, validation_size=0.25)
    assert report["n_held_out_rows"] == 375 and report["n_attacked_rows"] == 1125
    held = [r for r in report["results"] if r["rows"] == "held-out"]
    assert held and {r["scored_rows"] for r in held} == {375}
    assert report["held_out_recovery"]["age"]["source"] == "routing answers"
    assert report["held_out_recovery"]["age"]["spearman"] > 0.9
    best = {r["method"]: r["accuracy"] for r in held}
    assert best["attack_approx"] > 2 * best["random_approx"]


def test_repeats_draw_new_splits_and_report_the_spread(tmp_path, capsys):
    out = tmp_path / "repeat"
    assert main(["attack", *SMALL_FLAGS, "--protocols", "plain", "--sweep", "1x2,2x2", "--repeat", "2", "--target", "age:2",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "over 2 seeds" in printed and "plain        2x2    age +-2:" in printed
    assert (out / "transcript-plain-2x2-seed1.tbt").is_file() and (out / "transcript-plain-2x2.tbt").is_file()
    with open(out / "results.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert {row["seed"] for row in rows} == {"0", "1"}
    first = {(r["n_trees"], r["method"]): r["accuracy"] for r in rows if r["seed"] == "0"}
    second = {(r["n_trees"], r["method"]): r["accuracy"] for r in rows if r["seed"] == "1"}
    assert first != second  # another split, another draw
    assert (out / "leakage-vs-size-age.png").is_file()


def test_audit_tables_merge_with_files_written_before_seeds_were_recorded(tmp_path):
    """An older results.csv without the seed column keeps its rows (as seed 0); the new
    audit's rows join them instead of replacing the file."""
    from teeboost.attack.report import _tables_as_reports, _write_csv

    path = tmp_path / "results.csv"
    path.write_text("protocol,n_trees,max_depth,feature,order,method,tolerance,accuracy,scored_rows\n"
                    "ntee,50,6,age,inferred,attack_approx,2.0,0.865,9999\n")
    fields = ["protocol", "n_trees", "max_depth", "seed", "rows", "feature", "order", "method", "tolerance",
              "accuracy", "scored_rows"]
    _write_csv(path, fields, [{"protocol": "strict", "n_trees": 50, "max_depth": 6, "seed": 0, "rows": "training",
                               "feature": "age", "order": "inferred", "method": "attack_approx", "tolerance": 2.0,
                               "accuracy": 0.087, "scored_rows": 9999}])
    merged = {r["protocol"]: r for r in _tables_as_reports(tmp_path)}
    assert set(merged) == {"ntee", "strict"}
    assert merged["ntee"]["results"][0]["accuracy"] == 0.865
