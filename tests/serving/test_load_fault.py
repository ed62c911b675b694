"""Issue #34's load test: Locust against ``teeboost serve`` while the passive party is killed and
restarted. No wrong score; every request the outage touched fails fast (503 naming the party) or
falls back, flagged, as its model's policy says; the service recovers by itself within 5 s of
the passive party's return.

One deployed federation (its own processes: the passive party with gRPC and mutual TLS on a fixed
port, ``teeboost serve --config`` and Locust), trained with N-TEE. The service serves the model
twice, under two policies ([serving] table): ``default`` falls back to an active-only model,
``no-fallback`` errors; each Locust request names one of them in turn, so one outage tests both.
Locust (tests/serving/locust_scoring.py) only records answers; every check is made here.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest

from teeboost.deploy.demo import set_peer_addresses, start_passive, write_federation

from ..helpers import stop_passive_parties
from .helpers import active_only_credit, request_rows, start_service

pytestmark = pytest.mark.serial  # wall-clock bounds (tests/serial.py)

LOCUSTFILE = Path(__file__).with_name("locust_scoring.py")
TIMEOUT = 2.0  # [serving] timeout, the default: a passive party that does not answer fails the batch by then
USERS, RUN_SECONDS, KILL_AT, DOWN_FOR = 20, 21, 4.0, 5.0
HELD, UNHELD = 150, 4  # customers both parties hold; ids the passive party does not hold
RECOVERY = 5.0  # seconds after the passive party's ready file reappears


def cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "teeboost.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def replace_once(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{path}: expected one {old!r}"
    path.write_text(text.replace(old, new))


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    """A trained federation, its passive party on a fixed port, and the service serving the model
    as ``default`` (fallback to ``active-only``) and ``no-fallback`` (errors)."""
    tmp = tmp_path_factory.mktemp("load-fault")
    configs = write_federation(tmp, n_passive=1, training={"n_trees": 10, "max_depth": 3}, rows=6000)
    port = free_port()
    # the same address after a restart, as a real deployment has it; and a leakage budget for a
    # load test (every request scores a customer again: each routing answer is a bit)
    replace_once(configs["passive-1"], 'listen = "127.0.0.1:0"', f'listen = "127.0.0.1:{port}"')
    replace_once(configs["passive-1"], "max_bits_per_row_per_day = 256", "max_bits_per_row_per_day = 10000000")
    with configs["active"].open("a") as active:
        active.write('[serving]\nmodels = {default = "model-active", "no-fallback" = "model-active", '
                     '"active-only" = "active-only"}\nfallback_model = {default = "active-only"}\n'
                     'on_unmatched = {default = "fallback", "no-fallback" = "error"}\n\n')
    processes = []
    service = None
    try:
        process, address = start_passive(configs["passive-1"], tmp / "passive-1.ready", tmp / "passive-1.log")
        processes.append(process)
        assert address == f"127.0.0.1:{port}"
        set_peer_addresses(configs["active"], {1: ("passive-1", address)})
        trained = cli("party", "--config", str(configs["active"]), "--protocol", "ntee", "--json")
        assert trained.returncode == 0, trained.stderr
        active_only_credit(tmp / "active-only")
        service = start_service(tmp / "service", "--config", str(configs["active"]))
        yield tmp, configs, processes, service, address
    finally:
        try:
            if service is not None:
                assert service.stop() == 0, service.log.read_text()[-3000:]  # SIGTERM: a clean stop
        finally:
            stop_passive_parties(configs["active"], [p for p in processes if p.poll() is None])


def customers(tmp: Path) -> tuple[list[dict], set[str], list[str]]:
    """Request rows (the active party's columns) of HELD customers both parties hold and UNHELD
    ids the passive party does not hold; -> (rows, held ids, columns)."""
    active = pd.read_csv(tmp / "active.csv", dtype={"id": str}).drop(columns=["SeriousDlqin2yrs"])
    passive = set(pd.read_csv(tmp / "passive-1.csv", dtype={"id": str})["id"])
    held = active[active["id"].isin(passive)].head(HELD)
    unheld = active[~active["id"].isin(passive)].head(UNHELD)
    columns = [c for c in active.columns if c != "id"]
    frame = pd.concat([held, unheld])
    return request_rows(frame, columns), set(held["id"]), columns


def score_all(client: httpx.Client, model: str, rows: list[dict]) -> list[dict]:
    answer = client.post("/v1/score", json={"model": model, "rows": rows})
    assert answer.status_code == 200, answer.text
    return answer.json()["rows"]


def test_locust_load_with_the_passive_party_killed_and_restarted(deployment):
    tmp, configs, processes, service, address = deployment
    rows, held, columns = customers(tmp)
    unheld = {r["id"] for r in rows} - held

    # -- every customer's expected answers, while both parties are up
    with service.client() as client:
        federated = {m: score_all(client, m, rows) for m in ("default", "no-fallback")}
        own = score_all(client, "active-only", rows)
        models = {m["name"]: m for m in client.get("/v1/models").json()["models"]}
    version = models["default"]["default_version"]
    assert models["no-fallback"]["default_version"] == version and models["default"]["fallback"] == "active-only"
    fallback_label = f"active-only@{models['active-only']['default_version']}"
    expected = {r["id"]: r["score"] for r in federated["default"] if r["status"] == "scored"}
    assert set(expected) == held
    assert {r["id"]: r["score"] for r in federated["no-fallback"] if r["status"] == "scored"} == expected
    fallback_score = {r["id"]: r["score"] for r in own}
    for r in federated["default"]:
        if r["id"] in unheld:
            assert (r["status"], r["scored_by"]) == ("fallback", fallback_label) and "passive-1" in r["reason"]
            assert r["score"] == fallback_score[r["id"]]
    assert all(r["status"] == "error" and "passive-1" in r["reason"] for r in federated["no-fallback"]
               if r["id"] in unheld)
    # ... and they are batch prediction's (a sample, with the unheld ids)
    sample = pd.DataFrame([{"id": r["id"], **r["features"]} for r in rows[:30] + rows[-UNHELD:]])[["id", *columns]]
    sample.to_csv(tmp / "sample.csv", index=False)
    done = cli("predict", "--config", str(configs["active"]), "--data", str(tmp / "sample.csv"), "--output",
               str(tmp / "sample-predicted.csv"), "--json")
    assert done.returncode == 0, done.stderr
    batch = pd.read_csv(tmp / "sample-predicted.csv", dtype={"id": str}).set_index("id")["probability_1"]
    for customer, probability in batch.items():
        if customer in held:
            assert abs(expected[customer] - probability) <= 1e-9, customer
        else:
            assert np.isnan(probability)

    # -- Locust: 20 users, one row a request; the passive party killed at ~4 s, restarted ~5 s later
    plan, record = tmp / "plan.json", tmp / "answers.jsonl"
    plan.write_text(json.dumps({"models": ["default", "no-fallback"], "rows": rows}))
    env = {**os.environ, "TEEBOOST_LOAD_PLAN": str(plan), "TEEBOOST_LOAD_RECORD": str(record)}
    with open(tmp / "locust.log", "wb") as log:
        locust = subprocess.Popen([sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless",
                                   "-u", str(USERS), "-r", str(USERS), "-t", f"{RUN_SECONDS}s", "--host", service.url,
                                   "--only-summary"], stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp)
    passive = processes[0]
    try:
        deadline = time.monotonic() + 60
        while not (record.exists() and record.stat().st_size):
            assert locust.poll() is None and time.monotonic() < deadline, (tmp / "locust.log").read_text()[-3000:]
            time.sleep(0.05)
        first = time.time()
        time.sleep(max(0.0, first + KILL_AT - time.time()))
        passive.kill()  # SIGKILL: no goodbye, connections reset
        killed = time.time()
        passive.wait()
        time.sleep(max(0.0, killed + DOWN_FOR - time.time()))
        restarted = time.time()
        ready = tmp / "passive-1.ready2"
        process, again = start_passive(configs["passive-1"], ready, tmp / "passive-1.log2")
        processes.append(process)
        back = ready.stat().st_mtime  # the restarted party's ready file appeared (it listens)
        assert again == address  # the same address: the service is not told anything
        assert locust.wait(timeout=RUN_SECONDS + 60) == 0, (tmp / "locust.log").read_text()[-3000:]
    finally:
        if locust.poll() is None:
            locust.kill()
            locust.wait()

    answers = [json.loads(line) for line in record.read_text().splitlines()]
    summary = judge(answers, expected, fallback_score, fallback_label, version, held, killed, restarted, back)
    summary.update(kill_after_s=round(killed - first, 2), down_s=round(back - killed, 2),
                   restart_to_ready_s=round(back - restarted, 2))
    (tmp / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"load test: {json.dumps(summary)}")
    assert "Traceback" not in service.log.read_text(), service.log.read_text()[-3000:]


def judge(answers, expected, fallback_score, fallback_label, version, held, killed, restarted, back) -> dict:
    """Every answer checked against the expected scores and the outage's timeline (wall clock):
    ``killed`` (SIGKILL sent), ``restarted`` (the new process started), ``back`` (its ready file)."""
    assert answers, "Locust recorded no answer"
    limit = TIMEOUT + 1.0
    counts = {"requests": len(answers), "scored": 0, "fallback": 0, "error_rows": 0, "503": 0}
    outage = {"requests": 0, "worst_latency_s": 0.0}
    recovered = {}
    for a in answers:
        ended = a["sent"] + a["latency"]
        touched = ended >= killed and a["sent"] <= back + RECOVERY  # the outage could touch this request
        down = a["sent"] > killed and ended < restarted  # no passive process at all, from start to end
        where = f"{a['model']} {a['id']} sent {a['sent'] - killed:+.2f} s from the kill, {a['latency']:.3f} s: {a}"
        if touched:
            outage["requests"] += 1
            outage["worst_latency_s"] = max(outage["worst_latency_s"], round(a["latency"], 3))
        assert a["code"] in (200, 503), where  # no 500, no 502, no dropped connection
        if a["code"] == 503:
            counts["503"] += 1
            assert a["model"] == "no-fallback" and touched, where
            assert json.loads(a["body"])["party"] == "passive-1" and a["latency"] <= limit, where
            continue
        (row,) = a["rows"]
        assert row["id"] == a["id"], where
        if touched and row["status"] != "scored":
            assert a["latency"] <= limit, where  # failed fast, or fell back fast
        if row["status"] == "scored":
            counts["scored"] += 1
            assert a["id"] in held and not down, where
            assert row["scored_by"] == f"{a['model']}@{version}", where
            assert abs(row["score"] - expected[a["id"]]) <= 1e-12, where
            if a["sent"] >= back:
                recovered[a["model"]] = min(recovered.get(a["model"], np.inf), ended - back)
        elif row["status"] == "fallback":
            counts["fallback"] += 1
            assert a["model"] == "default" and row["scored_by"] == fallback_label, where
            assert "passive-1" in row["reason"] and (touched or a["id"] not in held), where
            assert abs(row["score"] - fallback_score[a["id"]]) <= 1e-12, where
        else:
            counts["error_rows"] += 1  # the error policy's answer for an id the passive party does not hold
            assert row["status"] == "error" and a["model"] == "no-fallback" and a["id"] not in held, where
            assert row["score"] is None and "passive-1" in row["reason"], where
        if a["id"] in held and (a["sent"] > back + RECOVERY or ended < killed):
            assert row["status"] == "scored", where  # healthy: before the kill, and from recovery on
    # the outage was exercised under both policies, and each recovered by itself in time
    during = [a for a in answers if a["sent"] > killed and a["sent"] + a["latency"] < restarted]
    for model in ("default", "no-fallback"):
        assert sum(a["model"] == model for a in during) >= 10, f"too few {model} requests while the party was down"
        assert recovered.get(model, np.inf) <= RECOVERY, f"{model}: no scored answer within {RECOVERY} s of the return"
    return {**counts, "outage_requests": outage["requests"], "outage_worst_latency_s": outage["worst_latency_s"],
            "down_requests": len(during),
            "recovery_s": {m: round(s, 3) for m, s in recovered.items()}}
