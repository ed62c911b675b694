"""The crafted-columns label attack of a malicious passive host, measured from files on disk.

The passive host appends crafted columns to its own data, a run trains (in process, plain:
today every protocol hands a passive party its split records in the clear), the model is
saved, and the attack reads only the files the passive host holds afterwards. Positive
controls: with those records readable the attack beats the party's own columns by a wide
margin. Negative control: a directory of opaque blobs yields no record and the baseline's
scores, unchanged. Nothing here depends on how records are sealed.

Scale: 3,000 rows of the bundled Give Me Some Credit sample. Missing copies: 120 targets
(copies of ``age``) drawn as 30 rows of label 1 and 90 of label 0, so that the AUC rests on
enough positives to be measured (the attacker never sees that draw; more positive targets
only make the copies compete harder), 20 trees of depth 5, ``min_samples_leaf`` k = 20 (the
deployed passive party's default floor: it does not stop the attack, a missing row picks
its side alone).
Category groups: 570 targets in groups of 10 (the category floor), 40 columns, 50 trees of
depth 2, ``max_bin`` 64, k = 1. Copies missing at groups of 10: 300 random targets, 300
copies, 20 trees of depth 5, k = 1: what records say once readable (after the label owner's
consent, in strict mode; always, in the other protocols). Strict mode's near-duplicate
refusal stops one-row copies, not copies missing at groups of at least max(k, 10) rows
(``tests/core/test_near_duplicates.py``); what a strict passive host reads without consent
is measured through real processes in ``tests/integration/test_passive_host_label_attack.py``.
"""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

from teeboost.attack.crafted_columns import (
    MISSING, attack_report, craft_category_columns, craft_missing_copies, known_label_rows, own_column_baseline,
    score_targets, target_auc,
)
from teeboost.attack.host_view import FoundRecord, read_passive_host_view
from teeboost.config import BoostParams
from teeboost.data import PartyData
from teeboost.datasets import GIVE_ME_SOME_CREDIT_ID, GIVE_ME_SOME_CREDIT_LABEL, GIVE_ME_SOME_CREDIT_PASSIVE
from teeboost.federation import train_local

N = 3000
ID = GIVE_ME_SOME_CREDIT_ID
MISSING_PARAMS = BoostParams(n_trees=20, max_depth=5, min_samples_leaf=20, category_subsets=False, subsample=0.8, max_bin=32)


@pytest.fixture(scope="module")
def parties(credit_frame):
    """The first N rows as the two organisations hold them: the passive party's own frame
    (id + its five columns), the active party's frame, and the truth."""
    frame = credit_frame.head(N).reset_index(drop=True)
    own = frame[[GIVE_ME_SOME_CREDIT_ID, *GIVE_ME_SOME_CREDIT_PASSIVE]]
    active = frame[[c for c in frame.columns if c not in GIVE_ME_SOME_CREDIT_PASSIVE]]
    return own, active, frame[GIVE_ME_SOME_CREDIT_LABEL].to_numpy()


def train_and_save(active_frame, passive_frame, params, tmp_path, categorical=()):
    """Train in process and save as a run does (model directory, and the checkpoint
    directory the run leaves behind); returns the files among them that are the passive
    host's own: its model file and its checkpoint (the active party's stay out of reach)."""
    active = PartyData.from_frame(active_frame, id_column=GIVE_ME_SOME_CREDIT_ID, label=GIVE_ME_SOME_CREDIT_LABEL,
                                  name="active", require_label=True)
    passive = PartyData.from_frame(passive_frame, id_column=GIVE_ME_SOME_CREDIT_ID, name="passive-1",
                                   categorical=list(categorical))
    model, _ = train_local(active, [passive], params, checkpoint_dir=tmp_path / "checkpoint")
    model.save(tmp_path / "model")
    host = [tmp_path / "model" / "passive-1.json", tmp_path / "checkpoint" / "passive-1.ckpt"]
    return [path for path in host if path.exists()]


def evaluation_targets(labels, seed, positives=30, negatives=90):
    rng = np.random.default_rng(seed)
    return rng.permutation(np.concatenate([rng.choice(np.flatnonzero(labels == 1), positives, replace=False),
                                           rng.choice(np.flatnonzero(labels == 0), negatives, replace=False)]))


