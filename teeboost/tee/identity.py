"""A party's long-term identity key (Ed25519), held by the party's host.

Enclaves pin every party's public identity key for a run; a party signs each channel
handshake with its private key (``tee.channel.party_statement``), so nobody else, the
active party's host included, can open a channel in its name. Key files are written once,
mode 0600, never followed through a symlink.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ..errors import ConfigError

__all__ = ["PartyIdentity"]

_MAGIC = b"TBI1"


class PartyIdentity:
    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._key = key
        self.public_key = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)

    @classmethod
    def generate(cls) -> "PartyIdentity":
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def load(cls, path: str | Path) -> "PartyIdentity":
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the party identity key ({exc.strerror}); create one with "
                              f"`teeboost tee identity --out {path}` and put the key it prints in every party's "
                              "[tee] identities, at this party's index") from None
        if len(raw) != 36 or raw[:4] != _MAGIC:
            raise ConfigError(f"{path}: not a teeboost party identity key (`teeboost tee identity --out FILE` "
                              "writes one)")
        return cls(Ed25519PrivateKey.from_private_bytes(raw[4:]))

    @classmethod
    def load_or_create(cls, path: str | Path) -> "PartyIdentity":
        path = Path(path)
        if path.exists():
            return cls.load(path)
        identity = cls.generate()
        identity.save(path)
        return identity

    def save(self, path: str | Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags, stat.S_IRUSR | stat.S_IWUSR)
        raw = self._key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                      serialization.NoEncryption())
        with os.fdopen(fd, "wb") as handle:
            handle.write(_MAGIC + raw)

    def sign(self, statement: bytes) -> bytes:
        return self._key.sign(statement)
