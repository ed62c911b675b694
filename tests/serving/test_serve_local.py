"""``teeboost serve`` as a process over local model directories, spoken to over real HTTP.

Scores are exactly ``teeboost predict``'s for the same rows (numbers, categories, unseen
categories, missing values; two versions of one model); the listing, health and metrics say
what is served and what happened; a bad request is a 4xx naming the field; a row a passive
party does not hold falls back to the active-only model, flagged, or is an error saying why;
a reload under a stream of requests switches versions without one failed request.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from teeboost.datasets import DIAMONDS_LABEL, GIVE_ME_SOME_CREDIT_LABEL, GIVE_ME_SOME_CREDIT_PASSIVE, load_diamonds
from teeboost.federation import FederatedModel
from teeboost.parties.active import ensemble_digest

from .helpers import credit_frame, predict_csv, request_rows, start_service, train

HELD_OUT = slice(14000, 14060)  # rows the models were not trained on, some with missing values


def version_of(model_dir) -> str:
    return ensemble_digest(FederatedModel.load(model_dir).active.ensemble)[:16]


def credit_rows(rows=HELD_OUT):
    frame = credit_frame().iloc[rows].drop(columns=[GIVE_ME_SOME_CREDIT_LABEL])
    return frame, [c for c in frame.columns if c != "id"]


def metric(text: str, name: str, **labels) -> float:
    """A sample's value in Prometheus text (0 when absent)."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


def test_scores_are_what_teeboost_predict_writes(service, models, tmp_path):
    frame, columns = credit_rows()
    assert frame[columns].isna().any().any()  # missing values are part of it
    with service.client() as http:
        for model_dir, version in ((models.credit, None), (models.credit_v2, version_of(models.credit_v2))):
            expected = predict_csv(model_dir, frame, tmp_path)
            body = {"model": "credit", "rows": request_rows(frame, columns), **({"version": version} if version else {})}
            answer = http.post("/v1/score", json=body)
            assert answer.status_code == 200, answer.text
            got = answer.json()
            assert got["version"] == version_of(model_dir) and got["protocol"] == "plain" and got["enclaves"] is None
            assert got["positive_class"] == 1 and "probability of class 1" in got["score_is"]
            assert [r["id"] for r in got["rows"]] == list(expected["id"])
            assert {r["status"] for r in got["rows"]} == {"scored"}
            assert {r["scored_by"] for r in got["rows"]} == {f"credit@{version_of(model_dir)}"}
            np.testing.assert_allclose([r["score"] for r in got["rows"]], expected["probability_1"], rtol=0, atol=1e-12)
            assert [str(r["prediction"]) for r in got["rows"]] == list(expected["prediction"])
            assert got["counts"] == {"scored": len(frame), "fallback": 0, "error": 0}


def test_categories_are_coded_as_teeboost_predict_codes_them(service, models, tmp_path):
    frame = load_diamonds().iloc[3000:3040].drop(columns=[DIAMONDS_LABEL]).reset_index(drop=True)
    frame.loc[0, "cut"] = "Fabulous"  # a category training never saw (the model has no "other": missing)
    frame.loc[1, "color"] = None  # a missing category
    frame.loc[2, "clarity"] = " VS1 "  # spaces around a known one
    expected = predict_csv(models.diamonds, frame, tmp_path)
    columns = [c for c in frame.columns if c != "id"]
    with service.client() as http:
        answer = http.post("/v1/score", json={"model": "diamonds", "rows": request_rows(frame, columns)})
    assert answer.status_code == 200, answer.text
    rows = answer.json()["rows"]
    np.testing.assert_allclose([r["score"] for r in rows], expected["probability_1"], rtol=0, atol=1e-12)
    assert rows[0]["notes"] == ["cut: category 'Fabulous' was not seen in training; scored as missing"]
    assert rows[1]["notes"] == [] and rows[2]["notes"] == []


