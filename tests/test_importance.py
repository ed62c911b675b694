"""Feature importances: XGBoost's get_score on the joint model, and each party's own view."""

import json

import numpy as np
import pytest

from teeboost.cli import main
from teeboost.errors import ConfigError
from teeboost.explain import (IMPORTANCE_TYPES, ImportanceShare, active_importance, joint_importances,
                              importance_share, joint_scores, passive_importance)
from teeboost.export import export_xgboost

from . import trained_models as tm


def close(ours: dict, theirs: dict) -> bool:
    """Same features; values equal up to the float32 XGBoost keeps gains and covers in."""
    return ours.keys() == theirs.keys() and all(np.isclose(ours[k], theirs[k], rtol=1e-6, atol=0) for k in ours)


@pytest.mark.parametrize("case", [tm.credit_binary, tm.credit_two_passives, tm.credit_multiclass,
                                  tm.diamonds_categorical], ids=["binary", "three-parties", "multiclass", "categorical"])
@pytest.mark.parametrize("importance_type", IMPORTANCE_TYPES)
def test_joint_importance_is_xgboost_get_score_on_the_exported_model(case, importance_type):
    model = case().model
    booster = tm.load_booster(export_xgboost(model))
    assert close(joint_scores(model, importance_type), booster.get_score(importance_type=importance_type))


def test_feature_importances_are_xgboost_sklearn_default_normalised_average_gain():
    model = tm.credit_two_passives().model
    booster = tm.load_booster(export_xgboost(model))
    score = booster.get_score(importance_type="gain")  # XGBModel.feature_importances_'s default type
    expected = np.array([score.get(name, 0.0) for name in booster.feature_names])
    ours = joint_importances(model)
    assert ours.shape == (len(booster.feature_names),)
    assert np.isclose(ours.sum(), 1.0) and np.allclose(ours, expected / expected.sum(), rtol=1e-6)
    assert np.isclose(joint_importances(model, "total_gain").sum(), 1.0)


@pytest.mark.parametrize("importance_type", IMPORTANCE_TYPES)
def test_active_party_sees_its_features_and_each_passive_party_as_a_whole(importance_type):
    model = tm.credit_two_passives().model
    view = active_importance(model.active, importance_type)
    joint = joint_scores(model, importance_type)
    assert view.features == {k: v for k, v in joint.items() if k in model.active.feature_names}
    weight = joint_scores(model, "weight")
    for passive in model.passives:
        own = [f for f in passive.feature_names if f in joint]
        splits = sum(weight[f] for f in own)
        total = {"weight": splits, "total_gain": sum(joint_scores(model, "total_gain")[f] for f in own),
                 "total_cover": sum(joint_scores(model, "total_cover")[f] for f in own)}
        total["gain"], total["cover"] = total["total_gain"] / splits, total["total_cover"] / splits
        assert np.isclose(view.parties[passive.name], total[importance_type])
    assert set(view.parties) == {p.name for p in model.passives}


def test_passive_party_counts_its_splits_alone_and_needs_the_share_for_the_rest():
    model = tm.credit_two_passives().model
    passive = model.passives[1]
    joint = {t: joint_scores(model, t) for t in IMPORTANCE_TYPES}
    mine = lambda scores: {k: v for k, v in scores.items() if k in passive.feature_names}  # noqa: E731
    assert passive_importance(passive, "weight").features == mine(joint["weight"])
    with pytest.raises(ConfigError, match="importance share"):
        passive_importance(passive, "gain")
    share = ImportanceShare.from_dict(json.loads(json.dumps(importance_share(model.active, passive.name).to_dict())))
    for importance_type in IMPORTANCE_TYPES:
        view = passive_importance(passive, importance_type, share)
        assert view.features.keys() == mine(joint[importance_type]).keys() and view.parties == {}
        assert all(np.isclose(view.features[k], v) for k, v in mine(joint[importance_type]).items())


def test_share_holds_gain_and_cover_of_that_party_records_only():
    model = tm.credit_two_passives().model
    share = importance_share(model.active, 1).to_dict()
    assert set(share) == {"format", "version", "party", "name", "records"}
    assert all(set(r) == {"id", "gain", "cover"} for r in share["records"])
    assert {r["id"] for r in share["records"]} == {r for r, _ in model.passives[0].owner.items()}
    other = ImportanceShare.from_dict(importance_share(model.active, 2).to_dict())
    with pytest.raises(ConfigError, match="share is for party 2"):
        passive_importance(model.passives[0], "gain", other)
    with pytest.raises(ConfigError, match="no passive party 'nobody'"):
        importance_share(model.active, "nobody")


def test_strict_models_have_split_counts_only():
    model = tm.credit_strict().model
    assert sum(active_importance(model.active, "weight").features.values()) > 0
    for importance_type in ("gain", "cover", "total_gain", "total_cover"):
        with pytest.raises(ConfigError, match="strict model does not publish"):
            active_importance(model.active, importance_type)
        with pytest.raises(ConfigError, match="strict model does not publish"):
            passive_importance(model.passives[0], importance_type)
    with pytest.raises(ConfigError, match="strict model does not publish"):
        importance_share(model.active, 1)
    with pytest.raises(ConfigError, match="strict model does not publish"):
        joint_importances(model)
    assert passive_importance(model.passives[0], "weight").features == {
        k: v for k, v in joint_scores(model, "weight").items() if k in model.passives[0].feature_names}


def test_unknown_type_names_the_choices():
    with pytest.raises(ConfigError, match="importance_type='split' must be one of weight"):
        active_importance(tm.credit_binary().model.active, "split")


def test_importance_cli_for_active_and_passive_party(tmp_path, capsys):
    model_dir = tmp_path / "model"
    tm.credit_two_passives().model.save(model_dir)
    name = tm.credit_two_passives().model.passives[0].name
    assert main(["importance", str(model_dir), "--type", "gain", "--json", "--plot", str(tmp_path / "a.png")]) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["party"] == "active" and name in view["parties"] and (tmp_path / "a.png").stat().st_size > 0

    assert main(["importance", str(model_dir), "--party", name, "--type", "gain"]) == 2
    assert "importance share" in capsys.readouterr().err
    share = tmp_path / "share.json"
    assert main(["importance", str(model_dir), "--share-with", name, "--out", str(share)]) == 0
    assert "nothing about other parties" in capsys.readouterr().out
    assert main(["importance", str(model_dir), "--party", name, "--type", "total_gain", "--share", str(share)]) == 0
    text = capsys.readouterr().out
    assert f"as party {name} sees it" in text and "party " + name not in text.splitlines()[1]

    # a deployed passive party's folder holds its own file only: it is the default there
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "passive-1.json").write_bytes((model_dir / "passive-1.json").read_bytes())
    assert main(["importance", str(alone), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["party"] == name
    assert main(["importance", str(alone), "--share-with", name, "--out", str(share)]) == 2
    assert "only the active party" in capsys.readouterr().err
