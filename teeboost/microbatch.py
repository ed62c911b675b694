"""Opportunistic micro-batching: requests that arrive while a batch is being served go together
into the next one.

No request waits for a batch to fill: an idle worker serves the first request at once, and
under load each batch takes everything that queued meanwhile (up to ``max_items``). The cost
paid once per batch (a network round trip, an oblivious scan over every row, an audit line,
a ledger transaction) is then shared by the requests that arrived together.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable, Generic, TypeVar

__all__ = ["MicroBatcher"]

T = TypeVar("T")


class MicroBatcher(Generic[T]):
    """``serve(items) -> results`` (one result, or an exception to raise, per item) runs in
    one worker thread; ``submit`` blocks its caller until its item's result is ready."""

    def __init__(self, serve: Callable[[list[T]], list[Any]], *, name: str, max_items: int = 256,
                 size: Callable[[T], int] = lambda item: 1) -> None:
        self._serve = serve
        self._size = size
        self.max_items = max_items
        self._queue: deque[tuple[T, Future]] = deque()
        self._ready = threading.Condition()
        self._closed = False
        self.batches = 0  # served so far (for metrics)
        self._thread = threading.Thread(target=self._run, name=f"teeboost-{name}-batcher", daemon=True)
        self._thread.start()

    def submit(self, item: T, timeout: float | None = None) -> Any:
        future: Future = Future()
        with self._ready:
            if self._closed:
                raise RuntimeError("the micro-batcher is closed")
            self._queue.append((item, future))
            self._ready.notify()
        return future.result(timeout)

    def _take(self) -> list[tuple[T, Future]]:
        with self._ready:
            while not self._queue and not self._closed:
                self._ready.wait()
            taken, total = [], 0
            while self._queue and (not taken or total + self._size(self._queue[0][0]) <= self.max_items):
                item = self._queue.popleft()
                taken.append(item)
                total += self._size(item[0])
            return taken

    def _run(self) -> None:
        while True:
            taken = self._take()
            if not taken:
                return
            try:
                results = self._serve([item for item, _ in taken])
                if len(results) != len(taken):
                    raise RuntimeError(f"a batch of {len(taken)} got {len(results)} results")
            except BaseException as exc:  # noqa: BLE001 - every caller hears of it
                results = [exc] * len(taken)
            self.batches += 1
            for (_, future), result in zip(taken, results):
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)

    def close(self) -> None:
        with self._ready:
            self._closed = True
            pending = list(self._queue)
            self._queue.clear()
            self._ready.notify_all()
        for _, future in pending:
            future.set_exception(RuntimeError("the micro-batcher closed before this request was served"))
        self._thread.join(timeout=5.0)
