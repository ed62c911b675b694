"""The scoring service's HTTP/JSON API (FastAPI; described at ``/openapi.json``, shown at ``/docs``).

``POST /v1/score`` scores rows with a served model; ``GET /v1/models`` lists what is served;
``POST /v1/models/reload`` swaps in changed model directories; ``GET /healthz`` says the
service is up (and, per model, what its scorer says of its peers); ``GET /metrics`` is
Prometheus' text. A federated model's requests wait on the event loop for its scoring stages'
threads (``teeboost.serving.stage_worker``); other scoring runs in a worker thread, so
concurrent requests overlap while the event loop only parses and answers. docs/serving.md is the user's guide.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .answers import answer
from .fallback import PeerDown, score_rows_async
from .http_errors import ApiError, Guard, install_handlers
from .metrics import Metrics
from .registry import Registry, UnknownModel, VersionNotLoaded
from .rows import check_ids
from .schemas import (ErrorBody, HealthResponse, ModelsResponse, ReloadResponse, ScoreRequest, ScoreResponse)
from .scorer import Scorer, enclaves_of, plain_label

__all__ = ["create_app", "DEFAULT_MAX_ROWS"]

DEFAULT_MAX_ROWS = 1000
_ERROR = {"model": ErrorBody}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("teeboost")
    except PackageNotFoundError:
        from .. import __version__

        return __version__


def _features(scorer: Scorer) -> list[dict]:
    owner = {c: party for party, columns in getattr(scorer, "party_columns", None) or [] for c in columns}
    out = []
    for name in scorer.feature_names:
        vocabulary = scorer.vocabularies.get(name)
        info = {"name": name, "type": "category" if vocabulary else "number", "party": owner.get(name)}
        if vocabulary:
            info |= {"categories": list(vocabulary.names), "other": vocabulary.other}
        out.append(info)
    return out


def _example(registry: Registry) -> dict:
    """A request the first model accepts (every value missing): the example /docs shows."""
    spec, loaded, _ = registry.snapshot()[0]
    return {"model": spec.name, "rows": [{"id": "C1", "features": {c: None for c in loaded[0].scorer.feature_names}}]}


def create_app(registry: Registry, *, max_rows: int = DEFAULT_MAX_ROWS, max_body_bytes: int | None = None) -> FastAPI:
    """The API over ``registry``'s models. ``max_rows``: rows one request may carry (413
    beyond); ``max_body_bytes``: largest request body (default: 32 KiB per row, 1 MiB at least)."""
    metrics = Metrics(registry)
    app = FastAPI(title="teeboost serve", version=_version(), redoc_url=None,
                  description="The active party's online scoring service (docs/serving.md).")
    app.state.registry, app.state.metrics = registry, metrics
    install_handlers(app)
    app.add_middleware(Guard, metrics=metrics, max_body_bytes=max_body_bytes or max(2**20, max_rows * 32 * 1024))

    @app.post("/v1/score", response_model=ScoreResponse, summary="score rows with a served model",
              responses={404: _ERROR, 409: _ERROR, 413: _ERROR, 422: _ERROR, 500: _ERROR, 503: _ERROR})
    async def score(body: ScoreRequest, request: Request) -> JSONResponse:
        model = body.model if body.model in registry.specs else "<unknown>"
        request.state.model = model
        if len(body.rows) > max_rows:
            raise ApiError(413, f"rows: {len(body.rows)} rows exceed this service's limit of {max_rows} per request "
                                "(max_rows_per_request); split them", "rows")
        ids = check_ids([row.id for row in body.rows])
        try:
            with registry.use(body.model, body.version) as (spec, main, fallback):
                outcome = await score_rows_async(main.scorer, fallback and fallback.scorer, spec.on_unmatched, ids,
                                                 [row.features for row in body.rows])
        except UnknownModel as exc:
            raise ApiError(404, f"model: {exc}", "model") from None
        except VersionNotLoaded as exc:
            raise ApiError(409, f"version: {exc}", "version") from None
        except PeerDown as exc:
            metrics.errors.labels(model, "peer_unavailable").inc()
            raise ApiError(503, str(exc), party=exc.party) from None
        if outcome.peer_down:
            metrics.errors.labels(model, "peer_unavailable").inc()
        metrics.scoring.labels(model).observe(outcome.seconds)
        sent = outcome.traffic.get("bytes_total", outcome.traffic.get("bytes"))
        if isinstance(sent, (int, float)) and sent > 0:
            metrics.party_bytes.labels(model).inc(sent)
        result = answer(main.scorer, ids, outcome)
        metrics.rows_answered(model, result["counts"])
        return JSONResponse(result)

    @app.get("/v1/models", response_model=ModelsResponse, summary="the served models and their loaded versions")
    async def models() -> dict:
        out = []
        for spec, loaded, draining in registry.snapshot():
            versions = [{"version": x.scorer.version, "kind": getattr(x.scorer, "kind", "federated"),
                         "protocol": x.scorer.protocol, "enclaves": enclaves_of(x.scorer),
                         "objective": x.scorer.objective, "classes": [plain_label(c) for c in x.scorer.classes],
                         "features": _features(x.scorer), "loaded_at": x.loaded_at, "in_flight": x.in_flight}
                        for x in loaded]
            out.append({"name": spec.name, "default_version": loaded[0].scorer.version, "versions": versions,
                        "draining": [x.scorer.version for x in draining], "on_unmatched": spec.on_unmatched,
                        "fallback": spec.fallback})
        return {"models": out, "max_rows_per_request": max_rows}

    async def reload() -> dict:
        results = await run_in_threadpool(registry.reload)
        for entry in results:
            metrics.reloads.labels(entry["model"], entry["status"]).inc()
            if entry["status"] == "failed":
                metrics.errors.labels(entry["model"], "reload_failed").inc()
        return {"ok": all(e["status"] != "failed" for e in results), "models": results}

    app.state.reload = reload  # SIGHUP runs it too (teeboost.serving.server)

    @app.post("/v1/models/reload", response_model=ReloadResponse,
              summary="load changed model directories and swap them in (ok: false when one failed)")
    async def reload_models() -> dict:
        return await reload()

    @app.get("/healthz", response_model=HealthResponse, summary="up, with each model's peers as its scorer sees them")
    async def healthz() -> dict:
        report = {}
        for spec, loaded, _ in registry.snapshot():
            entry = {"versions": [x.scorer.version for x in loaded]}
            probe = getattr(loaded[0].scorer, "health", None)
            if callable(probe):
                try:
                    entry["health"] = await run_in_threadpool(probe)
                except Exception as exc:  # a failing probe is news about the model, not a failed health check
                    entry["error"] = f"health() failed: {exc}"
            report[spec.name] = entry
        return {"status": "ok", "models": report}

    @app.get("/metrics", summary="Prometheus metrics (text format)", response_class=Response,
             responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}})
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    def openapi() -> dict:
        """FastAPI's schema, with what only the registry knows: the model names and the row limit."""
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            request = schema["components"]["schemas"]["ScoreRequest"]["properties"]
            request["model"]["enum"] = registry.names()
            request["rows"]["maxItems"] = max_rows
            body = schema["paths"]["/v1/score"]["post"]["requestBody"]["content"]["application/json"]
            body["example"] = _example(registry)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi
    return app
