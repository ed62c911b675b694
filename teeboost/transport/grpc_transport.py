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
retries, one that restarted (it no longer knows the session), or a channel closed under a call
becomes ``PeerUnavailable`` naming it. Plaintext transport only behind ``insecure=True``.

The server (``PartyServer``) is built to hold under load and attack: it runs on ``grpc.aio``
(an open RPC is a coroutine, not a thread), checks the caller's certificate when an RPC's
headers arrive (before its body is read: a frame from a peer that may not call is never
received), runs the handler in one worker thread, caps the allowed caller's RPCs in flight,
times out TLS handshakes (5 s), request bodies and idle connections, enforces keepalive,
bounds its reply cache, gives large messages' memory back to the OS (``malloc_trim``) and
reports every transport-level refusal to ``on_refused``.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import sys
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

import grpc
import grpc.aio

from ..errors import ConfigError, PeerUnavailable, ProtocolError
from .base import Channel, answer_frame
from .reply_cache import ReplyCache as _ReplyCache
from .proto.envelope_pb2 import Envelope
from .process_resources import raise_open_file_limit, release_memory
from .tls import TlsFiles, certificate_fingerprint

__all__ = ["Peer", "GrpcChannel", "PartyServer", "DEFAULT_MAX_MESSAGE_BYTES"]

DEFAULT_MAX_MESSAGE_BYTES = 1 << 30
_METHOD = "/teeboost.v1.Party/Exchange"
_RETRIED = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)
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
                 retries: int = 3, retry_delay: float = 0.5, online: bool = False) -> None:
        """``online``: this channel's session is an online scoring session, served by each
        passive party's online lane."""
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
        self._session = (ONLINE_SESSION_PREFIX + os.urandom(16 - len(ONLINE_SESSION_PREFIX)) if online
                         else os.urandom(16))
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
        if len(requests) == 1:  # one peer: a blocking call, answered in this thread (no hand-off)
            (party, request), = requests.items()
            try:
                return {party: self._check(party, request, self._blocking(party, request))}
            except grpc.RpcError as exc:
                raise self._error(party, exc) from None
            except ValueError:  # grpc: "Cannot invoke RPC on closed channel!"
                raise self._closed(party) from None
        futures = {p: self._future(p, r) for p, r in requests.items()}
        replies = {}
        for party, future in futures.items():
            try:
                replies[party] = self._check(party, requests[party], self._result(party, requests[party], future))
            except grpc.RpcError as exc:
                for other in futures.values():
                    other.cancel()
                raise self._error(party, exc) from None
        return replies

    def _future(self, party: int, request: Envelope) -> Any:
        try:
            return self._calls[party].future(request, timeout=self.timeout)
        except ValueError:  # grpc: "Cannot invoke RPC on closed channel!"
            raise self._closed(party) from None

    def _closed(self, i: int) -> PeerUnavailable:
        return PeerUnavailable(f"passive party {i} ({self._peers[i].name}) at {self._peers[i].address}: the "
                               "connection was closed while a request was on its way")

    def _blocking(self, party: int, request: Envelope) -> Envelope:
        """``_result``'s retries, for one peer without a future."""
        for attempt in range(self.retries + 1):
            try:
                return self._calls[party](request, timeout=self.timeout)
            except grpc.RpcError as exc:
                if exc.code() not in _RETRIED or attempt == self.retries:
                    raise
            time.sleep(self.retry_delay * 2**attempt)
        raise AssertionError("unreachable")

    def _result(self, party: int, request: Envelope, future: Any) -> Envelope:
        """The reply, resending the identical envelope while the peer is unreachable or has as
        many requests in flight as it takes (the server's reply cache makes a repeat of an
        already served request harmless; a request refused for load was never run)."""
        for attempt in range(self.retries + 1):
            try:
                return future.result()
            except grpc.RpcError as exc:
                if exc.code() not in _RETRIED or attempt == self.retries:
                    raise
            time.sleep(self.retry_delay * 2**attempt)
            future = self._future(party, request)
        raise AssertionError("unreachable")

    def close(self) -> None:
        super().close()
        for channel in self._channels.values():
            channel.close()


