"""The XGBoost export fed the user's own pandas frame: category columns are matched by name,
never by position, so the export predicts what federated prediction predicts, or refuses.

Issue #35: fed ordinary pandas category columns, the export silently changed 61% of
predictions by up to 0.42 (XGBoost took the frame's own category order for teeboost's codes)."""

import json

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb

from teeboost.config import BoostParams
from teeboost.data import split_columns
from teeboost.datasets import DIAMONDS_LABEL, DIAMONDS_PASSIVE
from teeboost.errors import DataError, ModelFileError
from teeboost.estimator import party_features
from teeboost.export import export_xgboost, recode
from teeboost.federation import train_local

from . import trained_models as tm

GRADES = ["cut", "color", "clarity"]


def federated(trained: tm.Trained, frame: pd.DataFrame, passive_columns: list[list[str]], label: str) -> np.ndarray:
    """Federated prediction on the user's frame, each party reading its own columns."""
    active, passives = split_columns(frame, passive_columns, label=label, id_column="id")
    return trained.model.predict(*party_features(trained.model, active, passives))


def as_categories(frame: pd.DataFrame, columns: list[str], order=lambda names: sorted(names, reverse=True)):
    """Text columns as pandas categoricals, categories in ``order`` (not teeboost's codes)."""
    frame = frame.copy()
    for column in columns:
        present = frame[column].dropna().unique().tolist()
        frame[column] = pd.Categorical(frame[column], categories=order(present))
    return frame


def held_out_diamonds() -> pd.DataFrame:
    """Held-out diamonds with missing grades, as a user would hold them."""
    frame = tm.diamonds_frame().iloc[tm.N_TRAIN:].reset_index(drop=True).copy()
    for k, column in enumerate(GRADES):
        frame.loc[k::29, column] = None
    return frame


def both_ways(booster: xgb.Booster, frame: pd.DataFrame) -> list[np.ndarray]:
    """What an XGBoost user gets: a DMatrix of the frame, and inplace_predict."""
    x = frame[booster.feature_names]
    return [booster.predict(xgb.DMatrix(x, enable_categorical=True)).astype(np.float64),
            booster.inplace_predict(x).astype(np.float64)]


def test_diamonds_pandas_categories_in_another_order_predict_as_federated_prediction():
    """The old silent failure, now correct: categories reversed (teeboost codes by frequency),
    one dtype missing categories that never occur, missing cells."""
    trained = tm.diamonds_categorical()
    booster = tm.load_booster(export_xgboost(trained.model))
    frame = as_categories(held_out_diamonds(), GRADES)
    frame["cut"] = frame["cut"].cat.remove_categories(["Fair"]) if "Fair" in frame["cut"].cat.categories else \
        frame["cut"]
    ours = federated(trained, frame, [DIAMONDS_PASSIVE], DIAMONDS_LABEL)
    for theirs in both_ways(booster, frame):
        assert np.abs(ours - theirs).max() <= 1e-6


def test_export_without_category_names_would_mispredict_silently():
    """What the export did before (no category names in the model): the same frame silently
    changes predictions. Kept as the evidence that the test above can fail."""
    trained = tm.diamonds_categorical()
    document = export_xgboost(trained.model)
    del document["learner"]["gradient_booster"]["model"]["cats"]
    frame = as_categories(held_out_diamonds(), GRADES, order=sorted)  # pandas' own order: astype("category")
    ours = federated(trained, frame, [DIAMONDS_PASSIVE], DIAMONDS_LABEL)
    theirs = tm.load_booster(document).predict(xgb.DMatrix(frame[document["learner"]["feature_names"]],
                                                           enable_categorical=True))
    changed = np.abs(ours - theirs) > 1e-6
    assert changed.mean() > 0.3 and np.abs(ours - theirs).max() > 0.1


def test_unseen_category_is_refused_by_xgboost_and_recoded_by_teeboost():
    """A category training never saw: XGBoost refuses it by name; ``recode`` codes it as
    federated prediction does (missing, here), and then every prediction agrees."""
    trained = tm.diamonds_categorical()
    document = json.loads(json.dumps(export_xgboost(trained.model)))  # as written to model.json
    booster = tm.load_booster(document)
    frame = held_out_diamonds()
    frame.loc[3::41, "color"] = "Z"  # unseen
    frame.loc[5::43, "clarity"] = " VS1 "  # stray spaces: teeboost strips them
    frame = as_categories(frame, GRADES)
    ours = federated(trained, frame, [DIAMONDS_PASSIVE], DIAMONDS_LABEL)
    with pytest.raises(xgb.core.XGBoostError, match="`Z`"):
        both_ways(booster, frame)
    for theirs in both_ways(booster, recode(frame, document)):
        assert np.abs(ours - theirs).max() <= 1e-6
    # text columns, as read from a CSV, through the recoder too; a Booster works as the model
    text = frame.astype({c: object for c in GRADES})
    for theirs in both_ways(booster, recode(text, booster)):
        assert np.abs(ours - theirs).max() <= 1e-6


