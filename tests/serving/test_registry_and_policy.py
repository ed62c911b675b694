"""The registry's swap and the fallback policy, in this process over real local models.

A replaced version keeps serving the request that holds it and is closed after; what a
federated scorer reports (rows a passive party lacks, a passive party down, its peers' health
and its budget, enclave protocols) reaches the answer as the policy says. The federated scorer
itself is ``teeboost.serving.federated`` (its own tests); here ``Federated`` plays its part
over a real active-only model, raising and reporting exactly what the ``Scorer`` interface says
it may.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from teeboost.datasets import GIVE_ME_SOME_CREDIT_LABEL, GIVE_ME_SOME_CREDIT_PASSIVE
from teeboost.errors import ConfigError
from teeboost.serving.app import create_app
from teeboost.serving.local import LocalScorer
from teeboost.serving.registry import ModelSpec, Registry
from teeboost.serving.scorer import PeerUnavailable, ScoredRows

from .helpers import credit_frame, request_rows, serving


def local(name, directory):
    return LocalScorer(name, directory)


def _rows(n=4):
    frame = credit_frame().iloc[14000:14000 + n].drop(columns=[GIVE_ME_SOME_CREDIT_LABEL, *GIVE_ME_SOME_CREDIT_PASSIVE])
    return request_rows(frame, [c for c in frame.columns if c != "id"])


def test_a_replaced_version_answers_its_request_in_flight_and_is_closed_after(models, tmp_path):
    live = tmp_path / "live"
    os.symlink(models.credit, live)
    registry = Registry([ModelSpec("credit", (live,))], local)
    x = np.zeros((1, len(registry.snapshot()[0][1][0].scorer.feature_names)))
    with registry.use("credit") as (_, held, _):
        old = held.scorer
        assert registry.reload()[0]["status"] == "unchanged"
        os.symlink(models.credit_v2, tmp_path / "next")
        os.replace(tmp_path / "next", live)
        (entry,) = registry.reload()
        assert entry["status"] == "reloaded" and entry["previous"] == old.version != entry["version"]
        with registry.use("credit") as (_, now, _):
            assert now.scorer.version == entry["version"]
        (_, loaded, draining), = registry.snapshot()
        assert [d.scorer.version for d in draining] == [old.version] and draining[0].in_flight == 1
        assert not old.closed and old.score(["a"], x).scored.all()  # the request in flight finishes on it
    assert old.closed and registry.snapshot()[0][2] == []
    registry.close()
    assert loaded[0].scorer.closed


def test_a_registry_refuses_what_it_could_not_serve(models):
    with pytest.raises(ConfigError, match=r"holds the same model \(version"):
        Registry([ModelSpec("credit", (models.credit, models.credit))], local)
    with pytest.raises(ConfigError, match="on_unmatched = 'fallback' needs a fallback model"):
        ModelSpec("credit", (models.credit,), on_unmatched="fallback")
    with pytest.raises(ConfigError, match="its fallback 'nope' is not a served model"):
        Registry([ModelSpec("credit", (models.credit,), "fallback", "nope")], local)
    with pytest.raises(ConfigError, match="a fallback model is trained on the active party's columns only"):
        Registry([ModelSpec("credit", (models.credit_active,), "fallback", "full"),
                  ModelSpec("full", (models.credit,))], local)
    with pytest.raises(ConfigError, match="model name 'a b' may use letters"):
        ModelSpec("a b", (models.credit,))


class Federated:
    """The federated scorer's part over an active-only model: rows carry the active party's
    columns; ids starting with "X" are rows passive party 'telco' does not hold; ``down``:
    'telco' does not answer."""

    kind = "federated"

    def __init__(self, name, directory, protocol="plain"):
        self._inner = LocalScorer(name, directory)
        self.name, self.version, self.objective = name, "f" * 16, self._inner.objective
        self.protocol, self.classes = protocol, self._inner.classes
        self.feature_names, self.vocabularies = self._inner.feature_names, self._inner.vocabularies
        self.down = False

    def score(self, ids, features):
        if self.down:
            raise PeerUnavailable("telco", "no answer within 5 s")
        scored = self._inner.score(ids, features)
        reasons = ["passive party 'telco' holds no row with this id" if i.startswith("X") else None for i in ids]
        held = np.array([r is None for r in reasons])
        values = np.where(held[:, None], scored.values, np.nan)
        return ScoredRows(values, reasons, {"bytes_total": 123})

    def health(self):
        return {"telco": {"reachable": not self.down}}

    def budget(self):
        return {"prediction_rows_today": 12, "note": "not a number: left out"}

    def close(self):
        self._inner.close()


def _app(models, on_unmatched, protocol="plain"):
    def load(name, directory):
        return Federated(name, directory, protocol) if name == "credit" else LocalScorer(name, directory)

    fallback = "credit-active" if on_unmatched == "fallback" else None
    registry = Registry([ModelSpec("credit", (models.credit_active,), on_unmatched, fallback),
                         ModelSpec("credit-active", (models.credit_active,))], load)
    return registry, serving(create_app(registry))


def test_a_passive_party_down_is_a_503_naming_it_unless_rows_fall_back(models):
    rows = _rows()
    registry, served = _app(models, "error")
    with served as http:
        registry.snapshot()[0][1][0].scorer.down = True
        down = http.post("/v1/score", json={"model": "credit", "rows": rows})
        health = http.get("/healthz").json()
        metrics = http.get("/metrics").text
    assert down.status_code == 503 and down.json()["party"] == "telco"
    assert "passive party 'telco' is unavailable: no answer within 5 s" in down.json()["detail"]
    assert "no row of this request was scored" in down.json()["detail"] and "--fallback" in down.json()["detail"]
    assert health["models"]["credit"]["health"] == {"telco": {"reachable": False}}
    assert 'teeboost_serve_errors_total{kind="peer_unavailable",model="credit"} 1.0' in metrics
    assert 'teeboost_serve_budget{item="prediction_rows_today",model="credit",version="ffffffffffffffff"} 12.0' in metrics
    assert 'item="note"' not in metrics

    registry, served = _app(models, "fallback")
    with served as http:
        registry.snapshot()[0][1][0].scorer.down = True
        answer = http.post("/v1/score", json={"model": "credit", "rows": rows})
        metrics = http.get("/metrics").text
    assert answer.status_code == 200
    assert {r["status"] for r in answer.json()["rows"]} == {"fallback"}
    assert all("passive party 'telco' is unavailable" in r["reason"] for r in answer.json()["rows"])
    assert {r["scored_by"] for r in answer.json()["rows"]} == {f"credit-active@{answer.json()['rows'][0]['scored_by'][-16:]}"}
    assert 'teeboost_serve_rows_total{how="fallback",model="credit"} 4.0' in metrics


@pytest.mark.parametrize("on_unmatched", ["error", "fallback"])
def test_ids_a_passive_party_lacks_get_the_policy_row_by_row(models, on_unmatched):
    rows = _rows()
    rows[1]["id"], rows[3]["id"] = "X1", "X3"
    registry, served = _app(models, on_unmatched)
    with served as http:
        answer = http.post("/v1/score", json={"model": "credit", "rows": rows}).json()
        direct = http.post("/v1/score", json={"model": "credit-active", "rows": rows}).json()
    statuses = [r["status"] for r in answer["rows"]]
    assert statuses == ["scored", on_unmatched, "scored", on_unmatched]
    for got, alone in zip(answer["rows"], direct["rows"]):
        if got["status"] == "error":
            assert got["score"] is None and got["reason"] == "passive party 'telco' holds no row with this id"
        else:
            assert got["score"] == alone["score"]
            assert (got["reason"] is None) == (got["status"] == "scored")
    assert answer["counts"] == {"scored": 2, "fallback": 2 * (on_unmatched == "fallback"),
                                "error": 2 * (on_unmatched == "error")}


def test_enclave_protocols_say_simulated_and_faults_answer_a_reference(models, caplog):
    registry, served = _app(models, "error", protocol="ntee")
    with served as http:
        answer = http.post("/v1/score", json={"model": "credit", "rows": _rows(1)}).json()
        listing = http.get("/v1/models").json()
        registry.snapshot()[0][1][0].scorer._inner.close()  # a fault: the scorer fails unexpectedly
        fault = http.post("/v1/score", json={"model": "credit", "rows": _rows(1)})
    assert (answer["protocol"], answer["enclaves"]) == ("ntee", "simulated")
    assert listing["models"][0]["versions"][0]["enclaves"] == "simulated"
    assert fault.status_code == 500 and "Traceback" not in fault.text
    reference = fault.json()["reference"]
    assert reference in fault.json()["detail"] and any(reference in r.getMessage() for r in caplog.records)
