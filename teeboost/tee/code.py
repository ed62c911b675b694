"""Enclave code and its measurement (the MRENCLAVE analogue).

An enclave program is Python source defining ``ecall_<name>(runtime, payload) -> bytes``
functions, plus the trusted library modules it imports and a configuration. Its measurement
is SHA-256 over all three, so changing one byte of the program, of a trusted library or of
the configuration changes it. Verifiers allow-list measurements, never names.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError

__all__ = ["EnclaveCode", "measure"]

_DOMAIN = b"teeboost-enclave-measurement-v1\x00"


def _module_source(name: str) -> bytes:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        raise ConfigError(f"trusted library {name!r} is not a Python source module")
    return Path(spec.origin).read_bytes()


def _field(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


def measure(program: bytes, libraries: tuple[str, ...], config: dict[str, Any]) -> bytes:
    """SHA-256 measurement of program, trusted library sources and configuration."""
    digest = hashlib.sha256(_DOMAIN)
    digest.update(_field(program))
    for name in libraries:
        digest.update(_field(name.encode()) + _field(_module_source(name)))
    digest.update(_field(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()))
    return digest.digest()


@dataclass(frozen=True)
class EnclaveCode:
    """What an enclave loads: program source, trusted libraries, configuration."""

    name: str
    program: bytes
    libraries: tuple[str, ...] = ()
    config: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_file(cls, path: str | Path, *, libraries: tuple[str, ...] = (), config: dict[str, Any] | None = None,
                  name: str | None = None) -> "EnclaveCode":
        path = Path(path)
        return cls(name or path.stem, path.read_bytes(), tuple(libraries), dict(config or {}))

    @property
    def measurement(self) -> bytes:
        """The value to put on verifiers' allow-lists."""
        return measure(self.program, self.libraries, self.config)
