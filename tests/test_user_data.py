"""The data users bring, as they bring it: each test repeats a new user's step that used to
fail or, worse, silently train on the wrong thing."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb
from sklearn.datasets import load_iris

from teeboost import VerticalBoostClassifier, VerticalBoostRegressor
from teeboost.cli import main
from teeboost.config import BoostParams
from teeboost.data import DataWarning, PartyData, split_columns
from teeboost.datasets import DIAMONDS_LABEL, DIAMONDS_PASSIVE, load_diamonds
from teeboost.errors import DataError
from teeboost.estimator import party_features
from teeboost.federation import train_local
from teeboost.row_matching import train_test_rows

from .helpers import SMALL_ESTIMATOR, SMALL_FLAGS


def train(tmp_path, capsys, *argv):
    code = main(["train", *SMALL_FLAGS, "--json", "--n-trees", "3", "--model-dir", str(tmp_path / "model"), *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def iris_files(tmp_path, shuffle_passive=True, text_ids=False):
    """Two organisations' files of iris, both with an ``id`` column, the passive rows shuffled."""
    data = load_iris(as_frame=True).frame
    data.insert(0, "id", [f"flower-{i}" for i in range(len(data))] if text_ids else range(1000, 1000 + len(data)))
    active = data[["id", "sepal length (cm)", "sepal width (cm)", "target"]]
    passive = data[["id", "petal length (cm)", "petal width (cm)"]]
    if shuffle_passive:
        passive = passive.sample(frac=1.0, random_state=1)
    a, p = tmp_path / "active.csv", tmp_path / "passive.csv"
    active.to_csv(a, index=False)
    passive.to_csv(p, index=False)
    return a, p


def test_forgotten_id_is_refused_instead_of_matching_rows_by_position(tmp_path, capsys):
    a, p = iris_files(tmp_path)
    code, _, err = train(tmp_path, capsys, "--active-data", str(a), "--passive-data", str(p), "--label", "target")
    assert code == 2 and "column 'id' is also in the active party's data" in err and "--id id" in err
    code, out, _ = train(tmp_path, capsys, "--active-data", str(a), "--passive-data", str(p), "--label", "target",
                         "--id", "id")
    report = json.loads(out)
    assert code == 0 and report["objective"] == "multiclass" and report["value"] > 0.85
    assert "id" not in report["parties"]["active"] and "id" not in report["parties"]["passive-1"]
    a, p = iris_files(tmp_path, text_ids=True)  # text ids would have become a category: refused too
    code, _, err = train(tmp_path, capsys, "--active-data", str(a), "--passive-data", str(p), "--label", "target")
    assert code == 2 and "column 'id' has 150 distinct text values" in err and "--id id" in err


def test_position_alignment_only_when_stated(tmp_path, capsys):
    a, p = iris_files(tmp_path, shuffle_passive=False)
    args = ["--active-data", str(a), "--passive-data", str(p), "--label", "target", "--align", "position"]
    code, _, err = train(tmp_path, capsys, *args)  # stated, but 'id' would be a feature of both parties
    assert code == 2 and "'id' is held by party 'active'" in err and "party 'passive-1'" in err
    pd.read_csv(a).drop(columns=["id"]).to_csv(a, index=False)
    pd.read_csv(p).drop(columns=["id"]).to_csv(p, index=False)
    code, out, err = train(tmp_path, capsys, *args)
    assert code == 0 and json.loads(out)["value"] > 0.85, err
    code, out, err = train(tmp_path, capsys, *args[:-2])  # no ids and no shared column: by position anyway
    assert code == 0, err


def test_same_column_at_two_parties_is_refused_naming_both(tmp_path, capsys):
    a, p = iris_files(tmp_path)
    frame = pd.read_csv(p)
    frame["sepal length (cm)"] = 1.0 + np.arange(len(frame)) % 7
    frame.to_csv(p, index=False)
    code, _, err = train(tmp_path, capsys, "--active-data", str(a), "--passive-data", str(p), "--label", "target",
                         "--id", "id")
    assert code == 2 and "'sepal length (cm)' is held by party 'active'" in err and "party 'passive-1'" in err


