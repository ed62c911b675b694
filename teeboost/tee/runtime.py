"""Inside the enclave: the runtime enclave code receives, and the ecall loop.

``EnclaveRuntime`` is the only object that can quote, seal or unseal; enclave programs get it
as the first argument of every ``ecall_<name>``, which returns bytes (or a list of bytes-like
parts, written back to back as one reply without being joined). Its payload is bytes, or a
bytearray it may overwrite if the function is marked ``payload_in_buffer = True`` (to decrypt a
large record in place). The host never can: the loop below runs only
the program's own ``ecall_`` functions, and the host's requests are length-prefixed byte
frames (no pickle, nothing the host sends is ever executed or resolved as a name other than
a declared entry point). After any failed ecall the enclave answers nothing more, so a host
cannot probe its checks one bit at a time. This module is measured with the program
(``tee.bootstrap``).
"""

from __future__ import annotations

import gc
import io
import os
import traceback
from typing import Any, Callable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ..errors import EnclaveError, TeeboostError
from .platform_file import read_platform_secrets
from .producers import QuoteProducer, hardware_report_data
from .quote import REPORT_DATA_BYTES, Quote
from .sealing import seal, unseal

__all__ = ["EnclaveRuntime", "serve", "OP_CALL", "OP_EXIT", "REPLY_OK", "REPLY_ERROR", "REPLY_READY"]

BACKEND = "simulated"
OP_CALL, OP_EXIT = 1, 2
REPLY_OK, REPLY_ERROR, REPLY_READY = 0, 1, 2
#: Errors whose class crosses the boundary by name; anything else becomes EnclaveError.
_NAMED_ERRORS = ("IntegrityError", "EnclaveError", "AttestationError", "ProtocolError")


class EnclaveRuntime:
    """What enclave code can use: quotes, sealing bound to this measurement, private state."""

    backend = BACKEND

    def __init__(self, measurement: bytes, attestation_key: Ed25519PrivateKey, platform_id: bytes,
                 sealing_secret: bytes, config: dict[str, Any], *, producer: QuoteProducer | None = None) -> None:
        self.measurement = measurement
        self.config = config
        self.state: dict[str, Any] = {}  # enclave-private memory between ecalls
        self._attestation_key = attestation_key
        self._platform_id = platform_id
        self._sealing_secret = sealing_secret
        self._producer = producer  # hardware quotes (tee.producers); None: the simulated quote below
        if producer is not None:
            self.backend = producer.backend

    def quote(self, report_data: bytes, nonce: bytes) -> bytes:
        if len(report_data) > REPORT_DATA_BYTES or len(nonce) != 32:
            raise EnclaveError("report data must be <= 64 bytes and the nonce 32 bytes")
        if self._producer is not None:  # hardware: binding and nonce folded into the 64 REPORTDATA bytes
            quote = self._producer.quote(hardware_report_data(report_data, nonce))
            self.backend = self._producer.backend  # a TSM producer learns its provider on the first quote
            return quote
        body = Quote(BACKEND, self.measurement, report_data.ljust(REPORT_DATA_BYTES, b"\0"), self._platform_id, nonce)
        return body.signed(self._attestation_key).to_bytes()

    def seal(self, data: bytes, context: bytes) -> bytes:
        return seal(self._sealing_secret, self.measurement, data, context)

    def unseal(self, blob: bytes, context: bytes) -> bytes:
        return unseal(self._sealing_secret, self.measurement, blob, context)


def _read_exact(reader: io.BufferedReader, size: int) -> bytes:
    """``size`` bytes from the pipe. A buffered reader reads a large request straight into the
    bytes object returned (no chunks to join, no second copy of a payload)."""
    data = reader.read(size)
    if len(data) != size:
        raise EOFError
    return data


def _read_buffer(reader: io.BufferedReader, size: int) -> bytearray:
    """``_read_exact`` into a mutable buffer (for an entry point that decrypts in place)."""
    buffer = bytearray(size)
    if reader.readinto(buffer) != size:
        raise EOFError
    return buffer


