"""The simulated enclave backend: each enclave is its own OS process, launched by the
simulated loader (``tee.bootstrap``) from measured source only.

What it reproduces: the enclave's memory is not the host's (separate process); the host
reaches it only through the program's declared entry points, as byte frames over a pipe
(no pickle, no built-in quote or seal calls: those exist only on the runtime inside); the
measurement covers every teeboost module the enclave runs, computed by the loader over the
bytes it executes; quotes are signed with the platform's Ed25519 key and sealing keys derive
from the platform secret and the measurement, both read only inside the enclave process.
What it does NOT: root on the machine can read the enclave process's memory and the platform
file, so simulated quotes prove nothing against the machine's owner. Verifiers refuse them
unless told ``allow_simulated``; every report says "simulated".
"""

from __future__ import annotations

import atexit
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ..errors import AttestationError, EnclaveError, IntegrityError, ProtocolError
from .bootstrap import encode_bundle
from .code import EnclaveCode
from .interface import Enclave, EnclaveBackend
from .platform_file import create_platform_file, read_platform_root
from .runtime import OP_CALL, OP_EXIT, REPLY_ERROR, REPLY_OK, REPLY_READY

__all__ = ["SimulatedPlatform", "SimulatedBackend", "SimulatedEnclave"]

BACKEND = "simulated"
_ERRORS = {"IntegrityError": IntegrityError, "EnclaveError": EnclaveError, "AttestationError": AttestationError,
           "ProtocolError": ProtocolError}
_BOOTSTRAP = resources.files("teeboost.tee").joinpath("bootstrap.py").read_text()
_TEMPORARY: list[str] = []


@atexit.register
def _remove_temporary_platforms() -> None:
    for directory in _TEMPORARY:
        shutil.rmtree(directory, ignore_errors=True)


class SimulatedPlatform:
    """A simulated CPU, named by its platform file. The host-side object knows only the file's
    path and the public attestation root; the private keys are read inside enclaves."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.attestation_root = read_platform_root(self.path)

    @classmethod
    def create(cls) -> "SimulatedPlatform":
        """A throw-away platform for one process's runs (file removed at exit)."""
        directory = tempfile.mkdtemp(prefix="teeboost-platform-")
        _TEMPORARY.append(directory)
        return cls.load_or_create(Path(directory) / "platform.key")

    @classmethod
    def load_or_create(cls, path: str | Path) -> "SimulatedPlatform":
        path = Path(path)
        if not path.exists():
            key = Ed25519PrivateKey.generate()
            create_platform_file(
                path,
                key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw),
                key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                  serialization.NoEncryption()))
        return cls(path)


