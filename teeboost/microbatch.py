"""Opportunistic micro-batching: requests that arrive while a batch is being served go together
into the next one.

No request waits for a batch to fill, and none is handed to another thread when nothing else is
going on: a caller that finds fewer than ``lanes`` batches under way serves the queue itself
(it leads), its own request included. Callers that arrive meanwhile wait; when a leader is
done, it hands the lead to the first of them, which serves everything queued by then (up to
``max_items``). The cost paid once per batch (a network round trip, an oblivious scan over every
row, an audit line, a ledger transaction) is then shared by the requests that arrived together,
and with ``lanes`` > 1 several batches are under way at once (their round trips overlap).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Callable, Generic, TypeVar

__all__ = ["MicroBatcher"]

T = TypeVar("T")


class _Slot:
    __slots__ = ("item", "event", "result", "finished", "lead")

    def __init__(self, item: Any) -> None:
        self.item = item
        self.event = threading.Event()
        self.result: Any = None
        self.finished = False
        self.lead = False  # this caller must serve a batch (or pass the lead on)


class MicroBatcher(Generic[T]):
    """``serve(items) -> results`` (one result, or an exception to raise, per item) runs in the
    callers' own threads, at most ``lanes`` batches at a time."""

    def __init__(self, serve: Callable[[list[T]], list[Any]], *, name: str, max_items: int = 256,
                 size: Callable[[T], int] = lambda item: 1, lanes: int = 1) -> None:
        self._serve = serve
        self._size = size
        self.name = name
        self.max_items = max_items
        self.lanes = max(1, lanes)
        self._queue: deque[_Slot] = deque()
        self._lock = threading.Lock()
        self._leaders = 0
        self._closed = False

    def submit(self, item: T) -> Any:
        slot = _Slot(item)
        with self._lock:
            if self._closed:
                raise RuntimeError(f"the micro-batcher {self.name!r} is closed")
            self._queue.append(slot)
            if self._leaders < self.lanes:
                self._leaders += 1
                slot.lead = True
        while True:
            if not slot.lead:
                slot.event.wait()
                slot.event.clear()
            if slot.lead:
                self._lead(slot)
            if slot.finished:
                if isinstance(slot.result, BaseException):
                    raise slot.result
                return slot.result

    def _lead(self, slot: _Slot) -> None:
        """Serve one batch from the front of the queue, then keep the lead (own request still
        queued), pass it to the first waiting caller, or give it up (queue empty)."""
        with self._lock:
            taken: list[_Slot] = []
            total = 0
            while self._queue and (not taken or total + self._size(self._queue[0].item) <= self.max_items):
                taken.append(self._queue.popleft())
                total += self._size(taken[-1].item)
        if taken:
            try:
                results = self._serve([s.item for s in taken])
                if len(results) != len(taken):
                    raise RuntimeError(f"a batch of {len(taken)} got {len(results)} results")
            except BaseException as exc:  # noqa: BLE001 - every caller of the batch hears of it
                results = [exc] * len(taken)
            for other, result in zip(taken, results):
                other.result, other.finished = result, True
                if other is not slot:
                    other.event.set()
        with self._lock:
            if slot.finished:
                slot.lead = False
                waiting = next((s for s in self._queue if not s.lead), None)
                if waiting is not None:  # the lead passes on to the first caller still waiting
                    waiting.lead = True
                    waiting.event.set()
                else:
                    self._leaders -= 1

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pending = list(self._queue)
            self._queue.clear()
        for slot in pending:
            slot.result, slot.finished = RuntimeError(f"the micro-batcher {self.name!r} closed before this request "
                                                      "was served"), True
            slot.event.set()
