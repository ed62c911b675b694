"""Label inference by a passive party from what its host saw on the wire."""

import inspect
import json

import numpy as np
import pandas as pd
import pytest

from teeboost.attack.labels import choose_known_rows, infer_labels, label_attack, read_passive_view
from teeboost.attack.view import read_view
from teeboost.config import BoostParams, ProtocolOptions
from teeboost.data import split_columns
from teeboost.federation import train_local

TEE = ProtocolOptions(allow_simulated_tee=True)
# the seed paper's 1-TEE: rows and partitions reach passive parties in the clear, so the active
# transcript shows what they saw (bins-once, the default, seals the same to them from the enclave)
INDEX_SETS = ProtocolOptions(allow_simulated_tee=True, onetee_bins_once=False)
PARAMS = BoostParams(n_trees=4, max_depth=3, subsample=0.8, max_bin=32)


@pytest.fixture(scope="module")
def synthetic():
    """The label depends only on the active party's column; the passive party's are noise."""
    rng = np.random.default_rng(7)
    n = 2000
    risk = rng.normal(size=n)
    frame = pd.DataFrame({
        "risk": risk,
        "noise_a": rng.normal(size=n),
        "noise_b": rng.integers(0, 20, size=n).astype(float),
        "y": (risk + 0.5 * rng.normal(size=n) > 1.2).astype(int),
    })
    return split_columns(frame, [["noise_a", "noise_b"]], label="y")


@pytest.fixture(scope="module")
def transcripts(tmp_path_factory, synthetic):
    active, passives = synthetic
    out = {}
    for protocol in ("plain", "onetee", "ntee"):
        path = tmp_path_factory.mktemp(protocol) / "run.tbt"
        train_local(active, passives, PARAMS, protocol, options=INDEX_SETS if protocol == "onetee" else TEE,
                    transcript=path)
        out[protocol] = path
    return out


def known(n_rows, labels, seed=0, fraction=0.05):
    rng = np.random.default_rng(seed)
    rows = choose_known_rows(n_rows, rng, fraction)
    return rows, labels[rows], rng


def test_plain_gradients_name_every_label(transcripts, synthetic):
    active, passives = synthetic
    y = active.labels.astype(int)
    view = read_passive_view(transcripts["plain"], 1)
    assert view.protocol == "plain" and not view.opaque
    rows, labels, rng = known(view.n_rows, y)
    report = label_attack(view, passives[0].features, y, known_rows=rows, known_labels=labels, rng=rng)
    assert report["auc_transcript"] > 0.999 and report["auc_unsupervised"] > 0.999
    assert report["n_rows_with_clear_gradients"] > 0.99 * view.n_rows  # rows in at least one of 4 samples


def test_onetee_node_sets_rank_labels_better_than_own_features(transcripts, synthetic):
    active, passives = synthetic
    y = active.labels.astype(int)
    view = read_passive_view(transcripts["onetee"], 1)
    assert set(view.opaque) == {"MaskedGradients", "SealedMessage"} and view.node_sets() > 0
    rows, labels, rng = known(view.n_rows, y)
    report = label_attack(view, passives[0].features, y, known_rows=rows, known_labels=labels, rng=rng)
    assert report["auc_own_features"] < 0.65  # noise columns
    assert report["auc_transcript"] > report["auc_own_features"] + 0.2
    assert report["auc_unsupervised"] > 0.75


def test_onetee_view_replays_the_partitions_the_active_party_announced(transcripts):
    """Every node set the passive party reconstructs from the sample is the active party's own."""
    active_view = read_view(transcripts["onetee"])
    view = read_passive_view(transcripts["onetee"], 1)
    compared = 0
    for t, tree in view.trees.items():
        assert np.array_equal(tree.sample, active_view.trees[t].rows)
        for node, rows in tree.partition.items():
            truth = active_view.trees[t].node_rows.get(node)
            if truth is not None:  # the active party notes only the nodes it searched
                assert np.array_equal(rows, truth)
                compared += 1
    assert compared > len(view.trees)


