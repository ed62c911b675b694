"""Attestation quotes and their verification.

A quote is (backend, measurement, report data, platform id, freshness nonce) signed by the
platform's attestation key; the key's public half is the root a verifier trusts (the role of
Intel's attestation service or AMD's VCEK chain). ``QuoteVerifier.verify`` checks signature,
trusted root, allowed measurement, nonce and report data, and raises the same opaque
``AttestationError`` whichever check fails.
"""

from __future__ import annotations

import hmac
import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ..errors import AttestationError

__all__ = ["Quote", "QuoteVerifier", "REPORT_DATA_BYTES", "NONCE_BYTES"]

REPORT_DATA_BYTES = 64  # as SGX's REPORTDATA
NONCE_BYTES = 32
_MAGIC = b"TBQ1"
_BODY = struct.Struct(f"<4s16s32s{REPORT_DATA_BYTES}s16s{NONCE_BYTES}s")


@dataclass(frozen=True)
class Quote:
    backend: str  # "simulated" for the simulated backend: verifiers and reports show it
    measurement: bytes
    report_data: bytes
    platform_id: bytes
    nonce: bytes
    signature: bytes = b""

    def body(self) -> bytes:
        return _BODY.pack(_MAGIC, self.backend.encode().ljust(16, b"\0"), self.measurement,
                          self.report_data, self.platform_id, self.nonce)

    def signed(self, key: Ed25519PrivateKey) -> "Quote":
        return Quote(self.backend, self.measurement, self.report_data, self.platform_id, self.nonce,
                     key.sign(self.body()))

    def to_bytes(self) -> bytes:
        return self.body() + self.signature

    @classmethod
    def from_bytes(cls, data: bytes) -> "Quote":
        if len(data) != _BODY.size + 64:
            raise AttestationError()
        magic, backend, measurement, report_data, platform_id, nonce = _BODY.unpack(data[:_BODY.size])
        if magic != _MAGIC:
            raise AttestationError()
        try:
            backend_name = backend.rstrip(b"\0").decode("ascii")
        except UnicodeDecodeError:
            raise AttestationError() from None
        return cls(backend_name, measurement, report_data, platform_id, nonce, data[_BODY.size:])


class QuoteVerifier:
    """What a relying party trusts: platform roots and enclave measurements."""

    def __init__(self, trusted_roots: list[bytes], allowed_measurements: list[bytes], *,
                 allow_simulated: bool = False) -> None:
        """Simulated quotes (no hardware behind them) are refused unless ``allow_simulated``."""
        self._roots = [Ed25519PublicKey.from_public_bytes(r) for r in trusted_roots]
        self._allowed = [bytes(m) for m in allowed_measurements]
        self.allow_simulated = allow_simulated

    def verify(self, quote_bytes: bytes, *, nonce: bytes, report_data: bytes) -> Quote:
        """The verified quote, or ``AttestationError`` (which check failed is not revealed)."""
        quote = Quote.from_bytes(quote_bytes)
        ok = False
        for root in self._roots:
            try:
                root.verify(quote.signature, quote.body())
                ok = True
                break
            except InvalidSignature:
                continue
        ok &= any(hmac.compare_digest(quote.measurement, m) for m in self._allowed)
        ok &= hmac.compare_digest(quote.nonce, nonce)
        ok &= hmac.compare_digest(quote.report_data, report_data.ljust(REPORT_DATA_BYTES, b"\0"))
        ok &= self.allow_simulated or quote.backend != "simulated"
        if not ok:
            raise AttestationError()
        return quote
