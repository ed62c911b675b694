"""Randomisers computed ahead, in the time the key holder would otherwise spend waiting.

Encryption's cost is its randomiser (h_s^x or h^r), which does not depend on the plaintext.
While passive parties sum ciphertexts, the active party's cores are idle: a background thread
uses its crypto workers then to compute the next tree's randomisers, up to a memory bound.
When the next tree's gradients are known, encrypting each takes only its plaintext factor
((1 + m n) in Paillier, a short table power g^m in Okamoto-Uchiyama) times a randomiser from
the reserve; any shortfall is computed on the spot. Each randomiser is handed
out once and then dropped from the reserve. Filling runs in its own worker processes at the
lowest scheduling priority when there are several cores (``background``), so it takes only
cores that nothing else wants and never slows the party's (or, on a shared machine, a peer's)
online work; online work also pauses it (``paused``).
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Iterator

import numpy as np

from ..errors import ProtocolError
from .pool import CryptoPool

__all__ = ["RandomizerReserve"]


class RandomizerReserve:
    """At most ``limit_bytes`` of ready randomisers for one key's ``CryptoPool``."""

    def __init__(self, pool: CryptoPool, *, limit_bytes: int, exponent_bits: int,
                 background: CryptoPool | None = None) -> None:
        """``pool`` computes shortfalls on the spot; ``background`` (default: ``pool``) fills."""
        self.pool = pool
        self.background = background or pool
        self.capacity = max(0, limit_bytes // pool.width)
        # about 20 ms of one worker's time per batch, whatever the exponent length
        self.batch = max(1, (background or pool).workers) * max(128, 131072 // max(exponent_bits, 1))
        self.ahead_seconds = 0.0  # spent filling in the background (overlaps other work)
        self.on_demand_seconds = 0.0  # spent computing a shortfall while encrypting
        self._stock: list[np.ndarray] = []
        self._count = 0
        self._goal = 0
        self._paused = 0
        self._working = False
        self._error: BaseException | None = None
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def ready(self) -> int:
        return self._count

    def fill(self, target: int) -> None:
        """Start (or keep) filling in the background until ``target`` randomisers, at most the
        capacity, are ready."""
        with self._changed:
            self._goal = min(max(0, target), self.capacity)
            if self._closed or self._count >= self._goal:
                return
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="randomizer-reserve", daemon=True)
                self._thread.start()
            self._changed.notify_all()

    def _run(self) -> None:
        while True:
            with self._changed:
                while self._paused and not self._closed:
                    self._changed.wait()
                if self._closed or self._count >= self._goal:
                    return
                count = min(self.batch, self._goal - self._count)
                self._working = True
            started = time.perf_counter()
            try:
                chunk = self.background.randomizers(count)
            except BaseException as error:  # a dead worker: surfaced by the next take()
                with self._changed:
                    self._error, self._working = error, False
                    self._changed.notify_all()
                return
            with self._changed:
                self.ahead_seconds += time.perf_counter() - started
                self._stock.append(chunk)
                self._count += count
                self._working = False
                self._changed.notify_all()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Run online work without the filling competing for the workers (it resumes after)."""
        with self._changed:
            self._paused += 1
            while self._working:
                self._changed.wait()
        try:
            yield
        finally:
            with self._changed:
                self._paused -= 1
                self._changed.notify_all()

    def take(self, count: int) -> np.ndarray:
        """``count`` randomisers, each never handed out again: ready ones first, the rest
        computed now."""
        with self.paused():
            with self._changed:
                if self._error is not None:
                    error, self._error = self._error, None
                    raise ProtocolError(f"computing randomisers ahead failed: {error}") from error
                ready = np.concatenate(self._stock) if self._stock else np.zeros((0, self.pool.width), np.uint8)
                used, rest = ready[:count], ready[count:]
                self._stock = [rest] if len(rest) else []
                self._count = len(rest)
            shortfall = count - len(used)
            if shortfall:
                started = time.perf_counter()
                used = np.concatenate([used, self.pool.randomizers(shortfall)])
                self.on_demand_seconds += time.perf_counter() - started
            return used

    def close(self) -> None:
        """Stop filling, drop every randomiser still held and stop the background workers."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._stock, self._count = [], 0
        if self.background is not self.pool:
            self.background.close()
