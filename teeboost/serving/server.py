"""Running the API: uvicorn on a socket bound here (port 0: any free port), a ready file written
once it accepts connections (so scripts and tests learn the port), SIGHUP to reload the
models, SIGINT/SIGTERM to stop after the requests in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
import tempfile
from pathlib import Path

import uvicorn
from fastapi import FastAPI

from ..heap import settle

__all__ = ["bind", "run", "url_of"]

log = logging.getLogger("teeboost.serving")


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: one the system picks). Made with protocol
    IPPROTO_TCP, not 0: asyncio turns Nagle's algorithm off only on sockets that say TCP, and
    with it on, an answer written in two parts waits out the client's delayed ACK (40 ms)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        from ..errors import ConfigError

        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


def _log_to_stderr() -> None:
    logger = logging.getLogger("teeboost.serving")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("teeboost serve: %(levelname)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


async def _reload(app: FastAPI) -> None:
    result = await app.state.reload()
    for entry in result["models"]:
        if entry["status"] != "unchanged":
            log.info("SIGHUP: model %r from %s: %s (version %s)", entry["model"], entry["directory"], entry["status"],
                     entry["version"])


class _Server(uvicorn.Server):
    """uvicorn's server with the signals left to ``_serve``: uvicorn re-raises SIGTERM after a
    graceful stop, which would end the process before the ready file is removed."""

    @contextlib.contextmanager
    def capture_signals(self):
        yield

    def install_signal_handlers(self) -> None:  # uvicorn < 0.29
        pass


async def _serve(server: uvicorn.Server, sock: socket.socket, app: FastAPI, ready: dict, ready_file: Path | None) \
        -> None:
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, lambda: loop.create_task(_reload(app)))

    def stop() -> None:  # the first signal waits for requests in flight, a second one does not
        server.force_exit = server.should_exit
        server.should_exit = True

    for stop_signal in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(stop_signal, stop)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.01)
    if server.started:
        log.info("listening on %s (models: %s)", ready["url"],
                 ", ".join(f"{name}@{version}" for name, version in ready["models"].items()))
        if ready_file is not None:
            _write_atomically(ready_file, json.dumps(ready))
    await task


def run(app: FastAPI, sock: socket.socket, *, ready_file: Path | None = None, access_log: bool = False) -> None:
    """Serve ``app`` on ``sock`` until SIGINT or SIGTERM; the ready file says
    ``{"url", "pid", "models"}`` while it serves and is removed after."""
    _log_to_stderr()
    models = {spec.name: loaded[0].scorer.version for spec, loaded, _ in app.state.registry.snapshot()}
    ready = {"url": url_of(sock), "pid": os.getpid(), "models": models}
    config = uvicorn.Config(app, lifespan="off", log_level="warning", access_log=access_log,
                            timeout_graceful_shutdown=30)
    settle()  # the loaded models and libraries stay out of full collections (teeboost.heap)
    try:
        asyncio.run(_serve(_Server(config), sock, app, ready, ready_file))
    finally:
        app.state.registry.close()  # each model's scorer: its sessions and enclaves, spares too
        if ready_file is not None:
            ready_file.unlink(missing_ok=True)
        sock.close()
