"""One enclave launched ahead of need, for a host that starts enclave sessions while requests
wait: after a passive party restarted, a scoring service waited about 3 s to score again, of
which launching the two enclaves (an OS process each on the simulated backend, an enclave
build on hardware) and compiling the passive one's scan kernels were about 1.8 s.

A spare holds no secret and is bound to nothing until its host initialises it for a session
(the handshake's ``init`` ecall), exactly as a freshly launched one would be: taking a spare
changes when an enclave starts, not what it is.
"""

from __future__ import annotations

import concurrent.futures
import sys
import threading
import time
from typing import Callable

from .interface import Enclave

__all__ = ["SpareEnclave"]


class SpareEnclave:
    """``launch()`` starts an enclave, ``warm(enclave)`` readies it (e.g. compiles its kernels);
    ``take()`` hands out a spare (launched now if none is ready or it failed) and starts the
    next one in the background. Up to ``keep`` spares are held: a host whose sessions all start
    at once (a passive party restarted under two scoring models) has one for each."""

    def __init__(self, launch: Callable[[], Enclave], warm: Callable[[Enclave], None] | None = None, *,
                 name: str = "enclave", keep: int = 1) -> None:
        self._launch, self._warm, self._name = launch, warm, name
        self._lock = threading.Lock()
        self._next: list[concurrent.futures.Future] = []  # launched or launching, oldest first
        self.keep = max(1, keep)
        self._closed = False

    def prepare(self, keep: int | None = None) -> None:
        """Start launching spares until ``keep`` (by default, as many as before) are held or
        under way."""
        with self._lock:
            if keep is not None:
                self.keep = max(1, keep)
            if self._closed:
                return
            futures = [concurrent.futures.Future() for _ in range(self.keep - len(self._next))]
            self._next.extend(futures)
        for future in futures:
            threading.Thread(target=self._launch_into, args=(future,), daemon=True,
                             name=f"teeboost-spare-{self._name}").start()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the spares under way: -> whether all are ready (one
        that failed is launched again when taken)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            futures = list(self._next)
        try:
            for future in futures:
                future.result(timeout=max(0.0, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001 - a timeout, or a launch that failed: reported when taken
            return False
        return bool(futures)

    def take(self) -> Enclave:
        with self._lock:
            done = [f for f in self._next if f.done()]
            future = (done or self._next or [None])[0]
            if future is not None:
                self._next.remove(future)
        enclave = None
        if future is not None:
            try:
                enclave = future.result()
            except Exception as exc:  # noqa: BLE001 - a spare that failed is launched again, here
                print(f"teeboost: a spare {self._name} enclave failed to launch ({type(exc).__name__}: {exc}); "
                      "launching one now", file=sys.stderr, flush=True)
        if enclave is None:
            enclave = self._ready()
        self.prepare()
        return enclave

    def _ready(self) -> Enclave:
        enclave = self._launch()
        try:
            if self._warm is not None:
                self._warm(enclave)
        except BaseException:
            enclave.close()
            raise
        return enclave

    def _launch_into(self, future: concurrent.futures.Future) -> None:
        try:
            enclave = self._ready()
        except BaseException as exc:  # noqa: BLE001 - reported when the spare is taken
            future.set_exception(exc)
            return
        with self._lock:
            closed = self._closed
        if closed:
            enclave.close()
            future.set_exception(RuntimeError("closed"))
        else:
            future.set_result(enclave)

    def close(self, wait: float = 30.0) -> None:
        """The spares are closed; one still launching is waited for (up to ``wait`` seconds in
        all) and closed, so that no enclave outlives its host's close (a service stopped while its
        spare launched once left the enclave process behind it)."""
        with self._lock:
            self._closed = True
            futures, self._next = self._next, []
        deadline = time.monotonic() + wait
        for future in futures:
            try:
                enclave = future.result(timeout=max(0.0, deadline - time.monotonic()))
            except concurrent.futures.TimeoutError:
                future.add_done_callback(_close_launched)  # closed when it is up, at the latest
                continue
            except Exception:  # noqa: BLE001 - it failed to launch, or closed itself: nothing to close
                continue
            enclave.close()


def _close_launched(future: concurrent.futures.Future) -> None:
    if not future.cancelled() and future.exception() is None:
        future.result().close()
