"""What the fuzzer feeds and what it expects: every decoder of network input either returns
a well-formed message or raises ``ProtocolError``; anything else (IndexError, ValueError,
MemoryError, a hang) is a bug. The seed corpus is one valid frame per message type, kept in
``corpus/``; inputs that once broke a decoder are kept there too, as regression cases.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import teeboost.deploy.messages  # noqa: F401  (every module that registers message types)
import teeboost.parties.psi  # noqa: F401
import teeboost.protocols.online  # noqa: F401
import teeboost.protocols.strict.enclave.online_messages  # noqa: F401
import teeboost.protocols.registry as registry  # noqa: F401
from teeboost.errors import ProtocolError
from teeboost.protocols.messages import RouteRequest
from teeboost.protocols.enclave.messages import SealedRecords, unpack_records
from teeboost.protocols.enclave.partition import decode_row_sets
from teeboost.transport import serde
from teeboost.transport.base import ErrorReply  # noqa: F401
from teeboost.transport.serde import _SPECS, message_types

CORPUS = Path(__file__).parent / "corpus"
_SCALAR_STRATEGIES = {
    "int": st.integers(-(2**63), 2**63 - 1),
    "float": st.floats(allow_nan=False, allow_infinity=False),
    "str": st.text(max_size=12),
    "bool": st.booleans(),
    "bytes": st.binary(max_size=64),
}


def message_strategy(cls: type) -> st.SearchStrategy:
    """Any instance of a registered message type, built from its wire declaration."""
    fields = {}
    for name, kind, extra in _SPECS[cls]:
        if kind == "array":
            dtype, ndim = extra
            fields[name] = hnp.arrays(dtype, hnp.array_shapes(min_dims=ndim, max_dims=ndim, min_side=0, max_side=4))
        elif kind == "list":
            fields[name] = st.lists(_SCALAR_STRATEGIES[serde._SCALARS[extra]], max_size=4)
        else:
            fields[name] = _SCALAR_STRATEGIES[kind]
    return st.builds(cls, **fields)


def decode_everything(data: bytes) -> object:
    """The decoders a peer's bytes reach: the frame, then the structures inside it."""
    msg = serde.decode(data)
    if isinstance(msg, RouteRequest):
        decode_row_sets(msg.encodings, msg.offsets, msg.payload, min(msg.n_rows, 1 << 20), "fuzz")
    if isinstance(msg, SealedRecords):
        unpack_records(data)
    return msg


def check(data: bytes) -> None:
    """The fuzz oracle."""
    try:
        decode_everything(data)
    except ProtocolError:
        pass


def seed_frames() -> dict[str, bytes]:
    """One deterministic valid frame per message type (the corpus' seeds)."""
    rng = np.random.default_rng(7)
    seeds = {}
    for name, cls in sorted(message_types().items()):
        values = {}
        for field_name, kind, extra in _SPECS[cls]:
            if kind == "array":
                dtype, ndim = extra
                shape = (3,) * ndim
                values[field_name] = rng.integers(0, 4, size=shape).astype(dtype)
            elif kind == "list":
                values[field_name] = [extra(1)]
            else:
                values[field_name] = {"int": 5, "float": 0.5, "str": "x", "bool": True, "bytes": b"\x01\x02"}[kind]
        seeds[name] = serde.encode(cls(**values))
    return seeds


def corpus() -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(CORPUS.glob("*.bin"))}


def save_crash(data: bytes) -> Path:
    path = CORPUS / f"crash-{hashlib.sha256(data).hexdigest()[:16]}.bin"
    path.write_bytes(data)
    return path


def mutate(data: bytes, rng: np.random.Generator, others: list[bytes]) -> bytes:
    """Bit flips, byte sets, truncation, insertion, duplication, splicing (libFuzzer-style)."""
    buf = bytearray(data)
    for _ in range(int(rng.integers(1, 5))):
        choice = int(rng.integers(0, 9))
        position = int(rng.integers(0, len(buf) + 1))
        if choice == 0 and buf:
            i = min(position, len(buf) - 1)
            buf[i] ^= 1 << int(rng.integers(0, 8))
        elif choice == 1 and buf:
            i = min(position, len(buf) - 1)
            buf[i] = int(rng.choice([0, 1, 0x7F, 0x80, 0xFF, ord("9"), ord("-"), ord("[")]))
        elif choice == 2:
            del buf[position:]
        elif choice == 3:
            buf[position:position] = rng.integers(0, 256, size=int(rng.integers(1, 9)), dtype=np.uint8).tobytes()
        elif choice == 4 and buf:
            end = min(len(buf), position + int(rng.integers(1, 17)))
            buf[position:position] = buf[position:end]
        elif choice == 5 and others:
            other = others[int(rng.integers(0, len(others)))]
            cut = int(rng.integers(0, len(other) + 1))
            buf = buf[:position] + bytearray(other[cut:])
        elif choice == 6:  # edit a digit inside the JSON header: sizes, offsets, shapes
            digits = [i for i, b in enumerate(buf[:400]) if 48 <= b <= 57]
            if digits:
                buf[digits[int(rng.integers(0, len(digits)))]] = int(rng.integers(48, 58))
        elif choice == 7:  # an extreme number where a size, offset or shape was
            digits = [i for i, b in enumerate(buf[:400]) if 48 <= b <= 57]
            if digits:
                i = digits[int(rng.integers(0, len(digits)))]
                extreme = [b"-1", b"4611686018427387904", b"18446744073709551616", b"1e308", b"2147483648"]
                buf[i:i + 1] = extreme[int(rng.integers(0, len(extreme)))]
        elif choice == 8:  # deep nesting inside the header
            buf[position:position] = b"[" * int(rng.integers(1, 100_000))
    return bytes(buf)
