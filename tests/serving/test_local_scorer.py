"""``LocalScorer`` beyond binary plain models: a strict model's rows are routed between simulated
enclaves, only when asked to, and every answer says the enclaves were simulated; a multiclass
model answers every class's probability, a regressor its value, each as ``teeboost predict``."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from teeboost.datasets import DIAMONDS_LABEL, GIVE_ME_SOME_CREDIT_LABEL, bundled_path, load_diamonds
from teeboost.errors import ConfigError
from teeboost.serving.app import create_app
from teeboost.serving.fallback import check_fallback
from teeboost.serving.local import LocalScorer
from teeboost.serving.registry import ModelSpec, Registry

from .helpers import credit_frame, predict_csv, request_rows, serving, train


@pytest.fixture(scope="module")
def strict_model(tmp_path_factory):
    root = tmp_path_factory.mktemp("strict")
    sample = root / "credit-1500.csv"
    sample.write_text("".join(bundled_path().read_text().splitlines(keepends=True)[:1501]))
    return train(root / "model", "--data", str(sample), "--protocol", "strict", "--allow-simulated-tee",
                 "--n-trees", "2", "--max-depth", "2")


def test_a_strict_model_is_served_only_when_simulated_enclaves_are_allowed(strict_model):
    with pytest.raises(ConfigError, match="strict model: its rows are routed between simulated enclaves.*"
                                          "--allow-simulated-tee"):
        LocalScorer("strict", strict_model)


def test_a_strict_model_answers_as_predict_does_and_says_simulated(strict_model, tmp_path):
    frame = credit_frame().iloc[14000:14020].drop(columns=[GIVE_ME_SOME_CREDIT_LABEL])
    registry = Registry([ModelSpec("strict", (strict_model,))],
                        lambda name, directory: LocalScorer(name, directory, allow_simulated_tee=True))
    with serving(create_app(registry)) as http:
        answer = http.post("/v1/score", json={"model": "strict", "rows": request_rows(frame, list(frame.columns[1:]))})
        listing = http.get("/v1/models").json()
        metrics = http.get("/metrics").text
    assert answer.status_code == 200, answer.text
    assert (answer.json()["protocol"], answer.json()["enclaves"]) == ("strict", "simulated")
    assert listing["models"][0]["versions"][0]["enclaves"] == "simulated"
    assert 'enclaves="simulated"' in metrics and 'protocol="strict"' in metrics
    expected = predict_csv(strict_model, frame, tmp_path, "--allow-simulated-tee")
    np.testing.assert_allclose([r["score"] for r in answer.json()["rows"]], expected["probability_1"], rtol=0,
                               atol=1e-12)


@pytest.mark.parametrize("label, objective", [("cut", "multiclass"), ("depth", "regression")])
def test_multiclass_and_regression_answers_are_predicts(tmp_path, label, objective):
    frame = load_diamonds().drop(columns=[DIAMONDS_LABEL])
    data = tmp_path / "diamonds.csv"
    frame.iloc[:2000].to_csv(data, index=False)
    model_dir = train(tmp_path / label, "--data", str(data), "--label", label, "--id", "id", "--passive-columns",
                      "color,clarity", "--objective", objective, "--n-trees", "3")
    rows = frame.iloc[2000:2010].drop(columns=[label])
    expected = predict_csv(model_dir, rows, tmp_path)
    registry = Registry([ModelSpec(label, (model_dir,))], LocalScorer)
    with serving(create_app(registry)) as http:
        got = http.post("/v1/score", json={"model": label, "rows": request_rows(rows, list(rows.columns[1:]))}).json()
    assert got["objective"] == objective and got["positive_class"] is None
    if objective == "multiclass":
        assert got["score_is"] == "probability of each class" and len(got["classes"]) == 5
        for k, row in enumerate(got["rows"]):
            assert list(row["score"]) == [str(c) for c in got["classes"]]
            for name, p in row["score"].items():
                assert abs(p - expected[f"probability_{name}"][k]) <= 1e-12
            assert row["prediction"] == expected["prediction"][k]
    else:
        assert got["score_is"] == "predicted value" and got["classes"] == []
        values = [float(v) for v in expected["prediction"]]
        np.testing.assert_allclose([r["score"] for r in got["rows"]], values, rtol=0, atol=1e-12)
        assert [r["prediction"] for r in got["rows"]] == [r["score"] for r in got["rows"]]


def test_the_fallback_recipe_of_the_docs_trains_a_fallback_that_fits(models, tmp_path, monkeypatch):
    text = (Path(__file__).resolve().parents[2] / "docs" / "serving.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", text, re.S)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/serving.md", "exec"), {})
    check_fallback(LocalScorer("credit", models.credit), LocalScorer("credit-active", tmp_path / "active-only-model"))