def test_the_listing_health_and_metrics_say_what_is_served(service, models):
    with service.client() as http:
        listing = http.get("/v1/models").json()
        before = http.get("/metrics").text
        frame, columns = credit_rows(slice(14000, 14003))
        assert http.post("/v1/score", json={"model": "credit", "rows": request_rows(frame, columns)}).status_code == 200
        assert http.post("/v1/score", json={"model": "credit", "rows": []}).status_code == 422
        health = http.get("/healthz")
        after = http.get("/metrics")
    by_name = {m["name"]: m for m in listing["models"]}
    assert set(by_name) == {"credit", "diamonds", "credit-active"} and listing["max_rows_per_request"] == 200
    credit = by_name["credit"]
    assert [v["version"] for v in credit["versions"]] == [version_of(models.credit), version_of(models.credit_v2)]
    assert credit["default_version"] == version_of(models.credit)
    assert (credit["fallback"], credit["on_unmatched"]) == ("credit-active", "fallback")
    assert (by_name["diamonds"]["fallback"], by_name["diamonds"]["on_unmatched"]) == (None, "error")
    version = credit["versions"][0]
    assert (version["kind"], version["protocol"], version["enclaves"], version["objective"]) == \
           ("local", "plain", None, "binary")
    features = {f["name"]: f for f in version["features"]}
    assert features["age"]["party"] == "passive-1" and features["DebtRatio"]["party"] == "active"
    cut = {f["name"]: f for f in by_name["diamonds"]["versions"][0]["features"]}["cut"]
    assert cut["type"] == "category" and "Ideal" in cut["categories"] and cut["other"] is False

    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert set(health.json()["models"]) == set(by_name)

    assert after.status_code == 200 and after.headers["content-type"].startswith("text/plain")
    text = after.text
    labels = {"endpoint": "/v1/score", "model": "credit"}
    assert metric(text, "teeboost_serve_requests_total", code="200", **labels) == \
           metric(before, "teeboost_serve_requests_total", code="200", **labels) + 1
    assert metric(text, "teeboost_serve_requests_total", code="422", **labels) >= 1
    assert metric(text, "teeboost_serve_rows_total", model="credit", how="federated") == \
           metric(before, "teeboost_serve_rows_total", model="credit", how="federated") + 3
    assert metric(text, "teeboost_serve_request_seconds_bucket", endpoint="/v1/score", le="0.001") >= 0
    assert metric(text, "teeboost_serve_request_seconds_count", endpoint="/v1/score") >= 2
    assert metric(text, "teeboost_serve_score_seconds_count", model="credit") >= 1
    assert metric(text, "teeboost_serve_model_info", model="credit", version=version_of(models.credit_v2),
                  protocol="plain", kind="local") == 1
    assert 'teeboost_serve_in_flight{model="credit"' in text


def _credit_row(**changes):
    frame, columns = credit_rows(slice(14000, 14002))
    rows = request_rows(frame, columns)
    for where, value in changes.items():
        index, column = where.split("__")
        if value is _DROP:
            del rows[int(index)]["features"][column]
        else:
            rows[int(index)]["features"][column] = value
    return {"model": "credit", "rows": rows}


_DROP = object()
_BAD = [
    ("unknown model", {**_credit_row(), "model": "nope"}, 404, "model", "'nope' is not served here (served: credit,"),
    ("version not loaded", {**_credit_row(), "version": "0123456789abcdef"}, 409, "version", "loaded:"),
    ("version not a version", {**_credit_row(), "version": "v2"}, 422, "version", "version"),
    ("no rows", {"model": "credit", "rows": []}, 422, "rows", "rows"),
    ("one column missing", _credit_row(**{"1__age": _DROP}), 422, "rows[1].features.age", "missing column 'age'"),
    ("an active column missing", _credit_row(**{"0__DebtRatio": _DROP}), 422, "rows[0].features.DebtRatio", "missing"),
    ("unknown column", _credit_row(**{"0__salary": 1}), 422, "rows[0].features.salary", "unknown column 'salary'"),
    ("text in a numeric column", _credit_row(**{"0__age": "41"}), 422, "rows[0].features.age", "as a number"),
    ("true in a numeric column", _credit_row(**{"1__DebtRatio": True}), 422, "rows[1].features.DebtRatio", "not a number"),
    ("a list as a value", _credit_row(**{"0__age": [41]}), 422, "rows[0].features.age", "a list is not a number"),
    ("an object row", {"model": "credit", "rows": [5]}, 422, "rows[0]", "rows[0]"),
    ("a repeated id", {"model": "credit", "rows": [_credit_row()["rows"][0]] * 2}, 422, "rows[1].id", "repeats"),
    ("a blank id", {"model": "credit", "rows": [{**_credit_row()["rows"][0], "id": "  "}]}, 422, "rows[0].id", "empty"),
    ("a numeric id", {"model": "credit", "rows": [{**_credit_row()["rows"][0], "id": 7}]}, 422, "rows[0].id", "string"),
    ("an unknown field", {**_credit_row(), "modle": "credit"}, 422, "modle", "unknown field"),
    ("no model", {"rows": _credit_row()["rows"]}, 422, "model", "required"),
    ("too many rows", {"model": "credit", "rows": [{"id": str(i), "features": {}} for i in range(201)]}, 413, "rows",
     "limit of 200"),
    ("a category as a list", {"model": "diamonds", "rows": [{"id": "d", "features": {
        "carat": 0.5, "cut": ["Ideal"], "color": "E", "clarity": "SI1", "depth": 61.0, "table": 55.0}}]}, 422,
     "rows[0].features.cut", "not a category"),
    ("one row of several wrong", _credit_row(**{"1__MonthlyIncome": "lots"}), 422, "rows[1].features.MonthlyIncome",
     "'lots'"),
]


