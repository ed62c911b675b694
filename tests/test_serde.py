import json
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from teeboost.errors import ProtocolError
from teeboost.protocols.messages import Ack, Hello, RouteReply, RouteRequest
from teeboost.protocols.scoring.plain import HistogramReply
from teeboost.transport import serde


def test_roundtrip_keeps_types_shapes_and_values():
    msg = HistogramReply(3, np.arange(2 * 3 * 4 * 3, dtype=np.int64).reshape(2, 3, 4, 3) - 7)
    back = serde.decode(serde.encode(msg))
    assert type(back) is HistogramReply and back.tree == 3
    assert back.sums.dtype == np.int64 and np.array_equal(back.sums, msg.sums)
    assert serde.decode(serde.encode(Ack())) == Ack()


@settings(max_examples=60, deadline=None)
@given(
    dataset=st.text(max_size=20),
    records=st.lists(st.integers(-2**63, 2**63 - 1), max_size=20),
    rows=st.lists(st.integers(0, 2**32 - 1), max_size=50),
)
def test_roundtrip_property(dataset, records, rows):
    payload = np.array(rows, dtype="<u4").view(np.uint8)
    msg = RouteRequest(dataset, 2**32, np.array(records, dtype=np.int64), np.zeros(1, dtype=np.uint8),
                       np.array([0, payload.size], dtype=np.int64), payload)
    back = serde.decode(serde.encode(msg))
    assert back.dataset == dataset and back.n_rows == 2**32
    assert back.records.tolist() == records and back.payload.view("<u4").tolist() == rows


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3000).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.sets(st.integers(0, n - 1)), max_size=4))))
def test_row_set_encoding_roundtrip(case):
    from teeboost.protocols.enclave.partition import decode_row_sets, encode_row_sets

    n, sets = case
    groups = [np.array(sorted(s), dtype=np.int64) for s in sets]
    encodings, offsets, payload = encode_row_sets(groups, n)
    assert [g.tolist() for g in decode_row_sets(encodings, offsets, payload, n, "test")] == \
        [g.tolist() for g in groups]
    assert payload.size <= sum(min(4 * g.size, (n + 7) // 8) for g in groups)


def _reframe(frame: bytes, edit) -> bytes:
    header_len = struct.unpack_from("<I", frame, 4)[0]
    header = json.loads(frame[8:8 + header_len])
    body = frame[8 + header_len:]
    edit(header)
    raw = json.dumps(header).encode()
    return frame[:4] + struct.pack("<I", len(raw)) + raw + body


@pytest.mark.parametrize("edit, message", [
    (lambda h: h.update(t="Pickle"), "unexpected message type"),
    (lambda h: h["s"].update(extra=1), "fields do not match"),
    (lambda h: h["s"].update(n_answers="3"), "expected int"),
    (lambda h: h["a"][0].__setitem__(1, [99]), "does not match"),
    (lambda h: h["a"][0].__setitem__(3, 10**9), "out of range"),
])
def test_malformed_frames_are_rejected(edit, message):
    frame = serde.encode(RouteReply(3, np.packbits(np.array([1, 0, 1], dtype=bool))))
    with pytest.raises(ProtocolError, match=message):
        serde.decode(_reframe(frame, edit))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_never_decodes_silently(garbage):
    try:
        serde.decode(garbage)
    except ProtocolError:
        pass


def test_truncated_frame_rejected():
    frame = serde.encode(Hello("plain", 1, 10, 32))
    with pytest.raises(ProtocolError):
        serde.decode(frame[:10])
    with pytest.raises(ProtocolError, match="bad magic"):
        serde.decode(b"XXXX" + frame[4:])
