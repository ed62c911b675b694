"""``teeboost predict`` with rows a passive party does not hold: never scored as if their
values were missing, never dropped silently. Empty with a reason by default, refused with
``--on-unmatched error``, or scored by a named active-only model with ``fallback`` (flagged,
and equal to that model's own prediction)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from teeboost import PartyData, VerticalBoostClassifier
from teeboost.datasets import GIVE_ME_SOME_CREDIT_PASSIVE, load_give_me_some_credit

from .helpers import SMALL_FLAGS


def cli(*args):
    return subprocess.run([sys.executable, "-m", "teeboost.cli", *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("unmatched")
    frame = load_give_me_some_credit().head(3000)
    active = frame.drop(columns=GIVE_ME_SOME_CREDIT_PASSIVE)
    passive = frame[["id", *GIVE_ME_SOME_CREDIT_PASSIVE]]
    active.to_csv(tmp / "active.csv", index=False)
    passive.to_csv(tmp / "passive.csv", index=False)
    done = cli("train", *SMALL_FLAGS, "--active-data", str(tmp / "active.csv"), "--passive-data", str(tmp / "passive.csv"),
               "--id", "id", "--label", "SeriousDlqin2yrs", "--n-estimators", "5", "--max-depth", "3", "--model-dir",
               str(tmp / "model"))
    assert done.returncode == 0, done.stderr
    VerticalBoostClassifier(n_estimators=5, max_depth=3, subsample=0.8, max_bin=32).fit(
        PartyData.from_frame(active, id_column="id", label="SeriousDlqin2yrs"), []).save(tmp / "fallback")
    new = active.head(40).drop(columns=["SeriousDlqin2yrs"])
    new.to_csv(tmp / "new-active.csv", index=False)
    passive.head(40).iloc[5:].to_csv(tmp / "new-passive.csv", index=False)  # the first 5 customers: not held
    return tmp


def predict(tmp, *extra):
    out = tmp / f"out-{len(extra)}-{abs(hash(extra))}.csv"
    done = cli("predict", "--model-dir", str(tmp / "model"), "--active-data", str(tmp / "new-active.csv"),
               "--passive-data", str(tmp / "new-passive.csv"), "--output", str(out), *extra)
    return done, out


def test_unheld_customers_are_written_empty_with_the_reason(models):
    done, out = predict(models)
    assert done.returncode == 0, done.stderr
    frame = pd.read_csv(out, dtype={"id": str})
    assert len(frame) == 40  # every input row, none dropped
    assert frame["probability_1"].isna().tolist() == [True] * 5 + [False] * 35
    assert all("does not hold this id" in r for r in frame["reason"].head(5))
    assert (frame["scored_by"].iloc[5:].str.startswith("model@")).all()


def test_error_refuses_the_batch_naming_the_rows(models):
    done, out = predict(models, "--on-unmatched", "error")
    assert done.returncode != 0 and "5 of 40 row(s) cannot be scored" in done.stderr and not out.exists()


def test_fallback_scores_them_with_the_active_only_model_flagged(models):
    done, out = predict(models, "--on-unmatched", "fallback", "--fallback-model", str(models / "fallback"))
    assert done.returncode == 0, done.stderr
    frame = pd.read_csv(out, dtype={"id": str})
    assert frame["probability_1"].notna().all()
    assert frame["scored_by"].head(5).str.startswith("fallback@").all()
    assert frame["scored_by"].iloc[5:].str.startswith("model@").all()
    alone = models / "alone.csv"
    done = cli("predict", "--model-dir", str(models / "fallback"), "--data", str(models / "new-active.csv"),
               "--output", str(alone))
    assert done.returncode == 0, done.stderr
    expected = pd.read_csv(alone, dtype={"id": str})["probability_1"].head(5).to_numpy()
    np.testing.assert_allclose(frame["probability_1"].head(5).to_numpy(), expected, rtol=0, atol=1e-12)


def test_fallback_without_a_model_is_refused_by_name(models):
    done, _ = predict(models, "--on-unmatched", "fallback")
    assert done.returncode != 0 and "--fallback-model" in done.stderr
