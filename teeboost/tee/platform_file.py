"""The simulated platform's secrets on disk: what a real CPU keeps in fuses.

One file per platform (mode 0600): magic, the attestation public key (what verifiers trust),
the attestation private key, a platform id and the sealing secret. Hosts read only the public
part; the private parts are read by the enclave's runtime. On hardware the host cannot read
them at all; here the file stands in for the CPU, and its owner is outside the threat model
(docs/enclaves.md).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import ConfigError

__all__ = ["PLATFORM_FILE_BYTES", "create_platform_file", "read_platform_root", "read_platform_secrets"]

_MAGIC = b"TBP2"
PLATFORM_FILE_BYTES = 4 + 32 + 32 + 16 + 32


def _read(path: str | Path) -> bytes:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the simulated platform file ({exc.strerror}); create one with "
                          f"`teeboost tee platform --out {path}` and add the key it prints to every party's "
                          "[tee] trusted_roots") from None
    if len(raw) != PLATFORM_FILE_BYTES or raw[:4] != _MAGIC:
        raise ConfigError(f"{path}: not a simulated platform file (`teeboost tee platform --out FILE` writes one)")
    return raw


def read_platform_root(path: str | Path) -> bytes:
    """The platform's attestation public key (32 bytes), the root verifiers trust."""
    return _read(path)[4:36]


def read_platform_secrets(path: str | Path) -> tuple[bytes, bytes, bytes]:
    """(attestation private key, platform id, sealing secret): for the enclave runtime only."""
    raw = _read(path)
    return raw[36:68], raw[68:84], raw[84:116]


def create_platform_file(path: str | Path, public_key: bytes, private_key: bytes) -> None:
    """Write a new platform (refuses to replace one: sealed data would become unreadable)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "wb") as handle:
        handle.write(_MAGIC + public_key + private_key + os.urandom(16) + os.urandom(32))
