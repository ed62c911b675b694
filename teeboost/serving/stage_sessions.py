"""The transport sessions of one stage of online scoring (the lookup, or the scoring), which
only that stage opens and closes.

Closing a session another thread is using cancels its call mid-way (grpc answers CANCELLED),
which would turn a request into a refusal it never got. So another thread (the other stage,
a health check) only marks a stage's sessions stale; the stage replaces them when its next
batch begins, when nothing of its own is in flight on them.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from ..transport.grpc_transport import GrpcChannel

__all__ = ["StageSessions"]


class StageSessions:
    """``short()``: the stage's requests (the service's ``[serving] timeout``); ``long()``: what
    may take long once (an id set fetch, a strict session's attestation and table load)."""

    def __init__(self, config: Callable[[], Any], *, timeout: float, setup_timeout: float) -> None:
        """``config()``: the party's config when a session is opened (peers' addresses may change)."""
        self.config = config
        self.timeout = timeout
        self.setup_timeout = setup_timeout
        self._lock = threading.Lock()
        self._short: GrpcChannel | None = None
        self._long: GrpcChannel | None = None
        self._stale = False

    def begin(self) -> bool:
        """At the start of each of the stage's batches: replace stale sessions (-> True if it did)."""
        with self._lock:
            if not self._stale:
                return False
            old, self._short, self._long, self._stale = [self._short, self._long], None, None, False
        for channel in old:
            if channel is not None:
                channel.close()
        return True

    def stale(self) -> None:
        """The peer went away or a session is in doubt: the stage opens new ones at its next batch."""
        with self._lock:
            self._stale = True

    @property
    def is_stale(self) -> bool:
        with self._lock:
            return self._stale

    def short(self) -> GrpcChannel:
        with self._lock:
            if self._short is None:
                self._short = self._open(self.timeout)
            return self._short

    def long(self) -> GrpcChannel:
        with self._lock:
            if self._long is None:
                self._long = self._open(self.setup_timeout)
            return self._long

    def dedicated(self) -> GrpcChannel:
        """A transport session with ``long()``'s timeout for one caller alone, who closes it
        (an enclave session's attestation: the passive party keys a handshake by its session)."""
        return self._open(self.setup_timeout)

    def _open(self, timeout: float) -> GrpcChannel:
        config = self.config()
        return GrpcChannel(config.peers, sender=config.name, tls=config.tls, insecure=config.insecure, timeout=timeout,
                           max_message_bytes=config.max_message_bytes, retries=1, retry_delay=0.05, online=True)

    def close(self) -> None:
        with self._lock:
            old, self._short, self._long = [self._short, self._long], None, None
        for channel in old:
            if channel is not None:
                channel.close()
