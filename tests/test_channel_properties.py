"""Property-based tests of the two channels a record or request travels through.

The attested channel's record layer (AES-GCM with sequence numbers): whatever is sent
arrives in order, and any tampering, replay, reordering, drop or truncation is refused at the
first record that differs. The gRPC server's request log: every new request runs exactly
once, a retry of the last one gets the cached reply, anything else is refused.
"""

import os

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from teeboost.errors import IntegrityError
from teeboost.protocols.messages import Ack, Hello
from teeboost.tee.channel import SecureChannel
from teeboost.transport import serde
from teeboost.transport.grpc_transport import PartyServer
from teeboost.transport.proto.envelope_pb2 import Envelope


def channel_pair(key_bytes=16):
    a, b = os.urandom(key_bytes), os.urandom(key_bytes)
    return SecureChannel(a, b, None), SecureChannel(b, a, None)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=8), st.sampled_from([16, 32]))
def test_records_arrive_in_order(messages, key_bytes):
    sender, receiver = channel_pair(key_bytes)
    records = [sender.seal(m) for m in messages]
    assert [receiver.open(r) for r in records] == messages
    receiver_close = sender.seal_close()
    assert receiver.open(receiver_close) is None
    receiver.require_closed()


ATTACKS = st.sampled_from(["flip", "truncate", "drop", "replay", "swap", "append"])


@settings(max_examples=150, deadline=None)
@given(messages=st.lists(st.binary(min_size=1, max_size=100), min_size=2, max_size=6),
       attack=ATTACKS, where=st.integers(0, 5), bit=st.integers(0, 7), data=st.data())
def test_any_change_to_the_record_stream_is_refused(messages, attack, where, bit, data):
    sender, receiver = channel_pair()
    records = [sender.seal(m) for m in messages]
    i = where % len(records)
    stream = list(records)
    if attack == "flip":
        record = bytearray(stream[i])
        record[data.draw(st.integers(0, len(record) - 1))] ^= 1 << bit
        stream[i] = bytes(record)
    elif attack == "truncate":
        stream[i] = stream[i][:data.draw(st.integers(0, len(stream[i]) - 1))]
    elif attack == "drop":
        del stream[i]
    elif attack == "replay":
        stream.insert(i + 1, stream[i])
    elif attack == "swap":
        j = (i + 1) % len(stream)
        stream[i], stream[j] = stream[j], stream[i]
        i = min(i, j)
    else:  # a record from another session with the same keys' sequence slot
        other, _ = channel_pair()
        stream.insert(i, other.seal(b"x"))
    opened = []
    with pytest.raises(IntegrityError):
        for record in stream:
            opened.append(receiver.open(record))
        receiver.require_closed()  # an undetected drop of the tail is caught here
    assert opened == messages[:len(opened)]  # nothing wrong was ever accepted


class Refused(Exception):
    pass


class FakeContext:
    """Just what ``PartyServer._exchange`` asks of a gRPC context (insecure mode)."""

    def abort(self, code, detail):
        raise Refused(code, detail)


def server_and_log():
    log = []

    def handler(msg):
        log.append(msg)
        return Ack()

    return PartyServer(handler, name="passive-1", listen="127.0.0.1:0", tls=None, insecure=True), log


def envelope(session, sequence, frame):
    return Envelope(version=1, sender="active", sequence=sequence, frame=frame, session=session)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["next", "retry", "replay", "skip", "other-body"]), min_size=1, max_size=12))
def test_server_runs_each_request_once_and_refuses_replays(actions):
    server, log = server_and_log()
    session = os.urandom(16)
    frames = [serde.encode(Hello("plain", 1, n, 32)) for n in range(40)]
    sent = []  # (sequence, frame) accepted so far
    try:
        for action in actions:
            last = sent[-1] if sent else None
            if action == "next" or last is None:
                request = (len(sent) + 1, frames[len(sent)])
            elif action == "retry":
                request = last
            elif action == "replay":
                if len(sent) < 2:
                    continue
                request = sent[-2]
            elif action == "skip":
                request = (last[0] + 2, frames[len(sent)])
            else:
                request = (last[0], frames[-1])
            before = len(log)
            try:
                reply = server._exchange(envelope(session, *request), FakeContext())
            except Refused as refused:
                assert action in ("replay", "skip", "other-body") and last is not None
                code = refused.args[0]
                assert code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION)
                assert len(log) == before
                continue
            assert reply.sequence == request[0] and serde.decode(reply.frame) == Ack()
            if action == "retry" and last is not None:
                assert len(log) == before  # served from the cache, not run twice
            else:
                assert len(log) == before + 1
                sent.append(request)
    finally:
        server.stop()
    assert [m.n_rows for m in log] == list(range(len(sent)))


def test_unknown_session_must_start_at_one():
    """A request from the middle of a session this server never saw means it restarted."""
    server, log = server_and_log()
    try:
        with pytest.raises(Refused) as refused:
            server._exchange(envelope(os.urandom(16), 7, serde.encode(Ack())), FakeContext())
        assert refused.value.args[0] == grpc.StatusCode.FAILED_PRECONDITION and "restarted" in refused.value.args[1]
        assert log == []
    finally:
        server.stop()


@pytest.mark.parametrize("size", [0, 1, 1 << 20, 3 * (1 << 20) + 5])
def test_a_record_opened_in_place_is_the_plaintext_and_a_flipped_bit_is_refused(size):
    """``open_in_place`` decrypts over the record itself, a MiB at a time (records past a chunk
    and ragged ones too), and still checks the tag: one flipped bit anywhere is refused."""
    message = os.urandom(size)
    sender, receiver = channel_pair()
    record = bytearray(sender.seal(message))
    opened = receiver.open_in_place(record)
    assert bytes(opened) == message
    for where in ({0, size // 2, size - 1} if size else {0}):
        sender, receiver = channel_pair()
        record = bytearray(sender.seal(message))
        record[len(record) - 17 - where if size else -1] ^= 4
        with pytest.raises(IntegrityError):
            receiver.open_in_place(record)