def test_different_id_sets_are_intersected_and_the_count_printed(tmp_path, capsys):
    a, p = iris_files(tmp_path)
    frame = pd.read_csv(p)
    frame.iloc[:20].to_csv(tmp_path / "dropped.csv", index=False)
    frame.iloc[20:].assign(id=lambda f: f["id"]).to_csv(p, index=False)
    extra = pd.DataFrame({"id": ["stranger-1", "stranger-2"], "petal length (cm)": [1.0, 2.0],
                          "petal width (cm)": [0.1, 0.2]})
    pd.concat([pd.read_csv(p), extra]).to_csv(p, index=False)
    code, out, err = train(tmp_path, capsys, "--active-data", str(a), "--passive-data", str(p), "--label", "target",
                           "--id", "id")
    assert code == 0, err
    assert "130 rows have ids held by every party" in err and "passive-1: 130 of 132" in err
    assert json.loads(out)["n_samples"] + json.loads(out)["n_test"] == 130
    code, _, err = train(tmp_path, capsys, "--active-data", str(a), "--passive-data", str(p), "--label", "target",
                         "--id", "id", "--align", "id")
    assert code == 2 and "ids do not match" in err


def test_string_categories_constant_empty_and_one_value_columns(tmp_path, capsys):
    rng = np.random.default_rng(0)
    n = 400
    city = rng.choice(["München", "Köln", "Berlin"], n)
    frame = pd.DataFrame({"id": range(n), "city": city, "x": rng.normal(size=n), "constant": 7,
                          "empty": np.nan, "flag": np.where(rng.random(n) < 0.5, 1.0, np.nan),
                          "y": ((city == "München") ^ (rng.random(n) < 0.1)).astype(int)})
    frame["flag"] = np.where(frame["y"] == 1, 1.0, np.nan)  # one value plus missing cells: still a signal
    path = tmp_path / "joined.csv"
    frame.to_csv(path, index=False)
    code, out, err = train(tmp_path, capsys, "--data", str(path), "--label", "y", "--id", "id",
                           "--passive-columns", "city,constant,empty")
    assert code == 0, err
    assert err.count("dropped columns") == 1 and "'constant' (constant 7)" in err and "'empty' (every value missing)" in err
    report = json.loads(out)
    assert report["parties"]["passive-1"] == ["city"] and "flag" in report["parties"]["active"]
    assert report["value"] > 0.95
    model = json.loads((tmp_path / "model" / "passive-1.json").read_text())
    assert model["features"] == ["city"] and set(model["categories"]["city"]["categories"]) == {"München", "Köln", "Berlin"}
    new = frame.head(5).drop(columns=["y"])
    new.loc[0, "city"] = "Hamburg"  # unseen
    new.to_csv(tmp_path / "new.csv", index=False)
    code = main(["predict", "--model-dir", str(tmp_path / "model"), "--data", str(tmp_path / "new.csv"),
                 "--output", str(tmp_path / "p.csv")])
    assert code == 0 and len(pd.read_csv(tmp_path / "p.csv")) == 5


@pytest.mark.parametrize("sep", [";", "\t", "|"])
def test_separator_is_sniffed_or_given(tmp_path, capsys, sep):
    data = load_iris(as_frame=True).frame
    data["target"] = (data["target"] == 0).astype(int)
    data.insert(0, "id", range(len(data)))
    data["sepal length (cm)"] = data["sepal length (cm)"].map(lambda v: f"{v}")
    path = tmp_path / "joined.csv"
    data.to_csv(path, index=False, sep=sep)
    args = ["--data", str(path), "--label", "target", "--id", "id", "--passive-columns", "petal length (cm)"]
    code, out, err = train(tmp_path, capsys, *args)
    assert code == 0, err
    code, out, err = train(tmp_path, capsys, *args, "--sep", sep)
    assert code == 0, err
    for extra in ([], ["--sep", sep]):  # and prediction reads the same file
        assert main(["predict", "--model-dir", str(tmp_path / "model"), "--data", str(path),
                     "--output", str(tmp_path / "p.csv"), *extra]) == 0
        assert len(pd.read_csv(tmp_path / "p.csv")) == len(data)


def test_wrong_separator_is_named(tmp_path, capsys):
    path = tmp_path / "joined.csv"
    path.write_text("id;x;y\n1;2;0\n2;3;1\n")
    code, _, err = train(tmp_path, capsys, "--data", str(path), "--label", "y", "--passive-columns", "x", "--sep", ",")
    assert code == 2 and "give --sep ';'" in err


