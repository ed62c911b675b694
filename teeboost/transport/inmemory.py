"""All parties in one process: frames still go through serde, so bytes are counted exactly
as they would be on a network and handlers see only decoded copies."""

from __future__ import annotations

from typing import Any, Callable

from .base import Channel, answer_frame

__all__ = ["InMemoryChannel"]


class InMemoryChannel(Channel):
    def __init__(self, handlers: dict[int, Callable[[Any], Any]]) -> None:
        super().__init__()
        self._handlers = dict(handlers)

    @property
    def parties(self) -> list[int]:
        return sorted(self._handlers)

    def _exchange(self, party: int, frame: bytes) -> bytes:
        return answer_frame(self._handlers[party], frame)