def own_columns(own):
    return own.drop(columns=[GIVE_ME_SOME_CREDIT_ID])


# ---------------------------------------------------------------- crafting

def test_missing_copies_are_the_column_with_one_hole_each(parties):
    own, _, _ = parties
    ids = own[GIVE_ME_SOME_CREDIT_ID].to_numpy()[[5, 17, 400]]
    frame, crafted = craft_missing_copies(own, "age", list(ids), id_column=ID)
    assert list(crafted.targets) == [5, 17, 400]
    assert crafted.names == ["age_0", "age_1", "age_2"] and list(frame.columns[-3:]) == crafted.names
    age = own["age"].to_numpy(dtype=float)
    for name, row in zip(crafted.names, crafted.targets):
        copy = frame[name].to_numpy()
        assert np.isnan(copy[row]) and np.isnan(copy).sum() == 1
        assert np.array_equal(np.delete(copy, row), np.delete(age, row))
        assert list(crafted.columns[name][MISSING]) == [row]
    assert crafted.feature_names == tuple(c for c in frame.columns if c != GIVE_ME_SOME_CREDIT_ID)
    with pytest.raises(ValueError, match="already have no"):
        craft_missing_copies(own, "MonthlyIncome", [int(np.flatnonzero(own["MonthlyIncome"].isna())[0])], id_column=ID)
    _, by_position = craft_missing_copies(own, "age", [5, 17, 400], id_column=ID)
    assert list(by_position.targets) == [5, 17, 400] and by_position.feature_names == crafted.feature_names


def test_category_columns_give_each_group_its_own_category(parties):
    own, _, _ = parties
    targets = np.arange(100, 1300, 3)  # 400 rows, 40 groups
    frame, crafted = craft_category_columns(own, targets, group_size=10, n_columns=5, max_bin=64, id_column=ID)
    assert len(crafted.names) == 5
    for name in crafted.names:
        column = frame[name].to_numpy()
        marks = crafted.columns[name]
        assert len(marks) == 40 and all(rows.size == 10 for rows in marks.values())
        covered = np.concatenate(list(marks.values()))
        assert np.array_equal(np.sort(covered), targets)  # every target, once per column
        for category, rows in marks.items():
            assert set(np.flatnonzero(column == category)) == set(rows.tolist())
        assert set(np.delete(column, targets)) <= {"c0", "c1", "c2", "c3"}
        assert set(crafted.vocabularies[name].names) == set(marks) | {"c0", "c1", "c2", "c3"}
    first, second = (crafted.columns[n]["t000"] for n in crafted.names[:2])
    assert not np.array_equal(first, second)  # regrouped in every column
    _, small = craft_category_columns(own, targets, group_size=10, n_columns=1, max_bin=32, id_column=ID)
    assert len(small.columns["segment_0"]) == 28  # 32 bins - 4 common categories: 12 groups left out


# ---------------------------------------------------------------- reading the host's files

