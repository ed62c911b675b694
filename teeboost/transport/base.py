"""The ``Channel`` every protocol talks through, and the traffic it counts.

The active party drives: it sends a request to a passive party and waits for the reply.
Implementations (in-memory, gRPC) only move frames; encoding, byte counting, transcript
recording and remote-error handling happen here, once, for all of them.
"""

from __future__ import annotations

import sys
import threading
from abc import ABC, abstractmethod
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import ProtocolError, TeeboostError
from ..workers import WorkerError
from . import serde
from .transcript import RECEIVED, SENT, TranscriptWriter

__all__ = ["Channel", "TrafficCounter", "ErrorReply", "answer_frame", "ACTIVE_TO_PASSIVE", "PASSIVE_TO_ACTIVE"]

ACTIVE_TO_PASSIVE = "active_to_passive"
PASSIVE_TO_ACTIVE = "passive_to_active"


@serde.message
@dataclass(frozen=True)
class ErrorReply:
    """A passive party refused a request; ``kind`` is the error class name."""

    kind: str
    detail: str


class TrafficCounter:
    """Bytes and message counts by direction, message type and party, and round trips: each
    exchange with one or more passive parties at once is one, as a wide-area link feels it
    (its latency is paid once per exchange, whatever the bytes)."""

    def __init__(self) -> None:
        self.bytes: dict[tuple[str, str, int], int] = defaultdict(int)
        self.count: dict[tuple[str, str, int], int] = defaultdict(int)
        self.round_trips = 0

    def add(self, direction: str, type_name: str, party: int, nbytes: int) -> None:
        self.bytes[(direction, type_name, party)] += nbytes
        self.count[(direction, type_name, party)] += 1

    def by_direction(self) -> dict[str, int]:
        out = {ACTIVE_TO_PASSIVE: 0, PASSIVE_TO_ACTIVE: 0}
        for (direction, _, _), n in self.bytes.items():
            out[direction] += n
        return out

    def by_type(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for (direction, type_name, _), n in sorted(self.bytes.items()):
            out.setdefault(type_name, {}).setdefault(direction, 0)
            out[type_name][direction] += n
        return out

    @property
    def total(self) -> int:
        return sum(self.bytes.values())

    @property
    def messages(self) -> int:
        return sum(self.count.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "bytes_total": self.total,
            "bytes": self.by_direction(),
            "bytes_by_message": self.by_type(),
            "messages": self.messages,
            "round_trips": self.round_trips,
        }


class Channel(ABC):
    """The active party's connection to all passive parties."""

    def __init__(self) -> None:
        self.traffic = TrafficCounter()
        self.transcript: TranscriptWriter | None = None
        self._lock = threading.Lock()
        self._background: ThreadPoolExecutor | None = None

    @property
    @abstractmethod
    def parties(self) -> list[int]:
        """Indices of the passive parties reachable through this channel (1, 2, ...)."""

    @abstractmethod
    def _exchange(self, party: int, frame: bytes) -> bytes:
        """Deliver one request frame and return the reply frame."""

    def _exchange_all(self, frames: dict[int, bytes]) -> dict[int, bytes]:
        """Several parties at once; transports that can overlap requests override this."""
        return {party: self._exchange(party, frame) for party, frame in frames.items()}

    def request(self, party: int, msg: Any) -> Any:
        return self.request_all({party: msg})[party]

    def submit_all(self, messages: dict[int, Any]) -> "Future[dict[int, Any]]":
        """``request_all`` in the background, so the active party can work on its own
        columns while the passive parties work on theirs."""
        if self._background is None:
            self._background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="teeboost-channel")
        return self._background.submit(self.request_all, messages)

    def request_all(self, messages: dict[int, Any]) -> dict[int, Any]:
        with self._lock:  # one exchange at a time keeps counters and transcript ordered
            return self._request_all(messages)

    def _request_all(self, messages: dict[int, Any]) -> dict[int, Any]:
        frames = {}
        for party, msg in messages.items():
            if party not in self.parties:
                raise ProtocolError(f"no passive party {party} on this channel")
            frame = serde.encode(msg)
            self.traffic.add(ACTIVE_TO_PASSIVE, type(msg).__name__, party, len(frame))
            if self.transcript is not None:
                self.transcript.record(SENT, party, frame)
            frames[party] = frame
        self.traffic.round_trips += 1
        replies = {}
        for party, frame in self._exchange_all(frames).items():
            reply = serde.decode(frame)
            self.traffic.add(PASSIVE_TO_ACTIVE, type(reply).__name__, party, len(frame))
            if self.transcript is not None:
                self.transcript.record(RECEIVED, party, frame)
            if isinstance(reply, ErrorReply):
                raise ProtocolError(f"passive party {party} refused the request: {reply.kind}: {reply.detail}")
            replies[party] = reply
        return replies

    def close(self) -> None:
        """Release transport resources."""
        if self._background is not None:
            self._background.shutdown(wait=True)
            self._background = None


def answer_frame(handler: Callable[[Any], Any], frame: bytes,
                 on_undecodable: Callable[[Exception], None] | None = None) -> bytes:
    """Passive side of one exchange: decode, handle, encode; errors become ``ErrorReply``.
    ``on_undecodable`` hears of frames refused before any handler saw them (for the audit log)."""
    try:
        msg = serde.decode(frame)
    except TeeboostError as exc:
        if on_undecodable is not None:
            on_undecodable(exc)
        return serde.encode(ErrorReply(type(exc).__name__, str(exc)))
    try:
        reply = handler(msg)
    except TeeboostError as exc:
        if _from_own_compute(exc):  # this party's machines, workers and cluster are its own business
            print(f"teeboost: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            reply = ErrorReply(type(exc).__name__, "this party's compute workers failed (its operator has the "
                                                    "details); it can resume from its checkpoint")
        else:
            reply = ErrorReply(type(exc).__name__, str(exc))
    return serde.encode(reply)


def _from_own_compute(error: BaseException) -> bool:
    """Was ``error`` caused by this party's worker processes or Ray cluster failing?"""
    seen = 0
    while error is not None and seen < 16:
        if isinstance(error, WorkerError):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False