def test_ntee_view_holds_only_what_routing_questions_reveal(transcripts):
    view = read_passive_view(transcripts["ntee"], 1)
    active_view = read_view(transcripts["ntee"])  # the auditor's check: samples from the active party's notes
    assert "SealedMessage" in view.opaque and "HistogramRequest" not in view.clear
    assert view.routing_questions > 0
    for t, tree in view.trees.items():
        assert tree.sample is None and not tree.partition and tree.g is None
        asked = [rows for _, rows, _ in tree.questions]
        asked = np.unique(np.concatenate(asked)) if asked else np.empty(0, dtype=np.int64)
        for node in tree.nodes():
            rows = tree.rows(node)
            assert np.isin(rows, asked).all()  # every row placed came from a routing question
            assert not np.isin(rows, active_view.trees[t].rows).any()  # and was outside the tree's sample


def test_inference_never_reads_the_labels_it_scores(transcripts, synthetic):
    active, passives = synthetic
    y = active.labels.astype(int)
    view = read_passive_view(transcripts["onetee"], 1)
    assert "truth" not in inspect.signature(infer_labels).parameters
    rows, labels, _ = known(view.n_rows, y)
    unknown = np.setdiff1d(np.arange(y.size), rows)
    shuffled = y.copy()
    shuffled[unknown] = np.random.default_rng(1).permutation(y[unknown])
    first = label_attack(view, passives[0].features, y, known_rows=rows, known_labels=labels,
                         rng=np.random.default_rng(3), with_scores=True)
    second = label_attack(view, passives[0].features, shuffled, known_rows=rows, known_labels=labels,
                          rng=np.random.default_rng(3), with_scores=True)
    for setting in ("transcript", "own_features", "combined", "unsupervised"):
        assert np.array_equal(getattr(first["scores"], setting), getattr(second["scores"], setting))
    assert first["auc_transcript"] != second["auc_transcript"]  # only the scoring saw the truth
    assert abs(second["auc_transcript"] - 0.5) < 0.1


def test_auditor_draws_known_rows_and_reports_json(transcripts, synthetic):
    """Without known_rows the auditor draws them; inference still gets only their labels."""
    active, passives = synthetic
    y = active.labels.astype(int)
    view = read_passive_view(transcripts["onetee"], 1)
    rows = choose_known_rows(view.n_rows, np.random.default_rng(5), 0.05)
    shuffled = y.copy()
    unknown = np.setdiff1d(np.arange(y.size), rows)
    shuffled[unknown] = np.random.default_rng(1).permutation(y[unknown])
    reports = [label_attack(view, passives[0].features, truth, known_share=0.05, rng=np.random.default_rng(5),
                            with_scores=True) for truth in (y, shuffled)]
    assert np.array_equal(reports[0]["scores"].known_rows, rows)
    assert np.array_equal(reports[0]["scores"].combined, reports[1]["scores"].combined)
    report = label_attack(view, passives[0].features, y, known_share=0.05, rng=np.random.default_rng(5))
    assert json.loads(json.dumps(report))["n_known"] == rows.size
    assert label_attack(view, passives[0].features, np.arange(y.size) % 3, rng=np.random.default_rng(0))[
        "auc_transcript"] is None  # not binary: nothing to score


def test_secureboost_view_matches_onetee(tmp_path, synthetic):
    """Same trees, same clear announcements: the passive host's node sets do not depend on whether
    the gradients were encrypted or masked."""
    active, passives = synthetic
    params = BoostParams(n_trees=2, max_depth=2, subsample=0.8, max_bin=32)
    views = {}
    for protocol, options in (("secureboost", ProtocolOptions(scheme="ou", key_bits=1024, insecure_key_bits=True,
                                                              crypto_workers=1)),
                              ("onetee", INDEX_SETS)):
        path = tmp_path / f"{protocol}.tbt"
        train_local(active, passives, params, protocol, options=options, transcript=path)
        views[protocol] = read_passive_view(path, 1)
    sb, one = views["secureboost"], views["onetee"]
    assert set(sb.opaque) == {"EncryptedGradients"}
    assert sb.trees.keys() == one.trees.keys()
    for t in sb.trees:
        assert sb.trees[t].nodes() == one.trees[t].nodes()
        for node in sb.trees[t].nodes():
            assert np.array_equal(sb.trees[t].rows(node), one.trees[t].rows(node))
