"""PartyServer's transport-level refusals (``on_refused``), its caps and its bounded reply cache."""

import os
import threading
import time

import grpc
import pytest

from teeboost.protocols.messages import Ack, Hello
from teeboost.transport import serde
from teeboost.transport.grpc_transport import GrpcChannel, PartyServer, Peer, _ReplyCache
from teeboost.transport.proto.envelope_pb2 import Envelope
from teeboost.transport.tls import certificate_fingerprint, create_federation_certs

METHOD = "/teeboost.v1.Party/Exchange"


def envelope(session, sequence, frame=b"", sender="active"):
    return Envelope(version=1, sender=sender, sequence=sequence, frame=frame, session=session)


def hello(n=0):
    return serde.encode(Hello("plain", 1, n, 32))


@pytest.fixture
def certs(tmp_path):
    return create_federation_certs(tmp_path, ["active", "passive-1", "intruder"])


def tls_server(certs, refusals, **kwargs):
    log = []

    def handler(msg):
        log.append(msg)
        return Ack()

    server = PartyServer(handler, name="passive-1", listen="127.0.0.1:0", tls=certs["passive-1"],
                         on_refused=lambda *args: refusals.append(args), **kwargs).start()
    return server, log


def client(certs, party, port):
    ca, cert, key = certs[party].read()
    credentials = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
    channel = grpc.secure_channel(f"127.0.0.1:{port}", credentials,
                                  options=[("grpc.ssl_target_name_override", "passive-1"),
                                           ("grpc.use_local_subchannel_pool", 1)])
    return channel, channel.unary_unary(METHOD, request_serializer=Envelope.SerializeToString,
                                        response_deserializer=Envelope.FromString)


def refused(call, request):
    with pytest.raises(grpc.RpcError) as error:
        call(request, timeout=10)
    return error.value.code()


def test_every_transport_refusal_is_reported_with_fingerprint_and_address(certs):
    refusals = []
    server, log = tls_server(certs, refusals)
    intruder_channel, intruder = client(certs, "intruder", server.port)
    active_channel, active = client(certs, "active", server.port)
    try:
        session = os.urandom(16)
        assert refused(intruder, envelope(session, 1, hello())) == grpc.StatusCode.PERMISSION_DENIED
        assert refused(active, envelope(session, 1, hello(), sender="intruder")) == grpc.StatusCode.PERMISSION_DENIED
        assert refused(active, envelope(session, 5, hello())) == grpc.StatusCode.FAILED_PRECONDITION
        assert active(envelope(session, 1, hello()), timeout=10).sequence == 1
        assert active(envelope(session, 1, hello()), timeout=10).sequence == 1  # a retry: from the cache
        assert refused(active, envelope(session, 3, hello(3))) == grpc.StatusCode.INVALID_ARGUMENT
        assert len(log) == 1
    finally:
        intruder_channel.close()
        active_channel.close()
        server.stop()
    kinds = [reason.split(":")[0] for reason, _, _ in refusals]
    assert kinds == ["certificate", "sender", "unknown-session", "replay"]
    assert "'intruder'" in refusals[0][0]
    fingerprints = [certificate_fingerprint(certs[p].cert.read_bytes()) for p in ("intruder", "active")]
    assert [peer for _, peer, _ in refusals] == fingerprints[:1] + fingerprints[1:] * 3
    assert all(address.startswith("ipv4:127.0.0.1:") for _, _, address in refusals)


def test_a_failing_on_refused_never_breaks_the_server(certs, capsys):
    def explode(*args):
        raise RuntimeError("reporter down")

    server = PartyServer(lambda msg: Ack(), name="passive-1", listen="127.0.0.1:0", tls=certs["passive-1"],
                         on_refused=explode).start()
    channel, intruder = client(certs, "intruder", server.port)
    try:
        assert refused(intruder, envelope(os.urandom(16), 1, hello())) == grpc.StatusCode.PERMISSION_DENIED
    finally:
        channel.close()
        server.stop()
    assert "on_refused failed: RuntimeError: reporter down" in capsys.readouterr().err


def silent(channel, count, release):
    def never():
        release.wait(30)
        return
        yield  # pragma: no cover

    call = channel.stream_unary(METHOD)
    return [call.future(never(), timeout=30) for _ in range(count)]