class _Refusal(Exception):
    """A request refused at the transport level (before or instead of the handler)."""

    def __init__(self, code: grpc.StatusCode, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


@functools.lru_cache(maxsize=64)
def _fingerprint(pem: bytes) -> str:
    try:
        return certificate_fingerprint(pem)
    except ValueError:
        return "unreadable certificate"


#: Sessions whose 16-byte id starts with this are online scoring sessions (``GrpcChannel(online=True)``).
ONLINE_SESSION_PREFIX = b"online"
_serving = threading.local()  # the online session whose request this thread is serving


def current_online_session() -> bytes:
    """In an online handler: the transport session of the request being served (so a
    handler can tell apart clients that speak at once)."""
    return getattr(_serving, "session", b"")


def current_online_peer() -> str:
    """In an online handler: the certificate fingerprint of the client being served."""
    return getattr(_serving, "peer", "")
_ONLINE_MAX_BYTES = 4 << 20  # the online lane takes requests up to this size
_LARGE = 8 << 20  # requests or replies above this are followed by malloc_trim


class PartyServer:
    """A passive party's gRPC endpoint: one request at a time, from the expected client.

    Per session it remembers the last sequence number, a digest of that request and its
    reply: the same request again (a client retry) gets the same reply without running twice;
    an older or different one with a used number is a replay and is refused; a session it has
    never seen must start at 1 (otherwise this server restarted mid-session and says so).

    The server runs on ``grpc.aio`` in its own thread: an open RPC costs a coroutine, not a
    thread. The caller's certificate is checked when the RPC's headers arrive, before its
    body is read, so a peer that may not call is refused without its frame being received;
    silent or slow streams never hold the handler, which runs in one worker thread, one
    request at a time. Authorized RPCs in flight are capped (``max_concurrent_rpcs``) and
    must deliver their body within ``request_timeout``; TLS handshakes must finish within
    ``handshake_timeout``; connections without RPCs are closed after ``idle_timeout``, and
    dead ones by keepalive pings.

    ``on_refused(reason, peer, address)`` hears of every refusal at the transport level:
    ``reason`` starts with a keyword (``certificate``, ``sender``, ``replay``,
    ``unknown-session``, ``busy``, ``timeout``, ``malformed``, ``evicted``) followed by
    ``": "`` and details; ``peer`` is the client certificate's fingerprint (``sha256:...``)
    when known; ``address`` is gRPC's ``context.peer()`` (e.g. ``ipv4:10.0.0.5:51234``). It
    is called from the server's event-loop thread or its handler thread, so it must be
    thread-safe and cheap; whatever it raises is printed and ignored. A peer that may not call
    decides how often it is called: aggregate or rate-limit before writing each one to disk."""

    def __init__(self, handler: Callable[[Any], Any], *, name: str, listen: str, tls: TlsFiles | None,
                 insecure: bool = False, client_name: str = "active",
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 on_undecodable: Callable[[Exception], None] | None = None,
                 on_refused: Callable[[str, str, str], None] | None = None,
                 max_concurrent_rpcs: int = 64, request_timeout: float = 600.0,
                 handshake_timeout: float = 5.0, idle_timeout: float = 30.0,
                 max_streams_per_connection: int = 32, cached_sessions: int = 1024,
                 cached_reply_bytes: int = 256 << 20, online_handler: Callable[[Any], Any] | None = None,
                 online_threads: int = 4) -> None:
        if tls is None and not insecure:
            raise ConfigError("mutual TLS needs ca, cert and key files (or --insecure, which disables it)")
        if insecure:
            insecure_warning(name)
        self.name = name
        self.client_name = client_name
        self.insecure = insecure
        self.max_message_bytes = max_message_bytes
        self.max_concurrent_rpcs = max_concurrent_rpcs
        self.request_timeout = request_timeout
        self.open_file_limit: tuple[int, int] | None = None  # (before, after) raising it at start()
        self._handler = handler
        self._on_undecodable = on_undecodable
        self._on_refused = on_refused
        self.current_peer = ""  # certificate fingerprint of the client whose request is being handled
        self._lock = threading.Lock()
        self._last = _ReplyCache(cached_sessions, cached_reply_bytes)
        self._stopped = threading.Event()
        self._terminated = threading.Event()
        self._trimming = False
        self._in_flight = 0  # authorized RPCs between headers and reply (event-loop thread only)
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"teeboost-{name}-handler")
        # the online lane: sessions named ONLINE_SESSION_PREFIX... are served by ``online_handler``
        # in their own threads, one request at a time per session, never behind the main lane
        self._online_handler = online_handler
        self._online_worker = ThreadPoolExecutor(max_workers=max(1, online_threads),
                                                 thread_name_prefix=f"teeboost-{name}-online")
        self._session_locks: OrderedDict[bytes, threading.Lock] = OrderedDict()
        self._session_locks_guard = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name=f"teeboost-{name}-grpc", daemon=True)
        self._thread.start()
        options = _options(max_message_bytes) + [
            ("grpc.server_handshake_timeout_ms", int(handshake_timeout * 1000)),
            ("grpc.max_connection_idle_ms", int(idle_timeout * 1000)),
            ("grpc.max_concurrent_streams", max_streams_per_connection),
            # the client pings every 20 s while a call is open; allow that, and no more
            ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
            ("grpc.http2.max_ping_strikes", 2),
            ("grpc.keepalive_permit_without_calls", 0),
            ("grpc.so_reuseport", 0),
        ]
        credentials = None
        if not insecure:
            ca, cert, key = tls.read()
            credentials = grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)
        try:
            self._server, self.port = self._call(self._build(options, listen, credentials))
        except RuntimeError as exc:
            self._close_loop()
            raise ConfigError(f"party {name!r} cannot listen on {listen!r}: {exc}") from None
        if not self.port:
            self._close_loop()
            raise ConfigError(f"party {name!r} cannot listen on {listen!r}")

    # --- the event loop thread ---

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def _call(self, coroutine, timeout: float | None = 30.0):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    async def _build(self, options, listen: str, credentials) -> tuple[Any, int]:
        # stream-unary on the server (the wire is the same as the client's unary call): the
        # handler starts when the headers arrive, before the body is read
        rpc = grpc.stream_unary_rpc_method_handler(self._rpc, request_deserializer=None, response_serializer=None)
        # grpc's own cap counts every RPC, also those refused at once; ours counts authorized ones
        server = grpc.aio.server(options=options, maximum_concurrent_rpcs=max(256, 4 * self.max_concurrent_rpcs))
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("teeboost.v1.Party",
                                                                              {"Exchange": rpc}),))
        port = server.add_insecure_port(listen) if credentials is None else server.add_secure_port(listen, credentials)
        return server, port

    async def _rpc(self, requests: Any, context: grpc.aio.ServicerContext) -> bytes:
        address = _address(context)
        peer = "unknown"
        try:
            peer = self._authorize(context, address)
            if self._in_flight >= self.max_concurrent_rpcs:
                self._refuse(grpc.StatusCode.RESOURCE_EXHAUSTED,
                             f"busy: {self.max_concurrent_rpcs} requests are already in flight", peer, address,
                             detail=f"{self.name!r} refused the request: {self.max_concurrent_rpcs} requests are "
                                    "already in flight; try again later")
            self._in_flight += 1
            try:
                try:
                    body = await asyncio.wait_for(context.read(), self.request_timeout)
                except asyncio.TimeoutError:
                    self._refuse(grpc.StatusCode.DEADLINE_EXCEEDED,
                                 f"timeout: no request within {self.request_timeout:g} s", peer, address)
                if not isinstance(body, bytes):  # EOF: the client closed without a request
                    self._refuse(grpc.StatusCode.INVALID_ARGUMENT, "malformed: no request", peer, address)
                if len(body) > _LARGE:  # its memory (and the reply's) goes back to the OS once sent
                    context.add_done_callback(self._release_later)
                online = self._online_handler is not None and _online_session(body)
                reply = await self._loop.run_in_executor(self._online_worker if online else self._worker,
                                                         self._serve_bytes, body, peer, address)
                if len(reply) > _LARGE and len(body) <= _LARGE:
                    context.add_done_callback(self._release_later)
                return reply
            finally:
                self._in_flight -= 1
        except _Refusal as refusal:
            # what gRPC buffered of a refused request's body is freed with the call: give it back
            context.add_done_callback(self._release_later)
            await context.abort(refusal.code, refusal.detail)

    def _release_later(self, _context: Any = None) -> None:
        """malloc_trim off the event loop: one at a time, at most one every 0.2 s (a flood of
        refusals costs no more than that)."""
        if not self._trimming:
            self._trimming = True
            self._loop.call_later(0.2, lambda: self._loop.run_in_executor(None, self._release))

    def _release(self) -> None:
        try:
            release_memory()
        finally:
            self._trimming = False

    # --- checks shared by the gRPC handler and the synchronous entry point ---

    def _refuse(self, code: grpc.StatusCode, reason: str, peer: str, address: str, *,
                detail: str | None = None) -> None:
        if self._on_refused is not None:
            try:
                self._on_refused(reason, peer, address)
            except Exception as exc:  # noqa: BLE001 - a refusal is never lost to its reporter
                print(f"teeboost: party {self.name}: on_refused failed: {type(exc).__name__}: {exc}",
                      file=sys.stderr, flush=True)
        raise _Refusal(code, detail or reason.split(": ", 1)[-1])

    def _authorize(self, context: Any, address: str) -> str:
        """The caller's certificate fingerprint, if its certificate names the one allowed caller."""
        if self.insecure:
            return "no certificate (insecure)"
        auth = context.auth_context()
        certs = auth.get("x509_pem_cert", [])
        peer = _fingerprint(bytes(certs[0])) if certs else "unknown certificate"
        names = [n.decode(errors="replace") for n in auth.get("x509_common_name", [])]
        if names != [self.client_name]:
            self._refuse(grpc.StatusCode.PERMISSION_DENIED,
                         f"certificate: only {self.client_name!r} may call {self.name!r} (the certificate names "
                         f"{', '.join(map(repr, names)) or 'nobody'})", peer, address)
        return peer

    def _serve_bytes(self, body: bytes, peer: str, address: str) -> bytes:
        """In the worker thread: one request's bytes to its reply's bytes."""
        try:
            request = Envelope.FromString(body)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError and friends
            self._refuse(grpc.StatusCode.INVALID_ARGUMENT, "malformed: the request is not an envelope", peer, address)
        return self._serve(request, peer, address).SerializeToString()

    def _serve(self, request: Envelope, peer: str, address: str) -> Envelope:
        if request.version != _VERSION or request.sender != self.client_name:
            self._refuse(grpc.StatusCode.PERMISSION_DENIED, "sender: unexpected sender or envelope version",
                         peer, address)
        digest = hashlib.sha256(request.frame).digest()
        online = self._online_handler is not None and request.session.startswith(ONLINE_SESSION_PREFIX)
        with self._session_lock(request.session) if online else self._lock:
            last = self._last.get(request.session)
            if last is None and request.sequence != 1:
                self._refuse(grpc.StatusCode.FAILED_PRECONDITION,
                             f"unknown-session: unknown session at request {request.sequence}: {self.name!r} "
                             "restarted", peer, address)
            if last is not None and request.sequence == last[0] and digest == last[1]:
                if last[2] is None:
                    self._refuse(grpc.StatusCode.FAILED_PRECONDITION,
                                 f"evicted: the reply to request {request.sequence} of this session is no longer "
                                 f"kept by {self.name!r}", peer, address)
                reply = last[2]  # a retry of the request just served
            elif last is not None and request.sequence != last[0] + 1:
                self._refuse(grpc.StatusCode.INVALID_ARGUMENT, "replay: replayed or out-of-order request",
                             peer, address)
            else:
                if not online:
                    self.current_peer = peer
                _serving.session, _serving.peer = (request.session, peer) if online else (b"", "")
                reply = answer_frame(self._online_handler if online else self._handler, request.frame,
                                     self._on_undecodable)
                self._last.put(request.session, request.sequence, digest, reply)
        return Envelope(version=_VERSION, sender=self.name, sequence=request.sequence, frame=reply,
                        session=request.session)

    def _session_lock(self, session: bytes) -> threading.Lock:
        """One request at a time per online session (its sequence numbers are in order)."""
        with self._session_locks_guard:
            lock = self._session_locks.pop(session, None) or threading.Lock()
            self._session_locks[session] = lock
            while len(self._session_locks) > 4096:
                self._session_locks.popitem(last=False)
            return lock

    def _exchange(self, request: Envelope, context: Any) -> Envelope:
        """One request through the same checks without gRPC (``context`` needs ``abort``, and
        ``auth_context`` unless insecure)."""
        address = _address(context)
        try:
            return self._serve(request, self._authorize(context, address), address)
        except _Refusal as refusal:
            context.abort(refusal.code, refusal.detail)
            raise

    # --- life cycle ---

    def start(self) -> "PartyServer":
        before, after = raise_open_file_limit()
        self.open_file_limit = (before, after)
        if after >= 0:
            print(f"teeboost: party {self.name}: open file limit {after}" +
                  (f" (raised from {before})" if after != before else ""), file=sys.stderr, flush=True)
        self._call(self._server.start())
        return self

    def request_stop(self) -> None:
        """Stop after the current reply has been sent (used by the Shutdown message)."""
        self._stopped.set()

        def later() -> None:
            self._loop.call_later(0.2, lambda: asyncio.ensure_future(self._stop(1.0)))

        try:
            self._loop.call_soon_threadsafe(later)
        except RuntimeError:  # the loop is already closed
            self._terminated.set()

    async def _stop(self, grace: float | None) -> None:
        try:
            await self._server.stop(grace)
        finally:
            self._terminated.set()

    def wait(self) -> None:
        while not self._terminated.wait(0.5):  # a timeout keeps the main thread's signal handlers running
            if not self._thread.is_alive():
                break
        self._close_loop()

    def stop(self) -> None:
        if self._thread.is_alive() and not self._loop.is_closed():
            try:
                self._call(self._stop(None), timeout=10.0)
            except Exception:  # noqa: BLE001 - stopping is best effort
                pass
        self._terminated.set()
        self._close_loop()

    def _close_loop(self) -> None:
        self._worker.shutdown(wait=False, cancel_futures=True)
        self._online_worker.shutdown(wait=False, cancel_futures=True)
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            if threading.current_thread() is not self._thread:
                self._thread.join(timeout=10.0)
        if not self._thread.is_alive() and not self._loop.is_closed():
            self._loop.close()


def _online_session(body: bytes) -> bool:
    """Does this request belong to an online session? Online requests are small; anything
    larger, or a body that does not decode, goes to the main lane (which checks and refuses
    it as before). Decoded again, with every check, in the worker."""
    if len(body) > _ONLINE_MAX_BYTES:
        return False
    try:
        return Envelope.FromString(body).session.startswith(ONLINE_SESSION_PREFIX)
    except Exception:  # noqa: BLE001 - protobuf's DecodeError and friends
        return False


def _address(context: Any) -> str:
    try:
        return context.peer()
    except Exception:  # noqa: BLE001 - a fake context, or a call already gone
        return "unknown address"
