"""The only code that turns messages into bytes and back.

A frame is ``MAGIC | u32 header length | JSON header | raw array bytes``. Scalars travel in
the JSON header; numpy arrays and byte strings travel raw (no copies through text, no
pickle). Every message type is a frozen dataclass registered with ``@message``; array
fields declare their dtype and number of dimensions, and decoding checks the type name,
the exact field set, every scalar's type and every array's dtype, rank and byte length
against those declarations before a message object exists.
"""

from __future__ import annotations

import dataclasses
import json
import math
import struct
import typing
from typing import Any

import numpy as np

from ..errors import ProtocolError

__all__ = ["message", "array_field", "encode", "encode_parts", "decode", "message_types", "MAX_FRAME_BYTES"]

MAGIC = b"TBM1"
_HEADER = struct.Struct("<4sI")
#: Frames above this are refused (a 2 GiB frame is an attack or a bug, never a histogram).
MAX_FRAME_BYTES = 2**31 - 1
_MAX_HEADER_BYTES = 1 << 20

_REGISTRY: dict[str, type] = {}
_SPECS: dict[type, list[tuple[str, str, Any]]] = {}

_SCALARS = {int: "int", float: "float", str: "str", bool: "bool", bytes: "bytes"}


def array_field(dtype: str, ndim: int, optional: bool = False) -> Any:
    """Declare a numpy array field of a message (dtype and rank are checked on decode);
    ``optional``: empty unless given (fields added to a message after others with defaults)."""
    if optional:
        return dataclasses.field(default_factory=lambda: np.zeros((0,) * ndim, dtype=dtype),
                                 metadata={"array": (np.dtype(dtype), ndim)})
    return dataclasses.field(metadata={"array": (np.dtype(dtype), ndim)})


