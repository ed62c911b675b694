"""Locust users for tests/serving/test_load_fault.py: single-row requests to ``teeboost serve``.

Run by that test as its own process (``python -m locust -f tests/serving/locust_scoring.py
--headless ...``), never imported by pytest (gevent patches the process it runs in). It checks
nothing: it records every answer, one JSON line each, and the test judges them.

Environment:

- ``TEEBOOST_LOAD_PLAN``: a JSON file ``{"models": [names], "rows": [{"id", "features"}, ...]}``.
  Each request names one of the models (in turn, per user) and carries one row drawn at random.
- ``TEEBOOST_LOAD_RECORD``: the JSON-lines file written, one line per answer: ``sent`` (wall
  clock, seconds since the epoch, as the test's own clock), ``latency`` (seconds), ``model``,
  ``id``, ``code`` (the HTTP status, 0 when no answer came) and, for a 200, ``rows`` (each row's
  ``status``, ``score``, ``scored_by``, ``reason``); otherwise ``body`` (the first 2,000
  characters of the answer, or the client's error).
"""

from __future__ import annotations

import json
import os
import random
import time

from locust import FastHttpUser, between, events, task

PLAN = json.loads(open(os.environ["TEEBOOST_LOAD_PLAN"], encoding="utf-8").read())
_record = open(os.environ["TEEBOOST_LOAD_RECORD"], "a", encoding="utf-8")


@events.quitting.add_listener
def _close(**_):
    _record.close()


class Scorer(FastHttpUser):
    wait_time = between(0.02, 0.08)  # about 20 users x 15 requests a second offered, at most

    def on_start(self):
        self.turn = random.randrange(len(PLAN["models"]))
        self.random = random.Random()

    @task
    def score_one(self):
        models = PLAN["models"]
        model = models[self.turn % len(models)]
        self.turn += 1
        row = self.random.choice(PLAN["rows"])
        body = {"model": model, "rows": [row]}
        sent, started = time.time(), time.perf_counter()
        with self.client.post("/v1/score", json=body, name=f"/v1/score {model}", catch_response=True) as response:
            latency = time.perf_counter() - started
            line = {"sent": sent, "latency": latency, "model": model, "id": row["id"],
                    "code": int(response.status_code or 0)}
            try:
                answer = response.json() if response.status_code == 200 else None
            except ValueError:
                answer = None
            if answer is not None:
                line["rows"] = [{k: r.get(k) for k in ("id", "status", "score", "scored_by", "reason")}
                                for r in answer.get("rows", [])]
            else:
                line["body"] = (response.text or str(response.error or ""))[:2000]
            # judged by the test, not here: Locust counts only answers that never came as failures
            if response.status_code:
                response.success()
            else:
                response.failure(str(response.error))
        _record.write(json.dumps(line) + "\n")
        _record.flush()
