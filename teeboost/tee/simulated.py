"""The simulated enclave backend: enclave code in its own OS process, quotes signed by a
simulated platform key, sealing under a simulated platform secret.

What it reproduces: the enclave's memory is not the host process's (separate process; the
host talks to it only through ecalls), the measurement is computed by the enclave process over
the code it actually loaded, quotes are signed with an Ed25519 key whose public half is the
verifiers' root, sealing keys depend on platform and measurement. What it does NOT: anyone
with root on the host can read the enclave process's memory and the platform key file, so
quotes from a simulated platform prove nothing against the machine's owner. Every report says
"simulated".
"""

from __future__ import annotations

import multiprocessing
import os
import stat
import traceback
from pathlib import Path
from typing import Any, Callable

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ..errors import AttestationError, ConfigError, EnclaveError, IntegrityError, ProtocolError, TeeboostError
from .code import EnclaveCode, measure
from .interface import Enclave, EnclaveBackend
from .quote import REPORT_DATA_BYTES, Quote
from .sealing import seal, unseal

__all__ = ["SimulatedPlatform", "SimulatedBackend", "SimulatedEnclave", "EnclaveRuntime"]

BACKEND = "simulated"


class SimulatedPlatform:
    """The simulated CPU: attestation key, platform id and sealing secret.

    ``load_or_create(path)`` keeps them in one file (mode 0600) so sealed data survives
    restarts, as it does on a real platform."""

    def __init__(self, attestation_key: Ed25519PrivateKey, platform_id: bytes, sealing_secret: bytes) -> None:
        self.attestation_key = attestation_key
        self.platform_id = platform_id
        self.sealing_secret = sealing_secret

    @classmethod
    def create(cls) -> "SimulatedPlatform":
        return cls(Ed25519PrivateKey.generate(), os.urandom(16), os.urandom(32))

    @classmethod
    def load_or_create(cls, path: str | Path) -> "SimulatedPlatform":
        path = Path(path)
        if path.exists():
            raw = path.read_bytes()
            if len(raw) != 4 + 32 + 16 + 32 or raw[:4] != b"TBP1":
                raise ConfigError(f"{path}: not a simulated platform file")
            return cls(Ed25519PrivateKey.from_private_bytes(raw[4:36]), raw[36:52], raw[52:84])
        platform = cls.create()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IRUSR | stat.S_IWUSR)
        with os.fdopen(fd, "wb") as handle:
            handle.write(b"TBP1" + platform.secret_material()[0] + platform.platform_id + platform.sealing_secret)
        return platform

    def secret_material(self) -> tuple[bytes, bytes, bytes]:
        key = self.attestation_key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                                 serialization.NoEncryption())
        return key, self.platform_id, self.sealing_secret

    @property
    def attestation_root(self) -> bytes:
        return self.attestation_key.public_key().public_bytes(serialization.Encoding.Raw,
                                                              serialization.PublicFormat.Raw)


class EnclaveRuntime:
    """What enclave code can use inside the enclave: quotes, sealing, private state."""

    backend = BACKEND

    def __init__(self, measurement: bytes, platform: SimulatedPlatform) -> None:
        self.measurement = measurement
        self._platform = platform
        self.state: dict[str, Any] = {}  # enclave-private memory between ecalls

    def quote(self, report_data: bytes, nonce: bytes) -> bytes:
        if len(report_data) > REPORT_DATA_BYTES or len(nonce) != 32:
            raise EnclaveError("report data must be <= 64 bytes and the nonce 32 bytes")
        body = Quote(BACKEND, self.measurement, report_data.ljust(REPORT_DATA_BYTES, b"\0"),
                     self._platform.platform_id, nonce)
        return body.signed(self._platform.attestation_key).to_bytes()

    def seal(self, data: bytes, context: bytes = b"") -> bytes:
        return seal(self._platform.sealing_secret, self.measurement, data, context)

    def unseal(self, blob: bytes, context: bytes = b"") -> bytes:
        return unseal(self._platform.sealing_secret, self.measurement, blob, context)


_BUILTIN = {
    "__quote__": lambda rt, payload: rt.quote(payload[32:], payload[:32]),
    "__seal__": lambda rt, payload: rt.seal(*_split_context(payload)),
    "__unseal__": lambda rt, payload: rt.unseal(*_split_context(payload)),
}


def _split_context(payload: bytes) -> tuple[bytes, bytes]:
    n = int.from_bytes(payload[:4], "big")
    return payload[4 + n:], payload[4:4 + n]