@pytest.mark.serial
def test_silent_streams_are_capped_and_time_out_without_holding_the_handler(certs):
    refusals = []
    server, log = tls_server(certs, refusals, max_concurrent_rpcs=3, request_timeout=1.5)
    channel, active = client(certs, "active", server.port)
    release = threading.Event()
    try:
        streams = silent(channel, 2, release)
        time.sleep(0.3)
        assert active(envelope(os.urandom(16), 1, hello()), timeout=10).sequence == 1  # the third slot
        more = silent(channel, 2, release)
        time.sleep(0.3)
        codes = []
        for future in more + streams:
            with pytest.raises(grpc.RpcError) as error:
                future.result(timeout=10)
            codes.append(error.value.code())
        # one over the cap of 3 is refused at once; the others had no body within 1.5 s
        assert sorted(c.name for c in codes) == ["DEADLINE_EXCEEDED"] * 3 + ["RESOURCE_EXHAUSTED"]
        assert len(log) == 1
    finally:
        release.set()
        channel.close()
        server.stop()
    assert sorted(reason.split(":")[0] for reason, _, _ in refusals) == ["busy"] + ["timeout"] * 3


def test_busy_refusal_when_every_slot_holds_a_silent_stream(certs):
    refusals = []
    server, _ = tls_server(certs, refusals, max_concurrent_rpcs=2, request_timeout=20)
    channel, active = client(certs, "active", server.port)
    release = threading.Event()
    try:
        streams = silent(channel, 2, release)  # noqa: F841 - kept: a dropped future cancels its RPC
        time.sleep(0.5)
        assert refused(active, envelope(os.urandom(16), 1, hello())) == grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        release.set()
        channel.close()
        server.stop()
    assert refusals[0][0].startswith("busy: 2 requests are already in flight")


def test_a_body_that_is_not_an_envelope_is_refused(certs):
    refusals = []
    server, log = tls_server(certs, refusals)
    channel = client(certs, "active", server.port)[0]
    try:
        raw = channel.unary_unary(METHOD)
        with pytest.raises(grpc.RpcError) as error:
            raw(b"\xff\xff\xff\xff", timeout=10)
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        channel.close()
        server.stop()
    assert refusals[0][0].startswith("malformed:") and log == []


def test_the_reply_cache_forgets_old_sessions_but_keeps_live_ones():
    cache = _ReplyCache(sessions=3, reply_bytes=100)
    for k in range(5):
        cache.put(bytes([k]), 1, b"d", b"r" * 10)
    assert len(cache) == 3 and cache.get(b"\x00") is None and cache.get(b"\x04") == (1, b"d", b"r" * 10)
    cache.get(b"\x02")  # used: now the most recent
    cache.put(b"\x05", 1, b"d", b"r")
    assert cache.get(b"\x02") is not None and cache.get(b"\x03") is None
    # replies beyond the byte budget are dropped oldest first; sequence numbers stay; the newest stays
    cache.put(b"\x06", 2, b"e", b"x" * 95)
    kept = {k: cache.get(k) for k in (b"\x02", b"\x05", b"\x06")}
    assert kept[b"\x06"] == (2, b"e", b"x" * 95)
    assert kept[b"\x02"][2] is None and kept[b"\x02"][0] == 1
    cache.put(b"\x07", 1, b"f", b"y" * 500)  # larger than the budget alone: still kept
    assert cache.get(b"\x07")[2] == b"y" * 500


def test_many_sessions_keep_memory_bounded_and_live_sessions_retry():
    """1,100 sessions (more than the 1,024 kept): a live one still gets its retry answered from
    the cache; one unused since the start is forgotten, as after a restart."""
    calls = []
    server = PartyServer(lambda msg: calls.append(msg) or Ack(), name="passive-1", listen="127.0.0.1:0", tls=None,
                         insecure=True)

    class Context:
        def abort(self, code, detail):
            raise RuntimeError(code, detail)

    try:
        old, live, sequence = os.urandom(16), os.urandom(16), 0
        server._exchange(envelope(old, 1, hello()), Context())
        for k in range(1100):
            if k % 100 == 0:
                sequence += 1
                server._exchange(envelope(live, sequence, hello(sequence)), Context())
            server._exchange(envelope(os.urandom(16), 1, hello()), Context())
        assert len(server._last) == 1024
        before = len(calls)
        assert server._exchange(envelope(live, sequence, hello(sequence)), Context()).sequence == sequence
        assert len(calls) == before  # the retry was answered from the cache
        with pytest.raises(RuntimeError) as error:
            server._exchange(envelope(old, 2, hello(1)), Context())
        assert error.value.args[0] == grpc.StatusCode.FAILED_PRECONDITION
    finally:
        server.stop()