def message(cls: type) -> type:
    """Register a frozen dataclass as a wire message."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} must be a dataclass")
    if cls.__name__ in _REGISTRY:
        raise TypeError(f"message type {cls.__name__} registered twice")
    hints = typing.get_type_hints(cls)
    spec: list[tuple[str, str, Any]] = []
    for f in dataclasses.fields(cls):
        if "array" in f.metadata:
            spec.append((f.name, "array", f.metadata["array"]))
            continue
        hint = hints[f.name]
        if hint in _SCALARS:
            spec.append((f.name, _SCALARS[hint], None))
        elif typing.get_origin(hint) is list and typing.get_args(hint)[0] in (int, str, float):
            spec.append((f.name, "list", typing.get_args(hint)[0]))
        else:
            raise TypeError(f"{cls.__name__}.{f.name}: unsupported wire type {hint!r}")
    _REGISTRY[cls.__name__] = cls
    _SPECS[cls] = spec
    return cls


def message_types() -> dict[str, type]:
    return dict(_REGISTRY)


def encode(msg: Any) -> bytes:
    return b"".join(encode_parts(msg))


def encode_parts(msg: Any) -> list:
    """The frame of ``msg`` as its pieces in order (header, then views of the arrays' own
    memory): written back to back they are ``encode(msg)``, for a writer that need not join them."""
    cls = type(msg)
    spec = _SPECS.get(cls)
    if spec is None:
        raise TypeError(f"{cls.__name__} is not a registered message type")
    scalars: dict[str, Any] = {}
    arrays: list[list[Any]] = []
    blobs: list[Any] = []  # views of the arrays' memory: the frame is the one copy
    offset = 0
    for name, kind, extra in spec:
        value = getattr(msg, name)
        if kind == "array":
            dtype, ndim = extra
            if isinstance(value, (bytes, bytearray, memoryview)):  # opaque bytes in a uint8 field
                if dtype != np.uint8 or ndim != 1:
                    raise TypeError(f"{cls.__name__}.{name}: bytes fit only a 1-D uint8 field")
                value = np.frombuffer(value, dtype=np.uint8)
            arr = np.ascontiguousarray(value, dtype=dtype)
            if arr.ndim != ndim:
                raise TypeError(f"{cls.__name__}.{name}: expected {ndim}-D array, got {arr.ndim}-D")
            raw = arr.reshape(-1).view(np.uint8)
            arrays.append([name, list(arr.shape), offset, raw.size])
        elif kind == "bytes":
            raw = memoryview(value).cast("B")
            arrays.append([name, None, offset, raw.nbytes])
        else:
            scalars[name] = list(value) if kind == "list" else value
            continue
        blobs.append(raw)
        offset += arrays[-1][3]
    header = json.dumps({"t": cls.__name__, "s": scalars, "a": arrays}, separators=(",", ":"),
                        allow_nan=True).encode()
    if _HEADER.size + len(header) + offset > MAX_FRAME_BYTES:
        raise ProtocolError(f"{cls.__name__} frame of {_HEADER.size + len(header) + offset} bytes exceeds "
                            f"{MAX_FRAME_BYTES}")
    return [_HEADER.pack(MAGIC, len(header)) + header, *blobs]


def _check_scalar(type_name: str, field: str, kind: str, extra: Any, value: Any) -> Any:
    ok = {
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "str": lambda v: isinstance(v, str),
        "bool": lambda v: isinstance(v, bool),
    }
    if kind == "list":
        if not isinstance(value, list) or not all(ok[_SCALARS[extra]](v) for v in value):
            raise ProtocolError(f"{type_name}.{field}: expected a list of {extra.__name__}")
        return value
    if not ok[kind](value):
        raise ProtocolError(f"{type_name}.{field}: expected {kind}, got {type(value).__name__}")
    return float(value) if kind == "float" else value


def decode(frame: bytes | memoryview, *, allowed: set[str] | None = None) -> Any:
    """Bytes -> message, or ``ProtocolError`` naming what is malformed."""
    view = memoryview(frame)
    if len(view) < _HEADER.size:
        raise ProtocolError(f"truncated frame ({len(view)} bytes)")
    magic, header_len = _HEADER.unpack_from(view)
    if magic != MAGIC:
        raise ProtocolError("not a teeboost message frame (bad magic)")
    if header_len > _MAX_HEADER_BYTES or _HEADER.size + header_len > len(view):
        raise ProtocolError(f"frame header length {header_len} out of range")
    try:
        header = json.loads(bytes(view[_HEADER.size:_HEADER.size + header_len]))
        type_name, scalars, arrays = header["t"], header["s"], header["a"]
    except (ValueError, KeyError, TypeError, RecursionError) as exc:  # RecursionError: absurd nesting
        raise ProtocolError(f"malformed frame header: {type(exc).__name__}") from None
    cls = _REGISTRY.get(type_name) if isinstance(type_name, str) else None
    if cls is None or (allowed is not None and type_name not in allowed):
        raise ProtocolError(f"unexpected message type {type_name!r}")
    if not isinstance(scalars, dict) or not isinstance(arrays, list):
        raise ProtocolError(f"{type_name}: malformed frame header")
    body = view[_HEADER.size + header_len:]
    by_name: dict[str, list[Any]] = {}
    for entry in arrays:
        if not (isinstance(entry, list) and len(entry) == 4 and isinstance(entry[0], str)):
            raise ProtocolError(f"{type_name}: malformed array descriptor")
        by_name[entry[0]] = entry
    spec = _SPECS[cls]
    expected_scalars = {n for n, k, _ in spec if k not in ("array", "bytes")}
    expected_arrays = {n for n, k, _ in spec if k in ("array", "bytes")}
    if set(scalars) != expected_scalars or set(by_name) != expected_arrays:
        raise ProtocolError(f"{type_name}: fields do not match the message definition")
    values: dict[str, Any] = {}
    for name, kind, extra in spec:
        if kind not in ("array", "bytes"):
            values[name] = _check_scalar(type_name, name, kind, extra, scalars[name])
            continue
        _, shape, offset, nbytes = by_name[name]
        if not (isinstance(offset, int) and isinstance(nbytes, int)) or offset < 0 or nbytes < 0 \
                or offset + nbytes > len(body):
            raise ProtocolError(f"{type_name}.{name}: array bytes out of range")
        raw = body[offset:offset + nbytes]
        if kind == "bytes":
            values[name] = bytes(raw)
            continue
        dtype, ndim = extra
        if not (isinstance(shape, list) and len(shape) == ndim
                and all(isinstance(d, int) and d >= 0 for d in shape)):
            raise ProtocolError(f"{type_name}.{name}: expected a {ndim}-D array")
        count = math.prod(shape)  # exact: a product that overflows int64 must not wrap to a match
        if count * dtype.itemsize != nbytes:
            raise ProtocolError(f"{type_name}.{name}: shape {shape} does not match {nbytes} bytes")
        values[name] = np.frombuffer(raw, dtype=dtype).reshape(shape)
    return cls(**values)