def _enclave_main(conn, program: bytes, libraries: tuple[str, ...], config: dict, secrets: tuple) -> None:
    """Entry point of the enclave process: load, measure, then serve ecalls until told to stop."""
    try:
        key, platform_id, sealing_secret = secrets
        platform = SimulatedPlatform(Ed25519PrivateKey.from_private_bytes(key), platform_id, sealing_secret)
        measurement = measure(program, libraries, config)
        runtime = EnclaveRuntime(measurement, platform)
        runtime.state["config"] = config
        namespace: dict[str, Any] = {"__name__": "teeboost_enclave_program"}
        exec(compile(program, "<enclave program>", "exec"), namespace)  # noqa: S102 - measured code
        ecalls: dict[str, Callable] = {k[len("ecall_"):]: v for k, v in namespace.items()
                                       if k.startswith("ecall_") and callable(v)}
        ecalls.update(_BUILTIN)
    except Exception as exc:  # report load failures to the host
        conn.send(("error", "EnclaveError", f"enclave failed to load: {type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", measurement))
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        if request[0] == "exit":
            return
        _, name, payload = request
        handler = ecalls.get(name)
        if handler is None:
            conn.send(("error", "EnclaveError", f"the enclave has no entry point {name!r}"))
            continue
        try:
            result = handler(runtime, payload)
            conn.send(("ok", bytes(result or b"")))
        except TeeboostError as exc:
            conn.send(("error", type(exc).__name__, str(exc)))
        except Exception as exc:
            detail = traceback.format_exception_only(type(exc), exc)[-1].strip()
            conn.send(("error", "EnclaveError", f"ecall {name!r} failed inside the enclave: {detail}"))


_ERRORS = {"IntegrityError": IntegrityError, "EnclaveError": EnclaveError, "AttestationError": AttestationError,
           "ProtocolError": ProtocolError}


class SimulatedEnclave(Enclave):
    backend = BACKEND

    def __init__(self, code: EnclaveCode, platform: SimulatedPlatform, *, label: str,
                 start_timeout: float = 60.0) -> None:
        self.label = label
        self.code = code
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=_enclave_main, name=f"teeboost-enclave-{label}",
            args=(child, code.program, code.libraries, code.config, platform.secret_material()),
            daemon=True,
        )
        self._process.start()
        child.close()
        reply = self._receive("start", start_timeout)
        if reply[0] != "ready":
            self.close()
            raise EnclaveError(f"simulated enclave {label!r} did not start: {reply[2]}")
        self._measurement = reply[1]

    @property
    def pid(self) -> int | None:
        return self._process.pid

    @property
    def measurement(self) -> bytes:
        return self._measurement

    def _receive(self, what: str, timeout: float | None) -> tuple:
        waited = 0.0
        step = 0.2
        while not self._conn.poll(step):
            waited += step
            if not self._process.is_alive():
                code = self._process.exitcode
                raise EnclaveError(
                    f"simulated enclave {self.label!r} (pid {self._process.pid}) exited with code {code} "
                    f"during {what}"
                )
            if timeout is not None and waited >= timeout:
                raise EnclaveError(f"simulated enclave {self.label!r} did not answer {what} within {timeout:g} s")
        try:
            return self._conn.recv()
        except (EOFError, OSError):
            self._process.join(timeout=2)
            raise EnclaveError(
                f"simulated enclave {self.label!r} (pid {self._process.pid}) exited with code "
                f"{self._process.exitcode} during {what}"
            ) from None

    def ecall(self, name: str, payload: bytes = b"", *, timeout: float | None = None) -> bytes:
        if not self._process.is_alive():
            raise EnclaveError(f"simulated enclave {self.label!r} is not running "
                               f"(exit code {self._process.exitcode})")
        try:
            self._conn.send(("call", name, bytes(payload)))
        except (BrokenPipeError, OSError):
            raise EnclaveError(f"simulated enclave {self.label!r} is not reachable") from None
        reply = self._receive(f"ecall {name!r}", timeout)
        if reply[0] == "ok":
            return reply[1]
        raise _ERRORS.get(reply[1], EnclaveError)(reply[2])

    def quote(self, report_data: bytes, nonce: bytes) -> bytes:
        return self.ecall("__quote__", bytes(nonce) + bytes(report_data))

    def seal(self, data: bytes, context: bytes = b"") -> bytes:
        return self.ecall("__seal__", len(context).to_bytes(4, "big") + context + data)

    def unseal(self, blob: bytes, context: bytes = b"") -> bytes:
        return self.ecall("__unseal__", len(context).to_bytes(4, "big") + context + blob)

    def close(self) -> None:
        if self._process.is_alive():
            try:
                self._conn.send(("exit",))
            except (BrokenPipeError, OSError):
                pass
            self._process.join(timeout=5)
            if self._process.is_alive():
                self._process.kill()
                self._process.join(timeout=5)
        self._conn.close()

    def describe(self) -> str:
        return (f"simulated enclave {self.label!r} (no hardware isolation), pid {self.pid}, "
                f"measurement {self.measurement.hex()[:16]}...")


class SimulatedBackend(EnclaveBackend):
    name = BACKEND

    def __init__(self, platform: SimulatedPlatform | None = None) -> None:
        self.platform = platform or SimulatedPlatform.create()

    def load(self, code: EnclaveCode, *, label: str = "enclave") -> SimulatedEnclave:
        return SimulatedEnclave(code, self.platform, label=label)

    @property
    def attestation_root(self) -> bytes:
        return self.platform.attestation_root
