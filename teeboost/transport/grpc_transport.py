"""gRPC transport between party processes or hosts, mutual TLS by default.

Implements the same ``Channel`` as the in-memory transport, so party code does not know
which it runs on. One RPC, ``teeboost.v1.Party/Exchange``, carries a serde frame in a protobuf
envelope (large arrays stay raw bytes inside the frame). The server checks that the client's
certificate names the expected party and matches the envelope's sender, and refuses replayed
or out-of-order requests within a session. Message sizes are limited deliberately
(``max_message_bytes``, 1 GiB by default: a 1e6-row Paillier gradient message is ~512 MB);
every call has a timeout. A call that fails because the peer is unreachable is retried with
the same envelope: the server answers a repeat of the request it last served from its reply
cache instead of running it twice, so every retry is safe. A peer still unreachable after the
retries, or one that restarted (it no longer knows the session), becomes ``PeerUnavailable``
naming it. Plaintext transport exists only behind ``insecure=True``, which says so.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

import grpc

from ..errors import ConfigError, PeerUnavailable, ProtocolError
from .base import Channel, answer_frame
from .proto.envelope_pb2 import Envelope
from .tls import TlsFiles, certificate_fingerprint

__all__ = ["Peer", "GrpcChannel", "PartyServer", "DEFAULT_MAX_MESSAGE_BYTES"]

DEFAULT_MAX_MESSAGE_BYTES = 1 << 30
_METHOD = "/teeboost.v1.Party/Exchange"
_VERSION = 1


@dataclass(frozen=True)
class Peer:
    index: int
    name: str
    address: str


def _options(max_message_bytes: int) -> list[tuple[str, Any]]:
    return [("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.keepalive_time_ms", 20_000), ("grpc.keepalive_timeout_ms", 10_000)]


def insecure_warning(role: str) -> None:
    print(f"teeboost: WARNING: {role} runs WITHOUT TLS (--insecure): traffic is readable and "
          "parties are not authenticated", file=sys.stderr)


class GrpcChannel(Channel):
    """The active party's connections to every passive party."""

    def __init__(self, peers: list[Peer], *, sender: str, tls: TlsFiles | None, insecure: bool = False,
                 timeout: float = 600.0, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 retries: int = 3, retry_delay: float = 0.5) -> None:
        super().__init__()
        if tls is None and not insecure:
            raise ConfigError("mutual TLS needs ca, cert and key files (or --insecure, which disables it)")
        if insecure:
            insecure_warning(sender)
        self.sender = sender
        self.timeout = timeout
        self.retries = retries
        self.retry_delay = retry_delay
        self._peers = {p.index: p for p in peers}
        self._session = os.urandom(16)
        self._sequence = {p.index: 0 for p in peers}  # per peer: each server sees 1, 2, 3, ...
        self._seq_lock = threading.Lock()
        self._channels: dict[int, grpc.Channel] = {}
        self._calls: dict[int, Any] = {}
        credentials = None
        if not insecure:
            ca, cert, key = tls.read()
            credentials = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
        for peer in peers:
            options = _options(max_message_bytes)
            if credentials is not None:
                options.append(("grpc.ssl_target_name_override", peer.name))
                channel = grpc.secure_channel(peer.address, credentials, options=options)
            else:
                channel = grpc.insecure_channel(peer.address, options=options)
            self._channels[peer.index] = channel
            self._calls[peer.index] = channel.unary_unary(
                _METHOD, request_serializer=Envelope.SerializeToString, response_deserializer=Envelope.FromString)

    @property
    def parties(self) -> list[int]:
        return sorted(self._peers)

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Block until every peer accepts a connection, or name the one that does not."""
        for index, channel in self._channels.items():
            try:
                grpc.channel_ready_future(channel).result(timeout=timeout)
            except grpc.FutureTimeoutError:
                peer = self._peers[index]
                raise PeerUnavailable(f"passive party {index} ({peer.name}) at {peer.address} is unreachable "
                                    f"after {timeout:g} s (not running, wrong address, or TLS refused)") from None

    def _envelope(self, party: int, frame: bytes) -> Envelope:
        with self._seq_lock:
            self._sequence[party] += 1
            return Envelope(version=_VERSION, sender=self.sender, sequence=self._sequence[party], frame=frame,
                            session=self._session)

    def _error(self, index: int, exc: grpc.RpcError) -> ProtocolError:
        peer = self._peers[index]
        code = exc.code() if hasattr(exc, "code") else None
        detail = exc.details() if hasattr(exc, "details") else str(exc)
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return ProtocolError(f"passive party {index} ({peer.name}) at {peer.address} did not answer "
                                 f"within {self.timeout:g} s")
        if code == grpc.StatusCode.UNAVAILABLE:
            return PeerUnavailable(f"passive party {index} ({peer.name}) at {peer.address} is unreachable or "
                                   f"went away: {detail}")
        if code == grpc.StatusCode.FAILED_PRECONDITION:
            return PeerUnavailable(f"passive party {index} ({peer.name}) at {peer.address} restarted: {detail}")
        return ProtocolError(f"passive party {index} ({peer.name}) at {peer.address} failed: "
                             f"{code.name if code else 'error'}: {detail}")

    def _check(self, index: int, request: Envelope, reply: Envelope) -> bytes:
        peer = self._peers[index]
        if reply.version != _VERSION or reply.sender != peer.name or reply.sequence != request.sequence \
                or reply.session != request.session:
            raise ProtocolError(f"passive party {index} ({peer.name}) sent a reply that does not match the request")
        return reply.frame

    def _exchange(self, party: int, frame: bytes) -> bytes:
        return self._exchange_all({party: frame})[party]

    def _exchange_all(self, frames: dict[int, bytes]) -> dict[int, bytes]:
        requests = {p: self._envelope(p, f) for p, f in frames.items()}
        futures = {p: self._calls[p].future(r, timeout=self.timeout) for p, r in requests.items()}
        replies = {}
        for party, future in futures.items():
            try:
                replies[party] = self._check(party, requests[party], self._result(party, requests[party], future))
            except grpc.RpcError as exc:
                for other in futures.values():
                    other.cancel()
                raise self._error(party, exc) from None
        return replies

    def _result(self, party: int, request: Envelope, future: Any) -> Envelope:
        """The reply, resending the identical envelope while the peer is unreachable (the
        server's reply cache makes a repeat of an already served request harmless)."""
        for attempt in range(self.retries + 1):
            try:
                return future.result()
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.UNAVAILABLE or attempt == self.retries:
                    raise
            time.sleep(self.retry_delay * 2**attempt)
            future = self._calls[party].future(request, timeout=self.timeout)
        raise AssertionError("unreachable")

    def close(self) -> None:
        super().close()
        for channel in self._channels.values():
            channel.close()


class PartyServer:
    """A passive party's gRPC endpoint: one request at a time, from the expected client.

    Per session it remembers the last sequence number, a digest of that request and its
    reply: the same request again (a client retry) gets the same reply without running twice;
    an older or different one with a used number is a replay and is refused; a session it has
    never seen must start at 1 (otherwise this server restarted mid-session and says so)."""

    def __init__(self, handler: Callable[[Any], Any], *, name: str, listen: str, tls: TlsFiles | None,
                 insecure: bool = False, client_name: str = "active",
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 on_undecodable: Callable[[Exception], None] | None = None) -> None:
        if tls is None and not insecure:
            raise ConfigError("mutual TLS needs ca, cert and key files (or --insecure, which disables it)")
        if insecure:
            insecure_warning(name)
        self.name = name
        self.client_name = client_name
        self.insecure = insecure
        self._handler = handler
        self._on_undecodable = on_undecodable
        self.current_peer = ""  # certificate fingerprint of the client whose request is being handled
        self._lock = threading.Lock()
        self._last: dict[bytes, tuple[int, bytes, bytes]] = {}  # session -> (sequence, digest, reply)
        self._stopped = threading.Event()
        self._server = grpc.server(ThreadPoolExecutor(max_workers=4), options=_options(max_message_bytes))
        rpc = grpc.unary_unary_rpc_method_handler(self._exchange, request_deserializer=Envelope.FromString,
                                                  response_serializer=Envelope.SerializeToString)
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "teeboost.v1.Party", {"Exchange": rpc}),))
        if insecure:
            self.port = self._server.add_insecure_port(listen)
        else:
            ca, cert, key = tls.read()
            credentials = grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)
            self.port = self._server.add_secure_port(listen, credentials)
        if not self.port:
            raise ConfigError(f"party {name!r} cannot listen on {listen!r}")

    def _exchange(self, request: Envelope, context: grpc.ServicerContext) -> Envelope:
        peer = "no certificate (insecure)"
        if not self.insecure:
            auth = context.auth_context()
            names = auth.get("x509_common_name", [])
            if [n.decode() for n in names] != [self.client_name]:
                context.abort(grpc.StatusCode.PERMISSION_DENIED, f"only {self.client_name!r} may call {self.name!r}")
            certs = auth.get("x509_pem_cert", [])
            peer = certificate_fingerprint(certs[0]) if certs else "unknown certificate"
        if request.version != _VERSION or request.sender != self.client_name:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "unexpected sender or envelope version")
        digest = hashlib.sha256(request.frame).digest()
        with self._lock:
            last = self._last.get(request.session)
            if last is None and request.sequence != 1:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                              f"unknown session at request {request.sequence}: {self.name!r} restarted")
            if last is not None and request.sequence == last[0] and digest == last[1]:
                reply = last[2]  # a retry of the request just served
            elif last is not None and request.sequence != last[0] + 1:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "replayed or out-of-order request")
            else:
                self.current_peer = peer
                reply = answer_frame(self._handler, request.frame, self._on_undecodable)
                self._last[request.session] = (request.sequence, digest, reply)
        return Envelope(version=_VERSION, sender=self.name, sequence=request.sequence, frame=reply,
                        session=request.session)

    def start(self) -> "PartyServer":
        self._server.start()
        return self

    def request_stop(self) -> None:
        """Stop after the current reply has been sent (used by the Shutdown message)."""
        self._stopped.set()
        threading.Timer(0.2, lambda: self._server.stop(grace=1.0)).start()

    def wait(self) -> None:
        self._server.wait_for_termination()

    def stop(self) -> None:
        self._server.stop(grace=None)
