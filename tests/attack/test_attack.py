"""The leakage-abuse attack: exact where the transcript determines bins, blind where it cannot."""

import json

import numpy as np
import pandas as pd
import pytest

from teeboost.attack.guessing import accuracy_by_tolerance, approximate_deciles, guess
from teeboost.attack.order import infer_bins, recovery
from teeboost.attack.view import read_view
from teeboost.cli import main
from teeboost.config import BoostParams, ProtocolOptions
from teeboost.core.binning import fit_bins
from teeboost.data import split_columns
from teeboost.federation import train_local


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
    params = BoostParams(objective="regression", n_trees=1, max_depth=1, subsample=1.0, min_child_weight=0.0)
    posterior, bins, values = attack_tiny(tmp_path, frame, "y", params)
    assert posterior.determined().all()
    assert posterior.probabilities.argmax(axis=1).tolist() == bins.tolist() == [2, 0, 1]
    stats = recovery(posterior, bins, values)
    assert stats["exact_share"] == 1.0 and stats["mean_abs_bin_error"] == 0 and stats["spearman"] == pytest.approx(1)


def test_exchangeable_samples_cannot_be_told_apart(tmp_path):
    """Same label, same node, same gradients: the sums say how many are in each bin, not which."""
    frame = pd.DataFrame({"own": [1.0, 2.0, 3.0, 4.0], "secret": [10.0, 20.0, 10.0, 20.0], "y": [0, 0, 1, 1]})
    params = BoostParams(n_trees=1, max_depth=1, subsample=1.0, min_child_weight=0.0, min_samples_leaf=2)
    posterior, bins, values = attack_tiny(tmp_path, frame, "y", params)
    assert not posterior.determined().any()
    assert np.allclose(posterior.probabilities[:, :2], 0.5)  # each sample: either bin, equally likely
    assert recovery(posterior, bins, values)["exact_share"] == 0.0


@pytest.mark.parametrize("protocol", ["ntee", "onetee"])
def test_tee_transcripts_leave_nothing_to_infer(tmp_path, small_credit, protocol):
    active, passives = small_credit
    path = tmp_path / "run.tbt"
    train_local(active, passives, BoostParams(n_trees=2), protocol, transcript=path,
                options=ProtocolOptions(allow_simulated_tee=True))
    view = read_view(path)
    assert not view.histograms and all(s.feature == -1 for s in view.splits)
    posterior = infer_bins(view, party=1, feature=0)  # age
    assert posterior.constraints == 0 and posterior.split_constraints == 0
    assert np.allclose(posterior.probabilities, posterior.probabilities[0])  # uniform: nothing learnt


def test_plain_transcript_orders_samples(tmp_path, small_credit):
    active, passives = small_credit
    path = tmp_path / "run.tbt"
    train_local(active, passives, BoostParams(n_trees=5), transcript=path)
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
    code = main(["attack", "--protocol", "plain", "--target", "age:1,2", "--target", "MonthlyIncome:500,1000",
                 "--n-trees", "2", "--out", str(out), "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert {"results", "recovery"} <= set(report)
    methods = {(r["order"], r["method"]) for r in report["results"]}
    assert ("inferred", "attack_approx") in methods and ("true", "attack_approx") in methods
    assert set(report["results"][0]) == {"feature", "order", "method", "tolerance", "accuracy"}
    assert set(report["recovery"]["age"]) >= {"exact_share", "mean_abs_bin_error", "spearman"}
    assert (out / "results.csv").is_file() and (out / "attack-plain-age.png").is_file()


def test_attack_refuses_a_non_passive_target(tmp_path, capsys):
    assert main(["attack", "--protocol", "plain", "--target", "DebtRatio:1", "--out", str(tmp_path)]) == 2
    assert "not a passive party's column" in capsys.readouterr().err