def test_request_stop_ends_wait_and_a_channel_sees_the_reply(certs):
    stopped = []
    server = PartyServer(lambda msg: (server.request_stop(), Ack())[1], name="passive-1", listen="127.0.0.1:0",
                         tls=certs["passive-1"]).start()
    waiter = threading.Thread(target=lambda: (server.wait(), stopped.append(True)))
    waiter.start()
    channel = GrpcChannel([Peer(1, "passive-1", f"127.0.0.1:{server.port}")], sender="active",
                          tls=certs["active"], timeout=10, retries=0)
    try:
        assert channel.request(1, Hello("plain", 1, 0, 32)) == Ack()
    finally:
        channel.close()
    waiter.join(timeout=10)
    assert stopped == [True]
    assert server.open_file_limit is not None and server.open_file_limit[1] >= server.open_file_limit[0]
    server.stop()  # stopping again is harmless


@pytest.mark.serial
def test_online_sessions_are_served_beside_a_long_request_and_in_order_each(certs):
    """The online lane: while the main lane is busy with a slow request (a training step),
    requests of online sessions are answered at once, several sessions at a time, each
    session's requests in order; a replayed online request is refused like any other."""
    release = threading.Event()
    seen = []

    def main(msg):
        release.wait(20)
        return Ack()

    def online(msg):
        seen.append(msg.n_rows)
        return Ack()

    server = PartyServer(main, name="passive-1", listen="127.0.0.1:0", tls=certs["passive-1"],
                         online_handler=online).start()
    peer = [Peer(1, "passive-1", f"127.0.0.1:{server.port}")]
    slow = GrpcChannel(peer, sender="active", tls=certs["active"], timeout=30)
    fast = [GrpcChannel(peer, sender="active", tls=certs["active"], timeout=30, online=True) for _ in range(3)]
    try:
        blocked = threading.Thread(target=lambda: slow.request(1, Hello("plain", 1, 0, 32)))
        blocked.start()
        time.sleep(0.3)
        started = time.monotonic()
        for round_ in range(3):
            for k, channel in enumerate(fast):
                assert isinstance(channel.request(1, Hello("plain", 1, 10 * k + round_, 32)), Ack)
        assert time.monotonic() - started < 5.0 and blocked.is_alive()  # the main lane is still busy
        assert sorted(seen) == sorted(10 * k + r for k in range(3) for r in range(3))
        # a replay of an online session's first request (sequence 1 again, other bytes) is refused
        call = client(certs, "active", server.port)[1]
        session = fast[0]._session
        assert session.startswith(b"online")
        code = refused(call, envelope(session, 1, hello(99)))
        assert code == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        release.set()
        blocked.join(10)
        for channel in [slow, *fast]:
            channel.close()
        server.stop()


def test_a_request_on_a_channel_another_thread_closed_says_the_peer_is_unavailable(certs):
    """Online scoring drops a session from one stage while the other may be using it: the
    request on its way fails as ``PeerUnavailable`` (retried on a new session, or answered
    503 / fallback), never as grpc's ValueError (a 500)."""
    from teeboost.errors import PeerUnavailable

    server = PartyServer(lambda msg: Ack(), name="passive-1", listen="127.0.0.1:0", tls=certs["passive-1"]).start()
    channel = GrpcChannel([Peer(1, "passive-1", f"127.0.0.1:{server.port}")], sender="active",
                          tls=certs["active"], timeout=10, retries=0)
    try:
        assert channel.request(1, Hello("plain", 1, 0, 32)) == Ack()
        channel.close()
        with pytest.raises(PeerUnavailable, match="connection was closed while a request was on its way"):
            channel.request(1, Hello("plain", 1, 0, 32))
        with pytest.raises(PeerUnavailable, match="connection was closed"):
            channel.request_all({1: Hello("plain", 1, 0, 32)})
    finally:
        server.stop()
