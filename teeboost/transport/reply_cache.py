"""What a passive party's server remembers per client session, so that a retried request gets
the same reply and a replayed one is refused (``teeboost.transport.grpc_transport``)."""

from __future__ import annotations

import threading
from collections import OrderedDict

__all__ = ["ReplyCache"]


class ReplyCache:
    """Per session: the last sequence number served, its request digest and its reply.

    At most ``sessions`` sessions are remembered (least recently used forgotten first: a
    forgotten session's next request is refused as "unknown session", as after a restart),
    and the replies kept add up to at most ``reply_bytes``: older sessions' replies are
    dropped first (their sequence numbers stay, so the session can go on; only a retry of
    that one request can no longer be answered). The newest session's reply is always kept."""

    def __init__(self, sessions: int = 1024, reply_bytes: int = 256 << 20) -> None:
        self.sessions = max(1, sessions)
        self.reply_bytes = reply_bytes
        self._entries: OrderedDict[bytes, list] = OrderedDict()  # session -> [sequence, digest, reply|None]
        self._bytes = 0
        self._guard = threading.Lock()  # the main lane and the online lane share the cache

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, session: bytes) -> tuple[int, bytes, bytes | None] | None:
        with self._guard:
            return self._get(session)

    def _get(self, session: bytes) -> tuple[int, bytes, bytes | None] | None:
        entry = self._entries.get(session)
        if entry is None:
            return None
        self._entries.move_to_end(session)
        return entry[0], entry[1], entry[2]

    def put(self, session: bytes, sequence: int, digest: bytes, reply: bytes) -> None:
        with self._guard:
            self._put(session, sequence, digest, reply)

    def _put(self, session: bytes, sequence: int, digest: bytes, reply: bytes) -> None:
        old = self._entries.pop(session, None)
        if old is not None and old[2] is not None:
            self._bytes -= len(old[2])
        self._entries[session] = [sequence, digest, reply]
        self._bytes += len(reply)
        while len(self._entries) > self.sessions:
            _, dropped = self._entries.popitem(last=False)
            if dropped[2] is not None:
                self._bytes -= len(dropped[2])
        if self._bytes > self.reply_bytes:
            for key, entry in self._entries.items():  # oldest first, never the newest
                if self._bytes <= self.reply_bytes or key == session:
                    break
                if entry[2] is not None:
                    self._bytes -= len(entry[2])
                    entry[2] = None