class SimulatedEnclave(Enclave):
    backend = BACKEND

    def __init__(self, code: EnclaveCode, platform: SimulatedPlatform, *, label: str,
                 start_timeout: float = 60.0) -> None:
        self.label = label
        self.code = code
        to_enclave_r, to_enclave_w = os.pipe()
        from_enclave_r, from_enclave_w = os.pipe()
        self._process = subprocess.Popen(
            [sys.executable, "-I", "-B", "-c", _BOOTSTRAP, str(to_enclave_r), str(from_enclave_w)],
            pass_fds=(to_enclave_r, from_enclave_w), stdin=subprocess.DEVNULL, close_fds=True,
        )
        os.close(to_enclave_r)
        os.close(from_enclave_w)
        self._write, self._read = to_enclave_w, from_enclave_r
        self._closed = False
        bundle = encode_bundle(code.program, code.modules, code.config, str(platform.path.resolve()))
        self._send("start", len(bundle).to_bytes(8, "big"), bundle)
        self._start_timeout = start_timeout
        self._measurement: bytes | None = None  # read from the loader's ready reply on first use

    def _started(self) -> bytes:
        """Wait for the loader's ready reply (the process boots while the host works on)."""
        if self._measurement is None:
            reply = self._receive("start", self._start_timeout)
            if reply[:1] != bytes([REPLY_READY]):
                self.close()
                raise EnclaveError(f"simulated enclave {self.label!r} did not start: {_error_text(bytes(reply))}")
            self._measurement = bytes(reply[1:])
        return self._measurement

    @property
    def pid(self) -> int | None:
        return self._process.pid

    @property
    def measurement(self) -> bytes:
        return self._started()

    def _gone(self, what: str) -> EnclaveError:
        code = self._process.poll()
        return EnclaveError(f"simulated enclave {self.label!r} (pid {self._process.pid}) exited with code {code} "
                            f"during {what}")

    def _send(self, what: str, *parts: bytes) -> None:
        """Write the parts in order, without joining them into one copy first."""
        pending = [view for view in (memoryview(part).cast("B") for part in parts) if view.nbytes]
        try:
            while pending:
                written = os.writev(self._write, pending)
                while written:
                    if written >= pending[0].nbytes:
                        written -= pending.pop(0).nbytes
                    else:
                        pending[0], written = pending[0][written:], 0
        except (BrokenPipeError, OSError):
            raise self._gone(what) from None

    def _read_exact(self, size: int, what: str, deadline: float | None) -> bytearray:
        """``size`` bytes read straight into one buffer (no chunks to join)."""
        buffer = bytearray(size)
        view = memoryview(buffer)
        got = 0
        while got < size:
            wait = 0.2 if deadline is None else max(0.0, min(0.2, deadline - time.monotonic()))
            ready, _, _ = select.select([self._read], [], [], wait)
            if not ready:
                if self._process.poll() is not None:
                    raise self._gone(what)
                if deadline is not None and time.monotonic() >= deadline:
                    raise EnclaveError(f"simulated enclave {self.label!r} did not answer {what} in time")
                continue
            read = os.readv(self._read, [view[got:]])
            if not read:
                self._process.wait(timeout=5)
                raise self._gone(what)
            got += read
        return buffer

    def _receive(self, what: str, timeout: float | None) -> bytes:
        deadline = None if timeout is None else time.monotonic() + timeout
        size = int.from_bytes(self._read_exact(8, what, deadline), "big")
        return self._read_exact(size, what, deadline)

    def ecall(self, name: str, payload: bytes = b"", *, timeout: float | None = None) -> bytearray:
        """The reply is a bytearray (bytes-like), so a large one is read into memory once."""
        if not self._closed:
            self._started()
        if self._closed or self._process.poll() is not None:
            raise EnclaveError(f"simulated enclave {self.label!r} is not running (exit code {self._process.poll()})")
        encoded = name.encode("ascii")
        payload = memoryview(payload).cast("B")
        head = bytes([OP_CALL]) + len(encoded).to_bytes(2, "big") + encoded
        self._send(f"ecall {name!r}", (len(head) + payload.nbytes).to_bytes(8, "big") + head, payload)
        what = f"ecall {name!r}"
        deadline = None if timeout is None else time.monotonic() + timeout
        size = int.from_bytes(self._read_exact(8, what, deadline), "big")
        status = self._read_exact(min(size, 1), what, deadline)
        reply = self._read_exact(size - len(status), what, deadline)  # read once, returned as it is
        if status == bytes([REPLY_OK]):
            return reply
        kind, text = _split_error(bytes(status + reply))
        raise _ERRORS.get(kind, EnclaveError)(text)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._process.poll() is None:
            try:
                os.write(self._write, (1).to_bytes(8, "big") + bytes([OP_EXIT]))
            except OSError:
                pass
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=5)
        for fd in (self._write, self._read):
            try:
                os.close(fd)
            except OSError:
                pass

    def describe(self) -> str:
        return (f"simulated enclave {self.label!r} (no hardware isolation), pid {self.pid}, "
                f"measurement {self.measurement.hex()[:16]}...")


def _split_error(reply: bytes) -> tuple[str, str]:
    if reply[:1] != bytes([REPLY_ERROR]) or len(reply) < 3:
        return "EnclaveError", "malformed reply from the enclave"
    size = int.from_bytes(reply[1:3], "big")
    return reply[3:3 + size].decode("ascii", "replace"), reply[3 + size:].decode("utf-8", "replace")


def _error_text(reply: bytes) -> str:
    return _split_error(reply)[1]


class SimulatedBackend(EnclaveBackend):
    name = BACKEND

    def __init__(self, platform: SimulatedPlatform | None = None) -> None:
        self.platform = platform or SimulatedPlatform.create()

    def load(self, code: EnclaveCode, *, label: str = "enclave") -> SimulatedEnclave:
        return SimulatedEnclave(code, self.platform, label=label)

    @property
    def attestation_root(self) -> bytes:
        return self.platform.attestation_root