def test_dates_are_refused_with_a_hint(tmp_path, capsys):
    frame = pd.DataFrame({"id": range(50), "opened": pd.date_range("2024-01-01", periods=50).strftime("%Y-%m-%d"),
                          "x": np.arange(50) % 7, "y": np.arange(50) % 2})
    path = tmp_path / "joined.csv"
    frame.to_csv(path, index=False)
    code, _, err = train(tmp_path, capsys, "--data", str(path), "--label", "y", "--id", "id", "--passive-columns", "x")
    assert code == 2 and "'opened' holds dates" in err and "convert it to a number" in err
    with pytest.raises(DataError, match="holds dates or times"):
        PartyData.from_frame(pd.DataFrame({"when": pd.date_range("2024-01-01", periods=3), "x": [1, 2, 3]}))


def test_numbers_with_a_stray_word_are_refused_not_made_categories():
    frame = pd.DataFrame({"income": [str(1000 + i) for i in range(99)] + ["n/a?"]})
    with pytest.raises(DataError, match="holds numbers but also non-numeric value 'n/a\\?' in data row 100"):
        PartyData.from_frame(frame)
    assert PartyData.from_frame(frame, categorical=["income"]).vocabularies["income"].n_codes == 62


def test_identifier_like_text_is_refused():
    frame = pd.DataFrame({"name": [f"customer {i}" for i in range(200)], "x": range(200)})
    with pytest.raises(DataError, match="looks like an identifier"):
        PartyData.from_frame(frame)


def test_single_row_is_scored_from_python():
    frame = load_iris(as_frame=True).frame
    frame["target"] = (frame["target"] == 1).astype(int)
    active, passives = split_columns(frame, [["petal length (cm)", "petal width (cm)"]], label="target")
    model = VerticalBoostClassifier(n_trees=3, max_depth=3, subsample=0.8, max_bin=32).fit(active, passives)
    one_active, one_passives = split_columns(frame.head(1), [["petal length (cm)", "petal width (cm)"]], label="target")
    proba = model.predict_proba(one_active, one_passives)
    assert proba.shape == (1, 2) and np.allclose(proba, model.predict_proba(active, passives)[:1])


def test_objective_inference_keeps_bucketed_targets_regression():
    rng = np.random.default_rng(0)
    x = rng.normal(size=600)
    frame = pd.DataFrame({"x": x, "z": rng.normal(size=600), "amount": np.clip(np.round(x * 2 + 5), 1, 10) * 100})
    active, passives = split_columns(frame, [["z"]], label="amount")
    model, _ = train_local(active, passives, BoostParams(n_trees=2, max_depth=3, subsample=0.8, max_bin=32))
    assert model.active.ensemble.objective == "regression"  # 10 bucket values, not 10 classes
    codes = frame.assign(amount=(x > 0).astype(int) + (x > 1).astype(int))
    active, passives = split_columns(codes, [["z"]], label="amount")
    model, _ = train_local(active, passives, BoostParams(n_trees=2, max_depth=3, subsample=0.8, max_bin=32))
    assert model.active.ensemble.objective == "multiclass"  # class codes 0, 1, 2


def test_classifier_and_regressor_mismatch_is_named_before_training():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=80), "z": rng.normal(size=80), "amount": rng.normal(size=80)})
    active, passives = split_columns(frame, [["z"]], label="amount")
    seen = []
    with pytest.raises(DataError, match="holds continuous values .* use VerticalBoostRegressor"):
        VerticalBoostClassifier(on_tree=seen.append, **SMALL_ESTIMATOR).fit(active, passives)
    assert seen == []  # nothing was trained
    text = frame.assign(amount=np.where(frame["amount"] > 0, "high", "low"))
    active, passives = split_columns(text, [["z"]], label="amount")
    with pytest.raises(DataError, match="holds text .* use VerticalBoostClassifier"):
        VerticalBoostRegressor(**SMALL_ESTIMATOR).fit(active, passives)
    rating = frame.assign(amount=rng.integers(1, 11, size=80))
    active, passives = split_columns(rating, [["z"]], label="amount")
    assert VerticalBoostClassifier(n_trees=1, max_depth=3, subsample=0.8, max_bin=32).fit(active, passives).model_.active.ensemble.objective == "multiclass"


