"""Sealing: data an enclave stores outside itself, readable only by the same enclave code.

The sealing key is HKDF-SHA256 over the platform's sealing secret with the enclave's
measurement as salt (SGX's MRENCLAVE policy), so a blob sealed by one enclave cannot be opened
by different code, nor on another platform. AES-256-GCM; the measurement and caller-chosen
context are authenticated as associated data.
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ..errors import IntegrityError

__all__ = ["seal", "unseal"]

_VERSION = b"TBS1"


def _key(platform_secret: bytes, measurement: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=measurement,
                info=b"teeboost sealing key v1").derive(platform_secret)


def seal(platform_secret: bytes, measurement: bytes, data: bytes, context: bytes = b"") -> bytes:
    nonce = os.urandom(12)
    sealed = AESGCM(_key(platform_secret, measurement)).encrypt(nonce, data, _VERSION + measurement + context)
    return _VERSION + nonce + sealed


def unseal(platform_secret: bytes, measurement: bytes, blob: bytes, context: bytes = b"") -> bytes:
    if len(blob) < 4 + 12 + 16 or blob[:4] != _VERSION:
        raise IntegrityError()
    try:
        return AESGCM(_key(platform_secret, measurement)).decrypt(blob[4:16], blob[16:],
                                                                  _VERSION + measurement + context)
    except InvalidTag:
        raise IntegrityError() from None
