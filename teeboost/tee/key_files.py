"""Which public key a ``[tee]`` key file stands for. Both kinds of file hold secrets and stay
on their party's host; only these public halves are shared: a platform file's attestation key
goes into every party's ``trusted_roots``, an identity key's public half into every party's
``identities``."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .identity import PartyIdentity
from .platform_file import read_platform_root

__all__ = ["public_key_of"]


def public_key_of(path: str | Path) -> tuple[str, bytes]:
    """("platform" or "identity", the file's 32-byte public key)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such file; `teeboost tee platform --out {path}` creates a platform file, "
                          f"`teeboost tee identity --out {path}` an identity key")
    for kind, read in (("platform", read_platform_root), ("identity", lambda p: PartyIdentity.load(p).public_key)):
        try:
            return kind, read(path)
        except ConfigError:
            continue
    raise ConfigError(f"{path}: neither a simulated platform file (`teeboost tee platform --out FILE`) nor a party "
                      "identity key (`teeboost tee identity --out FILE`)")