def test_warnings_are_python_warnings_in_the_library():
    frame = pd.DataFrame({"x": np.arange(60.0), "c": 1.0, "z": np.arange(60.0) % 5, "y": np.arange(60) % 2})
    active, passives = split_columns(frame, [["z"]], label="y")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, _ = train_local(active, passives, BoostParams(n_trees=1, max_depth=3, subsample=0.8, max_bin=32))
    assert [str(w.message) for w in caught if w.category is DataWarning] == [
        "dropped columns no split can use, they stay out of the model: <DataFrame> (active party): 'c' (constant 1)"]
    assert model.active.feature_names == ["x"]


def test_categorical_accuracy_within_0_01_of_xgboost_on_diamonds():
    """A real dataset with text columns (see benchmarks/categorical.py for the full run)."""
    frame = load_diamonds().sample(n=15_000, random_state=0)
    active, passives = split_columns(frame, [DIAMONDS_PASSIVE], label=DIAMONDS_LABEL, id_column="id")
    params = BoostParams(n_trees=20, max_depth=4, subsample=1.0, max_bin=256)
    train_rows, test_rows = train_test_rows(active.n_rows, 0.3, 0)
    model, _ = train_local(active.take(train_rows), [p.take(train_rows) for p in passives], params)
    a, p = party_features(model, active.take(test_rows), [q.take(test_rows) for q in passives])
    ours = float(np.mean((model.predict(a, p) >= 0.5) == active.labels[test_rows]))
    x = frame.drop(columns=["id", DIAMONDS_LABEL]).astype({c: "category" for c in ["cut", "color", "clarity"]})
    y = frame[DIAMONDS_LABEL].to_numpy()
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 4, "eta": 0.3, "max_bin": 256, "nthread": 2,
                         "tree_method": "hist"},
                        xgb.DMatrix(x.iloc[train_rows], label=y[train_rows], enable_categorical=True), 20)
    theirs = float(np.mean((booster.predict(xgb.DMatrix(x.iloc[test_rows], enable_categorical=True)) >= 0.5)
                           == y[test_rows]))
    assert ours > 0.9 and abs(ours - theirs) <= 0.01, (ours, theirs)


def test_deployed_passive_party_with_text_and_constant_columns(tmp_path, small_credit):
    """A passive organisation's file as it comes: a text column, a constant one. It trains,
    saves its own categories, and scores a later batch holding a category it never saw."""
    from teeboost.deploy.messages import Finish, PredictData
    from teeboost.parties.active import ensemble_digest
    from teeboost.model_files import load_passive
    from teeboost.parties.active import FederatedOracle
    from teeboost.transport.inmemory import InMemoryChannel

    from .test_policy import OPT_IN, align, service, setup, train as train_deployed

    active, passives = small_credit
    passive = passives[0]
    frame = pd.DataFrame(passive.features, columns=list(passive.feature_names))
    age = frame["age"].to_numpy()
    frame["segment"] = np.where(age < 35, "young", np.where(age < 60, "middle", "senior"))
    frame["region"] = "north"  # constant: dropped with a warning
    frame.insert(0, "id", passive.ids)
    frame.to_csv(tmp_path / "passive.csv", index=False, sep=";")  # and semicolon-separated
    party = service(tmp_path, OPT_IN)
    channel = InMemoryChannel({1: party.handle})
    aligned = active.take(align(channel, active))
    with pytest.warns(DataWarning, match="'region' \\(constant 'north'\\)"):  # the passive party decides
        train_rows, _ = setup(channel, aligned)
    model, _ = train_deployed(channel, train_rows)
    channel.request_all({1: Finish("plain")})
    saved = load_passive(party.config.model_dir / "passive-1.json")
    assert "region" not in saved.feature_names and saved.vocabularies["segment"].names
    frame.loc[frame.index[:5], "segment"] = "centenarian"  # a category training never saw
    frame.to_csv(tmp_path / "passive.csv", index=False, sep=";")
    batch = active.take(np.arange(40))
    shared = align(channel, batch, "predict")
    channel.request_all({1: PredictData("predict", ensemble_digest(model.ensemble))})
    margin = model.ensemble.margin(shared.size, FederatedOracle(channel, "predict", model.owner,
                                                                batch.features[shared]))
    assert shared.size == 40 and np.isfinite(margin).all()