@pytest.mark.parametrize("body, status, field, words", [case[1:] for case in _BAD], ids=[case[0] for case in _BAD])
def test_a_bad_request_is_a_4xx_naming_the_field(service, body, status, field, words):
    with service.client() as http:
        answer = http.post("/v1/score", json=body)
    assert answer.status_code == status, answer.text
    error = answer.json()
    assert error["field"] == field and error["detail"].startswith(field) and words in error["detail"], error


@pytest.mark.parametrize("text, field, words", [
    ('{"model": "credit", "rows": [', "body", "not valid JSON"),
    ('"age": Infinity', "rows[0].features.age", "finite"),
    ('"age": 1e400', "rows[0].features.age", "finite"),
    ('"age": NaN', "rows[0].features.age", "null"),
], ids=["truncated", "Infinity", "overflowing", "NaN"])
def test_json_that_is_no_number_is_named(service, text, field, words):
    if not text.startswith("{"):  # a whole row, with this JSON text as its age
        text = json.dumps(_credit_row(**{"0__age": "AGE"})).replace('"age": "AGE"', text)
    with service.client() as http:
        answer = http.post("/v1/score", content=text, headers={"content-type": "application/json"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == field and words in answer.json()["detail"]


def test_oversized_bodies_and_wrong_methods_are_named(service):
    with service.client() as http:
        huge = http.post("/v1/score", content=b"x" * (200 * 32 * 1024 + 1), headers={"content-type": "application/json"})
        wrong = http.get("/v1/score")
        nowhere = http.get("/v2/score")
    assert huge.status_code == 413 and huge.json()["field"] == "body" and "limit" in huge.json()["detail"]
    assert wrong.status_code == 405 and "GET is not allowed on /v1/score" in wrong.json()["detail"]
    assert nowhere.status_code == 404 and "/v2/score" in nowhere.json()["detail"]


def test_rows_a_passive_party_lacks_fall_back_flagged_or_say_why(service, models, tmp_path):
    frame, columns = credit_rows(slice(14000, 14010))
    rows = request_rows(frame, columns)
    for row in rows[::2]:  # every other row: the active party's columns only
        for column in GIVE_ME_SOME_CREDIT_PASSIVE:
            del row["features"][column]
    active_only = frame.drop(columns=GIVE_ME_SOME_CREDIT_PASSIVE)
    expected_fallback = predict_csv(models.credit_active, active_only, tmp_path)["probability_1"].to_numpy()
    expected_model = predict_csv(models.credit, frame, tmp_path)["probability_1"].to_numpy()
    diamonds = {"id": "d1", "features": {"carat": 0.5, "cut": "Ideal", "depth": 61.0, "table": 55.0}}
    with service.client() as http:
        before = http.get("/metrics").text
        got = http.post("/v1/score", json={"model": "credit", "rows": rows}).json()
        lacking = http.post("/v1/score", json={"model": "diamonds", "rows": [diamonds]}).json()
        after = http.get("/metrics").text
    fallback = f"credit-active@{version_of(models.credit_active)}"
    for k, row in enumerate(got["rows"]):
        if k % 2 == 0:
            assert (row["status"], row["scored_by"]) == ("fallback", fallback)
            assert "passive party 1 (passive-1)" in row["reason"] and "holds no such row" in row["reason"]
            assert abs(row["score"] - expected_fallback[k]) <= 1e-12
        else:
            assert (row["status"], row["reason"]) == ("scored", None)
            assert abs(row["score"] - expected_model[k]) <= 1e-12
    assert got["counts"] == {"scored": 5, "fallback": 5, "error": 0}
    (row,) = lacking["rows"]
    assert (row["status"], row["score"], row["scored_by"]) == ("error", None, None)
    assert "passive party 1 (passive-1)" in row["reason"]
    for model, how, n in (("credit", "fallback", 5), ("credit", "federated", 5), ("diamonds", "error", 1)):
        assert metric(after, "teeboost_serve_rows_total", model=model, how=how) == \
               metric(before, "teeboost_serve_rows_total", model=model, how=how) + n


def _hammer(url: str, body: dict, stop: threading.Event, seen: list) -> None:
    import httpx

    with httpx.Client(base_url=url, timeout=30) as http:
        while not stop.is_set():
            try:
                answer = http.post("/v1/score", json=body)
                seen.append((answer.status_code, answer.json().get("version"), answer.json().get("rows")))
            except Exception as exc:  # a refused connection or a broken answer counts as a failure
                seen.append(("failed", repr(exc), None))


@pytest.mark.serial
def test_a_reload_under_load_switches_versions_without_a_failed_request(models, tmp_path):
    live = tmp_path / "credit-live"
    os.symlink(models.credit, live)
    service = start_service(tmp_path / "svc", "--model", f"credit={live}")
    frame, columns = credit_rows(slice(14000, 14005))
    body = {"model": "credit", "rows": request_rows(frame, columns)}
    old = version_of(models.credit)
    stop, streams = threading.Event(), [[], []]
    hammers = [threading.Thread(target=_hammer, args=(service.url, body, stop, seen)) for seen in streams]
    try:
        for thread in hammers:
            thread.start()
        newer = train(tmp_path / "credit-newer", "--random-state", "11", "--n-trees", "4")  # trained meanwhile
        new = version_of(newer)
        switch = tmp_path / "credit-live.next"
        os.symlink(newer, switch)
        os.replace(switch, live)  # the directory changes atomically
        with service.client() as http:
            reload = http.post("/v1/models/reload").json()
            time.sleep(1.0)
        stop.set()
        for thread in hammers:
            thread.join(timeout=30)
        assert reload["ok"] and reload["models"][0]["status"] == "reloaded"
        assert (reload["models"][0]["previous"], reload["models"][0]["version"]) == (old, new)
        for seen in streams:
            assert seen and all(status == 200 for status, _, _ in seen), [s for s in seen if s[0] != 200][:3]
            versions = [version for _, version, _ in seen]
            assert set(versions) <= {old, new} and versions[-1] == new
            assert new not in versions or old not in versions[versions.index(new):]  # never back to the old one
        assert any(v == old for s in streams for _, v, _ in s)  # requests ran on both sides of the switch
        last = streams[0][-1][2]
        expected = predict_csv(newer, frame, tmp_path)["probability_1"]
        np.testing.assert_allclose([r["score"] for r in last], expected, rtol=0, atol=1e-12)

        # SIGHUP reloads too: back to the first model
        os.symlink(models.credit, switch)
        os.replace(switch, live)
        service.process.send_signal(signal.SIGHUP)
        with service.client() as http:
            deadline = time.monotonic() + 30
            while http.get("/v1/models").json()["models"][0]["default_version"] != old:
                assert time.monotonic() < deadline, "SIGHUP did not reload the model"
                time.sleep(0.1)

            # a directory that does not load keeps the old version serving, and the reload says why
            empty = tmp_path / "empty"
            empty.mkdir()
            os.symlink(empty, switch)
            os.replace(switch, live)
            failed = http.post("/v1/models/reload").json()
            assert not failed["ok"] and failed["models"][0]["status"] == "failed"
            assert "holds no model" in failed["models"][0]["error"] and failed["models"][0]["version"] == old
            still = http.post("/v1/score", json=body)
            assert still.status_code == 200 and still.json()["version"] == old
            text = http.get("/metrics").text
            assert metric(text, "teeboost_serve_reloads_total", model="credit", result="failed") == 1
            assert metric(text, "teeboost_serve_reloads_total", model="credit", result="reloaded") == 2
    finally:
        stop.set()
        code = service.stop()
    assert code == 0, service.log.read_text()
    assert not (tmp_path / "svc" / "ready.json").exists()
    assert "Traceback" not in service.log.read_text()


def test_a_model_that_cannot_serve_stops_the_start_naming_it(models, capsys):
    """A fallback that does not fit (another task's columns) is refused at start, named."""
    from teeboost.cli import main

    code = main(["serve", "--model", f"diamonds={models.diamonds}", "--fallback", f"credit-active={models.credit_active}",
                 "--port", "0"])
    err = capsys.readouterr().err
    assert code == 2 and "model 'diamonds' cannot fall back to 'credit-active'" in err and "'carat'" not in err
    assert "not the active party's columns of 'diamonds'" in err


@pytest.mark.serial
def test_a_keep_alive_request_is_not_held_by_a_delayed_ack(service):
    """One row over a reused connection takes about a millisecond; an answer written in two
    parts with Nagle's algorithm on waits 40 ms for the client's delayed ACK every time."""
    frame, columns = credit_rows(slice(14000, 14001))
    body = {"model": "credit", "rows": request_rows(frame, columns)}
    with service.client() as http:
        seconds = []
        for _ in range(21):
            start = time.perf_counter()
            assert http.post("/v1/score", json=body).status_code == 200
            seconds.append(time.perf_counter() - start)
    assert sorted(seconds)[10] < 0.025, sorted(seconds)


def test_the_ready_file_is_json_naming_the_url_and_models(service, models):
    info = json.loads((service.log.parent / "ready.json").read_text())
    assert info["url"] == service.url and info["pid"] == service.process.pid
    assert info["models"] == {"credit": version_of(models.credit), "diamonds": version_of(models.diamonds),
                              "credit-active": version_of(models.credit_active)}