def _write_frame(fd: int, *parts: bytes) -> None:
    """One length-prefixed frame written from its parts, without joining them first."""
    pending = [memoryview(part).cast("B") for part in parts]
    pending = [memoryview(sum(part.nbytes for part in pending).to_bytes(8, "big"))] + [p for p in pending if p.nbytes]
    while pending:
        written = os.writev(fd, pending)
        while written:
            if written >= pending[0].nbytes:
                written -= pending.pop(0).nbytes
            else:
                pending[0], written = pending[0][written:], 0


def _error(kind: str, text: str) -> bytes:
    name = kind.encode()
    return bytes([REPLY_ERROR]) + len(name).to_bytes(2, "big") + name + text.encode("utf-8", "replace")


def _load_program(program: bytes) -> dict[str, Callable]:
    namespace: dict[str, Any] = {"__name__": "teeboost_enclave_program"}
    exec(compile(program, "<enclave program>", "exec", dont_inherit=True), namespace)  # noqa: S102 - measured
    return {k[len("ecall_"):]: v for k, v in namespace.items() if k.startswith("ecall_") and callable(v)}


def serve(read_fd: int, write_fd: int, program: bytes, measurement: bytes, config: dict[str, Any],
          platform_path: str) -> None:
    """Load the program and answer ecalls until the host says exit or goes away."""
    try:
        key, platform_id, sealing_secret = read_platform_secrets(platform_path)
        runtime = EnclaveRuntime(measurement, Ed25519PrivateKey.from_private_bytes(key), platform_id,
                                 sealing_secret, config)
        ecalls = _load_program(program)
        gc.collect()  # the loaded program and its libraries stay out of full collections (teeboost.heap)
        gc.freeze()
    except Exception as exc:  # report load failures (including unmeasured imports) to the host
        _write_frame(write_fd, _error("EnclaveError", f"enclave failed to load: {type(exc).__name__}: {exc}"))
        return
    _write_frame(write_fd, bytes([REPLY_READY]) + measurement)
    stopped = ""  # after a failed ecall the enclave serves nothing more: no retry loop, no oracle
    reader = io.open(read_fd, "rb", buffering=1 << 16, closefd=False)
    while True:
        try:
            size = int.from_bytes(_read_exact(reader, 8), "big")
            head = _read_exact(reader, min(size, 3))  # op code, name length
            if not head or head[0] == OP_EXIT:
                return
            if head[0] != OP_CALL or size < 3:
                _read_exact(reader, size - len(head))  # the rest of the frame, unread
                _write_frame(write_fd, _error("EnclaveError", "malformed ecall frame"))
                continue
            raw_name = _read_exact(reader, min(int.from_bytes(head[1:3], "big"), size - 3))
            name = raw_name.decode("ascii", "replace")
            handler = ecalls.get(name)
            # the one copy the handler holds; a bytearray it may overwrite if it asks for one
            payload = (_read_buffer if getattr(handler, "payload_in_buffer", False) else _read_exact)(
                reader, size - 3 - len(raw_name))
        except EOFError:
            return
        if handler is None:
            _write_frame(write_fd, _error("EnclaveError", f"the enclave has no entry point {name!r}"))
            continue
        if stopped:
            _write_frame(write_fd, _error("EnclaveError", f"the enclave stopped after a failed ecall ({stopped}); "
                                                          "start a new one"))
            continue
        try:
            result = handler(runtime, payload)
            del payload
            _write_frame(write_fd, bytes([REPLY_OK]), *(result if isinstance(result, list) else [result or b""]))
            del result
        except TeeboostError as exc:
            kind = type(exc).__name__ if type(exc).__name__ in _NAMED_ERRORS else "EnclaveError"
            stopped = f"{name}: {kind}"
            _write_frame(write_fd, _error(kind, str(exc)))
        except Exception as exc:
            detail = traceback.format_exception_only(type(exc), exc)[-1].strip()
            stopped = f"{name}: {type(exc).__name__}"
            _write_frame(write_fd, _error("EnclaveError", f"ecall {name!r} failed inside the enclave: {detail}"))