def test_rare_categories_share_other_in_xgboost_too():
    """Rare shops (coded "other") and an unseen one: XGBoost refuses the names it was not given;
    recoded, they join "other" as in federated prediction."""
    trained = tm.categorical_with_other_and_missing()
    document = export_xgboost(trained.model)
    names = json.loads(document["learner"]["attributes"]["teeboost_categories"])["shop"]
    assert names["other"] == "<other>" and len(names["categories"]) == 61
    booster = tm.load_booster(document)
    frame = tm.shops_frame().iloc[4000:].reset_index(drop=True).copy()
    frame.loc[7::31, "shop"] = "shop-never-seen"
    rare = sorted(set(frame["shop"].dropna()) - set(names["categories"]))
    assert len(rare) > 5, "no rare shops to check"
    frame = as_categories(frame, ["shop"])
    ours = federated(trained, frame, [["shop", "z"]], "y")
    with pytest.raises(xgb.core.XGBoostError, match="not in the training set"):
        both_ways(booster, frame)
    for theirs in both_ways(booster, recode(frame, document)):
        assert np.abs(ours - theirs).max() <= 1e-6
    known = frame[frame["shop"].isin(names["categories"]) | frame["shop"].isna()]
    with pytest.raises(xgb.core.XGBoostError, match="not in the training set"):
        both_ways(booster, known)  # rare shops still listed by the dtype, though in no row: refused
    known = known.assign(shop=known["shop"].cat.remove_unused_categories())  # now no recoder is needed
    for theirs in both_ways(booster, known):
        assert np.abs(federated(trained, known, [["shop", "z"]], "y") - theirs).max() <= 1e-6


def test_non_ascii_and_number_categories_are_refused_raw_and_recoded_exactly():
    """Names beyond ASCII (xgboost 3.2 mangles them in a pandas frame: the export writes them
    escaped, so they are refused, never mis-matched) and categories that are numbers, held as
    ints (XGBoost refuses numbers for text names): ``recode`` gives both exactly."""
    rng = np.random.default_rng(5)
    n = 3000
    cities = np.array(["München", "Köln", "Zürich", "Łódź", "Ålesund", "Berlin", "Ærø"])
    city = rng.integers(0, cities.size, n)
    level = rng.choice([1, 2, 3, 10, 20], n)
    x = rng.normal(size=n)
    y = (np.sin(city * 1.7) + np.log(level) / 2 - 0.7 + 0.5 * x + rng.normal(scale=0.3, size=n) > 0).astype(int)
    frame = pd.DataFrame({"id": [f"r{i}" for i in range(n)], "x": x, "y": y, "city": cities[city],
                          "level": pd.Categorical(level)})
    frame.loc[::11, "city"] = None
    train = np.arange(2000)
    active, passives = split_columns(frame, [["city", "level"]], label="y", id_column="id")
    model, _ = train_local(active.take(train), [p.take(train) for p in passives],
                           BoostParams(n_trees=6, max_depth=3, subsample=0.8, max_bin=32), "plain", options=tm.SIMULATED)
    document = export_xgboost(model)
    assert "M\\xfcnchen" in recode(frame, document)["city"].cat.categories
    booster = tm.load_booster(document)
    held = frame.iloc[2000:].reset_index(drop=True)
    ours = federated(tm.Trained(model, np.empty((0, 0)), []), held, [["city", "level"]], "y")
    escaped = held["city"].map(lambda c: c.encode("ascii", "backslashreplace").decode() if isinstance(c, str) else c)
    for raw in (as_categories(held, ["city"]),  # the cities: refused
                held.assign(city=escaped.astype("category"))):  # cities as the model names them; level ints: refused
        with pytest.raises(xgb.core.XGBoostError):
            both_ways(booster, raw)
    for theirs in both_ways(booster, recode(held, document)):
        assert np.abs(ours - theirs).max() <= 1e-6


@pytest.mark.parametrize("case", [tm.diamonds_categorical, tm.categorical_with_other_and_missing],
                         ids=["diamonds", "other"])
def test_category_names_are_written_as_xgboost_writes_them(case):
    """Our ``cats`` equal those XGBoost itself saves after training on the same names in the
    same order (bytes, offsets, sorted order), and survive XGBoost's load and save."""
    document = export_xgboost(case().model)
    ours = document["learner"]["gradient_booster"]["model"]["cats"]
    named = json.loads(document["learner"]["attributes"]["teeboost_categories"])
    given = {f: [*e["categories"], *([e["other"]] if e["other"] else [])] for f, e in named.items()}
    size = 2 * max(len(names) for names in given.values())
    frame = pd.DataFrame({f: pd.Categorical([given[f][i % len(given[f])] for i in range(size)], categories=given[f])
                          if f in given else np.arange(size, dtype=float) for f in document["learner"]["feature_names"]})
    trained = xgb.train({"max_depth": 1}, xgb.DMatrix(frame, label=np.arange(size) % 2, enable_categorical=True), 1)
    theirs = json.loads(trained.save_raw("json"))["learner"]["gradient_booster"]["model"]["cats"]
    assert ours == theirs
    saved = json.loads(tm.load_booster(document).save_raw("json"))["learner"]["gradient_booster"]["model"]["cats"]
    assert saved == ours


def test_recode_names_what_is_wrong():
    trained = tm.diamonds_categorical()
    document = export_xgboost(trained.model)
    frame = held_out_diamonds()
    with pytest.raises(DataError, match="'clarity'"):
        recode(frame.drop(columns=["clarity"]), document)
    with pytest.raises(DataError, match="'carat'"):
        recode(frame.assign(carat="heavy"), document)
    with pytest.raises(ModelFileError, match="not a teeboost export"):
        recode(frame, {"learner": {"attributes": {}, "feature_names": ["carat"]}})
    edited = json.loads(json.dumps(document))
    edited["learner"]["gradient_booster"]["model"]["cats"]["enc"].reverse()
    with pytest.raises(ModelFileError, match="'cut'.*the model was edited"):
        recode(frame, edited)
    with pytest.raises(ModelFileError, match="model"):
        recode(frame, 42)
