"""One stage of online scoring run by its own thread, batch after batch: whatever was queued
while the last batch was served goes into the next (up to ``max_items``).

Callers do not wait in threads of their own: each item carries where its result goes, a
``concurrent.futures.Future`` (a blocking caller) or an asyncio future (a request handler on
the event loop, resolved by one loop callback per batch). So a thousand requests a second cost
the service no thread hand-off each, only one per batch, and the event loop never blocks.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections import deque
from typing import Any, Callable

__all__ = ["StageWorker", "deliver"]


def deliver(results: list[tuple[Any, Any]]) -> None:
    """Each (future, result) pair: the result set (an exception raised in its caller). asyncio
    futures are resolved on their loop, one callback per loop for the whole batch."""
    by_loop: dict[Any, list] = {}
    for future, result in results:
        if isinstance(future, asyncio.Future):
            by_loop.setdefault(future.get_loop(), []).append((future, result))
        else:
            _settle(future, result)
    for loop, pairs in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle_all, pairs)
        except RuntimeError:  # the loop closed: nobody waits for these any more
            pass


def _settle_all(pairs: list) -> None:
    for future, result in pairs:
        _settle(future, result)


def _settle(future, result) -> None:
    if future.done():  # cancelled: its caller went away
        return
    try:
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)
    except (asyncio.InvalidStateError, concurrent.futures.InvalidStateError):
        pass  # cancelled between the check and the set
    except Exception as exc:  # noqa: BLE001 - e.g. asyncio refuses StopIteration: the caller still hears
        if not future.done():
            future.set_exception(RuntimeError(f"{type(result).__name__}: {result} ({exc})"))


class StageWorker:
    """``serve(items) -> results`` (one result, or an exception, per item) on this stage's
    thread; ``then(item, result, future)``, if given, decides where a result goes next (e.g.
    the next stage) and returns False when it passed the future on."""

    def __init__(self, serve: Callable[[list], list], *, name: str, max_items: int,
                 size: Callable[[Any], int] = lambda item: 1,
                 then: Callable[[Any, Any, Any], bool] | None = None) -> None:
        self._serve = serve
        self._size = size
        self._then = then
        self.name = name
        self.max_items = max_items
        self._queue: deque[tuple[Any, Any]] = deque()
        self._ready = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, item: Any, future) -> None:
        with self._ready:
            if self._closed:
                raise RuntimeError(f"the {self.name!r} stage is closed")
            self._queue.append((item, future))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self._ready.notify()

    def call(self, item: Any) -> Any:
        """Submit and wait (a caller outside the event loop)."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        self.submit(item, future)
        return future.result()

    def _take(self) -> list[tuple[Any, Any]] | None:
        with self._ready:
            while not self._queue and not self._closed:
                self._ready.wait()
            if self._closed:
                return None
            taken, total = [], 0
            while self._queue and (not taken or total + self._size(self._queue[0][0]) <= self.max_items):
                taken.append(self._queue.popleft())
                total += self._size(taken[-1][0])
            return taken

    def _run(self) -> None:
        while True:
            taken = self._take()
            if taken is None:
                return
            try:
                results = self._serve([item for item, _ in taken])
                if len(results) != len(taken):
                    raise RuntimeError(f"a batch of {len(taken)} got {len(results)} results")
            except BaseException as exc:  # noqa: BLE001 - every caller of the batch hears of it
                results = [exc] * len(taken)
            done = []
            for (item, future), result in zip(taken, results):
                try:
                    if self._then is None or self._then(item, result, future):
                        done.append((future, result))
                except BaseException as exc:  # noqa: BLE001 - e.g. the next stage closed
                    done.append((future, exc))
            try:
                deliver(done)
            except Exception:  # noqa: BLE001 - the stage's thread must outlive one batch's delivery
                for future, _ in done:
                    _settle(future, RuntimeError(f"the {self.name!r} stage could not deliver this result"))

    def close(self) -> None:
        with self._ready:
            self._closed = True
            pending = list(self._queue)
            self._queue.clear()
            self._ready.notify_all()
        deliver([(future, RuntimeError(f"the {self.name!r} stage closed before this request was served"))
                 for _, future in pending])
