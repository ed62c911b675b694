"""The service's Prometheus metrics, in a registry of its own per app (two apps in one process,
as tests make them, do not share counts).

Counted as requests happen: requests by endpoint, model and status code; their latency
(buckets from 1 ms, fine up to 100 ms); time in the model's scorer; rows by how they were
scored (``federated``: by the model, ``fallback``, ``error``); errors by kind; reloads by
result. Read at each scrape from the registry: the loaded versions (an info gauge), requests in
flight per version, and each scorer's ``budget()`` when it has one.
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily

from .registry import Registry
from .scorer import enclaves_of

__all__ = ["Metrics", "LATENCY_BUCKETS", "ENDPOINTS"]

log = logging.getLogger("teeboost.serving")

LATENCY_BUCKETS = (0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0,
                   2.5, 5.0, 10.0)
#: The endpoints a metric names; any other path is counted as "other" (labels stay few).
ENDPOINTS = ("/v1/score", "/v1/models", "/v1/models/reload", "/healthz", "/metrics", "/openapi.json", "/docs")

HOW = {"scored": "federated", "fallback": "fallback", "error": "error"}


class _Live:
    """Gauges read from the registry at each scrape."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def collect(self):
        info = GaugeMetricFamily("teeboost_serve_model_info", "a loaded model version (1)",
                                 labels=["model", "version", "protocol", "objective", "enclaves", "kind"])
        busy = GaugeMetricFamily("teeboost_serve_in_flight", "requests running on a model version",
                                 labels=["model", "version"])
        budget = GaugeMetricFamily("teeboost_serve_budget", "budget used, as the model's scorer reports it",
                                   labels=["model", "version", "item"])
        for spec, loaded, draining in self.registry.snapshot():
            for x in loaded:
                s = x.scorer
                info.add_metric([spec.name, s.version, s.protocol, s.objective, enclaves_of(s) or "none",
                                 getattr(s, "kind", "federated")], 1)
                report = getattr(s, "budget", None)
                if callable(report):
                    try:
                        items = report()
                    except Exception as exc:  # a scrape must not fail for one scorer
                        log.warning("model %r: budget() failed: %s", spec.name, exc)
                        items = {}
                    for item, value in items.items():
                        if isinstance(value, (int, float)) and not isinstance(value, bool):
                            budget.add_metric([spec.name, s.version, str(item)], float(value))
            for x in [*loaded, *draining]:
                busy.add_metric([spec.name, x.scorer.version], x.in_flight)
        yield info
        yield busy
        if budget.samples:
            yield budget


class Metrics:
    def __init__(self, registry: Registry) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("teeboost_serve_requests", "HTTP requests answered", ["endpoint", "model", "code"],
                                registry=r)
        self.latency = Histogram("teeboost_serve_request_seconds", "time to answer a request", ["endpoint"],
                                 buckets=LATENCY_BUCKETS, registry=r)
        self.scoring = Histogram("teeboost_serve_score_seconds", "time in the model's scorer per request", ["model"],
                                 buckets=LATENCY_BUCKETS, registry=r)
        self.rows = Counter("teeboost_serve_rows", "rows answered, by how they were scored", ["model", "how"],
                            registry=r)
        self.errors = Counter("teeboost_serve_errors", "errors: peer_unavailable, internal, reload_failed",
                              ["model", "kind"], registry=r)
        self.party_bytes = Counter("teeboost_party_bytes", "bytes on the wire between the parties to score requests "
                                   "(both ways; a micro-batch's bytes shared by its requests in proportion to rows)",
                                   ["model"], registry=r)
        self.reloads = Counter("teeboost_serve_reloads", "model directories looked at by a reload", ["model", "result"],
                               registry=r)
        r.register(_Live(registry))

    def endpoint(self, path: str) -> str:
        return path if path in ENDPOINTS else "other"

    def rows_answered(self, model: str, counts: dict[str, int]) -> None:
        for status, n in counts.items():
            if n:
                self.rows.labels(model, HOW[status]).inc(n)
