"""Every error the service answers is JSON with a ``detail`` naming the field (or party) at fault.

4xx: the request is wrong and says where (``rows[3].features.age: text 'abc', but ...``); a
validation failure lists every problem found under ``errors``. 503: a passive party is down,
named. 500: anything unexpected, answered with a reference the log repeats beside the stack
trace, which never goes to the client. ``Guard`` (the outermost middleware) also counts every
request and its latency, and refuses a body larger than the service's limit before reading it.
"""

from __future__ import annotations

import json
import logging
import time
import uuid

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .metrics import Metrics
from .rows import FieldProblem, RowsRejected

__all__ = ["ApiError", "Guard", "install_handlers", "error_body"]

log = logging.getLogger("teeboost.serving")


class ApiError(Exception):
    """An answer other than 200, with the field (or party) it is about."""

    def __init__(self, status: int, detail: str, field: str | None = None, **extra) -> None:
        super().__init__(detail)
        self.status, self.detail, self.field, self.extra = status, detail, field, extra


def error_body(detail: str, field: str | None = None, errors: list[FieldProblem] = (), **extra) -> dict:
    return {"detail": detail, "field": field, "errors": [{"field": p.field, "message": p.message} for p in errors],
            **{k: v for k, v in extra.items() if v is not None}}


def _field(loc: tuple) -> str:
    """('body', 'rows', 0, 'features', 'age') -> 'rows[0].features.age'."""
    out = ""
    for part in loc[1:] if loc and loc[0] == "body" else loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "body"


def _problems(exc: RequestValidationError) -> list[FieldProblem]:
    problems = []
    for error in exc.errors():
        loc = tuple(error.get("loc", ()))
        if error.get("type") == "json_invalid":
            where = loc[1] if len(loc) > 1 else "?"
            problems.append(FieldProblem("body", f"not valid JSON: {error.get('ctx', {}).get('error', 'decode error')} "
                                                 f"at position {where}"))
        elif error.get("type") == "extra_forbidden":
            problems.append(FieldProblem(_field(loc), "unknown field"))
        else:
            problems.append(FieldProblem(_field(loc), str(error.get("msg", "invalid"))))
    return problems or [FieldProblem("body", "invalid request")]


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(error_body(exc.detail, exc.field, **exc.extra), status_code=exc.status)

    @app.exception_handler(RowsRejected)
    async def _rows(request: Request, exc: RowsRejected) -> JSONResponse:
        first = exc.problems[0]
        more = f" (and {len(exc.problems) - 1} more: see errors)" if len(exc.problems) > 1 else ""
        return JSONResponse(error_body(f"{first.field}: {first.message}{more}", first.field, exc.problems),
                            status_code=422)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        body = getattr(exc, "body", None)
        model = body.get("model") if isinstance(body, dict) else None
        if isinstance(model, str) and model in request.app.state.registry.specs:
            request.state.model = model  # counted under its model, as requests that got further are
        problems = _problems(exc)[:20]
        first = problems[0]
        more = f" (and {len(problems) - 1} more: see errors)" if len(problems) > 1 else ""
        return JSONResponse(error_body(f"{first.field}: {first.message}{more}", first.field, problems),
                            status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            detail, field = f"no such path {request.url.path!r} (the API: /docs, /openapi.json)", None
        elif exc.status_code == 405:
            detail, field = f"{request.method} is not allowed on {request.url.path} (allowed: " \
                            f"{(exc.headers or {}).get('Allow', '?')})", None
        else:
            detail, field = f"body: {exc.detail}", "body"
        return JSONResponse(error_body(detail, field), status_code=exc.status_code, headers=exc.headers)


class Guard:
    """Outermost ASGI middleware: counts and times every request, refuses an oversized body
    with 413, and turns an unexpected exception into a 500 with a reference id."""

    def __init__(self, app, metrics: Metrics, max_body_bytes: int) -> None:
        self.app, self.metrics, self.max_body_bytes = app, metrics, max_body_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        state = {"code": 500, "started": False}
        received = 0

        too_large = (f"larger than this service's limit of {self.max_body_bytes:,} bytes (set by "
                     "max_rows_per_request); send fewer rows per request")

        async def counted_receive():
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_body_bytes:  # a chunked body: FastAPI answers this one (413)
                raise HTTPException(413, too_large)
            return message

        async def watched_send(message) -> None:
            if message["type"] == "http.response.start":
                state["code"], state["started"] = message["status"], True
            await send(message)

        try:
            length = dict(scope.get("headers") or []).get(b"content-length", b"0")
            if length.isdigit() and int(length) > self.max_body_bytes:
                await self._answer(send, state, 413, error_body(f"body: {too_large}", "body"))
            else:
                await self.app(scope, counted_receive, watched_send)
        except Exception:
            reference = uuid.uuid4().hex[:12]
            log.exception("internal error, reference %s, on %s %s", reference, scope.get("method"), scope.get("path"))
            self.metrics.errors.labels(scope.get("state", {}).get("model", ""), "internal").inc()
            await self._answer(send, state, 500, error_body(
                f"internal error (reference {reference}); the service's log has the details", reference=reference))
        finally:
            endpoint = self.metrics.endpoint(scope.get("path", ""))
            model = scope.get("state", {}).get("model", "")
            self.metrics.requests.labels(endpoint, model, str(state["code"])).inc()
            self.metrics.latency.labels(endpoint).observe(time.perf_counter() - start)

    @staticmethod
    async def _answer(send, state: dict, status: int, body: dict) -> None:
        state["code"] = status
        if state["started"]:  # too late for another answer: the client sees the connection end
            return
        payload = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})