def test_reader_finds_records_wherever_the_host_keeps_them(tmp_path):
    features = ["age", "age_0", "age_1"]
    record = {"id": 7, "feature": 1, "threshold": 41.5, "missing_left": True, "tree": 2}
    model = {"format": "teeboost-model", "role": "passive", "features": features,
             "nested": {"deeper": [{"records": [record, {**record, "feature": 2, "tree": 3}]}]}}
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "passive-1.json").write_text(json.dumps(model))
    checkpoint = io.BytesIO()  # a checkpoint: npz whose __meta__ is JSON bytes, records by index only
    np.savez(checkpoint, __meta__=np.frombuffer(json.dumps({"records": [record]}).encode(), dtype=np.uint8))
    (tmp_path / "passive-1.ckpt").write_bytes(checkpoint.getvalue())
    audit = [{"event": "finish", "detail": json.dumps({"records": [{**record, "feature": "age_1", "tree": 9}]})},
             {"event": "hello", "sealed": "QUJD" * 100}]
    (tmp_path / "audit.jsonl").write_text("\n".join(json.dumps(a) for a in audit) + "\n")
    (tmp_path / "passive.log").write_text("tree 4: split age_0 <= 39.0 missing right tree 4\nnothing else\n"
                                          "SplitRecord(feature=2, threshold=50.0, missing_left=False, tree=5)\n")
    (tmp_path / "blob.bin").write_bytes(bytes(range(256)) * 8)
    view = read_passive_host_view([tmp_path], feature_names=features, names=["age_0", "age_1"])
    found = sorted((r.feature, r.tree, r.missing_left, r.threshold) for r in view.records)
    assert found == [("age_0", 2, True, 41.5), ("age_0", 4, False, 39.0), ("age_1", 3, True, 41.5),
                     ("age_1", 5, False, 50.0), ("age_1", 9, True, 41.5)]  # the checkpoint's copy counted once
    kinds = {f.path.rsplit("/", 1)[-1]: f.kind for f in view.files}
    assert kinds["passive-1.json"] == "json" and kinds["audit.jsonl"] == "jsonl" and kinds["passive.log"] == "text"
    assert kinds["blob.bin"] == "opaque" and any(k.endswith("__meta__.npy") for k in kinds)
    assert sum(f.opaque_blobs for f in view.files) == 1 and view.unreadable[-1].endswith("blob.bin")


def test_an_opaque_view_finds_nothing_and_the_score_is_the_baseline(parties, tmp_path):
    """Whatever the host holds, if it is sealed the attack is the baseline, to the bit."""
    own, _, labels = parties
    rng = np.random.default_rng(3)
    targets = rng.choice(N, 150, replace=False)
    _, crafted = craft_missing_copies(own, "age", targets, id_column=ID)
    model = tmp_path / "model-passive-1"
    model.mkdir()
    (model / "passive-1.json").write_text(json.dumps({
        "format": "teeboost-model", "role": "passive", "features": list(crafted.feature_names), "records": [],
        "sealed_records": __import__("base64").b64encode(rng.bytes(4000)).decode()}))
    (model / "sealed.bin").write_bytes(rng.bytes(5000))
    with zipfile.ZipFile(tmp_path / "passive-1.ckpt", "w") as archive:
        archive.writestr("state.bin", rng.bytes(3000))
    (tmp_path / "audit-passive-1.jsonl").write_text(json.dumps({"event": "finish", "records": "sealed"}) + "\n")
    view = read_passive_host_view([model, tmp_path / "passive-1.ckpt", tmp_path / "audit-passive-1.jsonl"],
                                  names=crafted.names)
    assert view.records == []
    assert len(view.files) == 5 and len(view.unreadable) == 2  # model json, blob, zip + member, audit log
    assert len(view.files_read) == 4
    known = known_label_rows(labels, crafted.targets)
    result = score_targets(view.records, crafted, own_columns(own), known_rows=known, known_labels=labels[known])
    baseline = own_column_baseline(own_columns(own), known, labels[known])
    assert np.array_equal(result.scores, baseline[crafted.targets]) and result.records_on_crafted == 0
    report = attack_report(view, crafted, own_columns(own), labels, known)
    assert report.auc_attack == report.auc_baseline and report.records_found == 0


# ---------------------------------------------------------------- the attack, records readable

@pytest.mark.parametrize("seed", [1, 2])
def test_missing_copies_beat_the_own_columns_when_records_are_readable(parties, tmp_path, seed):
    own, active, labels = parties
    passive, crafted = craft_missing_copies(own, "age", evaluation_targets(labels, seed), id_column=ID)
    paths = train_and_save(active, passive, MISSING_PARAMS, tmp_path)
    view = read_passive_host_view(paths, feature_names=crafted.feature_names, names=crafted.names)
    assert any(p.endswith("passive-1.json") for p in view.files_read)
    assert any("passive-1.ckpt!" in f.path for f in view.files)  # its checkpoint, an npz, read member by member
    known = known_label_rows(labels, crafted.targets, seed=seed)
    report = attack_report(view, crafted, own_columns(own), labels, known)
    assert report.records_on_crafted >= 20, report.lines()
    # over 12 draws: attack 0.82-0.94, baseline 0.43-0.68, ceiling 0.54-0.74, margins >= 0.13
    assert report.auc_attack >= 0.8, report.lines()
    assert report.auc_attack >= report.auc_baseline + 0.15, report.lines()
    assert report.auc_attack >= report.auc_ceiling + 0.12, report.lines()


def test_copies_missing_at_groups_of_targets_still_leak(parties, tmp_path):
    """Copies missing at a group of 10 targets each (300 random targets, 300 copies, groups
    drawn anew and at most 5 rows in common): a missing group still picks its side alone, so
    the copies a label-1 row sits in win more often."""
    own, active, labels = parties
    targets = np.random.default_rng(0).choice(N, 300, replace=False)
    passive, crafted = craft_missing_copies(own, "age", targets, id_column=ID, group_size=10)
    assert all(rows.size == 10 for marks in crafted.columns.values() for rows in marks.values())
    paths = train_and_save(active, passive, BoostParams(n_trees=20, max_depth=5, subsample=0.8, max_bin=32), tmp_path)
    view = read_passive_host_view(paths, feature_names=crafted.feature_names, names=crafted.names)
    report = attack_report(view, crafted, own_columns(own), labels, known_label_rows(labels, crafted.targets))
    assert report.auc_attack >= 0.8, report.lines()
    assert report.auc_attack >= max(report.auc_baseline, report.auc_ceiling) + 0.12, report.lines()


def test_the_active_partys_files_name_no_target(parties, tmp_path):
    """The label owner's model file and checkpoint hold only its own records (the checkpoint's
    by feature index alone, which must not be read as the passive party's columns): the
    attack needs the passive host's files, and scores the baseline without them."""
    own, active, labels = parties
    passive, crafted = craft_missing_copies(own, "age", evaluation_targets(labels, 1), id_column=ID)
    train_and_save(active, passive, MISSING_PARAMS, tmp_path)
    view = read_passive_host_view([tmp_path / "model" / "active.json", tmp_path / "checkpoint" / "active.ckpt"],
                                  feature_names=crafted.feature_names, names=crafted.names)
    assert len(view.records) > 20 and all(r.active for r in view.records)
    known = known_label_rows(labels, crafted.targets)
    result = score_targets(view.records, crafted, own_columns(own), known_rows=known, known_labels=labels[known])
    assert result.records_on_crafted == 0 and np.array_equal(result.scores, result.baseline)


@pytest.mark.parametrize("category_subsets", [True, False])
def test_category_groups_leak_through_gradient_sorted_masks_only(parties, tmp_path, category_subsets):
    own, active, labels = parties
    targets = np.random.default_rng(11).choice(N, 570, replace=False)
    passive, crafted = craft_category_columns(own, targets, group_size=10, n_columns=40, max_bin=64, seed=11,
                                              id_column=ID)
    params = BoostParams(n_trees=50, max_depth=2, max_bin=64, category_subsets=category_subsets, subsample=0.8)
    paths = train_and_save(active, passive, params, tmp_path, categorical=crafted.names)
    view = read_passive_host_view(paths, feature_names=crafted.feature_names, names=crafted.names)
    known = known_label_rows(labels, crafted.targets)
    report = attack_report(view, crafted, own_columns(own), labels, known)
    assert report.records_on_crafted >= 20, report.lines()
    if category_subsets:
        assert report.auc_attack >= 0.85 and report.auc_attack >= report.auc_ceiling + 0.15, report.lines()
    else:  # a mask is a prefix in the owner's own code order: no more than a threshold
        assert report.auc_attack <= 0.65, report.lines()


def test_target_auc_counts_ties_half():
    assert target_auc(np.array([1, 2, 3, 4]), np.array([0, 0, 1, 1])) == 1.0
    assert target_auc(np.array([1, 1, 1, 1]), np.array([0, 1, 0, 1])) == 0.5
    assert np.isnan(target_auc(np.array([1, 2]), np.array([1, 1])))
    assert target_auc(np.array([1, 9, 2, 3]), np.array([0, -1, 1, 1])) == 1.0  # unknown labels left out
    record = FoundRecord("age_0", None, 1.0, True, 0)
    assert record.key() == ("age_0", 1.0, True, 0, None, False)
