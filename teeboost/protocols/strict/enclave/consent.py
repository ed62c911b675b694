"""The label owner's consent to disclose a passive party's strict split records.

A passive party's split records say which way the labels lean at each of its splits, so in
strict mode they stay sealed in its enclave (issue #32). Export and importances need them in
the clear; that takes two explicit acts: the label owner signs a consent naming the model
digest and the party (``teeboost consent``), and the passive party takes it to a fresh enclave
of its own, which opens the records only if the signature is by the label owner's identity
key pinned in the run that sealed them (``teeboost disclose``). Both acts are audited.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from teeboost.errors import AttestationError, ConfigError

__all__ = ["Consent", "consent_statement", "verify_consent", "CONSENT_FORMAT"]

CONSENT_FORMAT = "teeboost-disclosure-consent"


def consent_statement(model_digest: bytes, party: int) -> bytes:
    """What the label owner signs: this model's records of this party may leave its enclave."""
    if len(model_digest) != 32 or party < 1:
        raise ConfigError("a consent names a 32-byte model digest and a passive party index (>= 1)")
    return b"teeboost-strict-disclose-records-v1" + model_digest + party.to_bytes(4, "big")


def verify_consent(active_key: bytes, model_digest: bytes, party: int, signature: bytes) -> None:
    """Raise unless ``signature`` is the label owner's consent for these records."""
    try:
        Ed25519PublicKey.from_public_bytes(active_key).verify(signature, consent_statement(model_digest, party))
    except (InvalidSignature, ValueError):
        raise AttestationError("the consent is not signed by the label owner's identity key of the run that sealed "
                               "these records, or names another model or party") from None


@dataclass(frozen=True)
class Consent:
    """A signed consent as a file the label owner hands to one passive party."""

    model_digest: str  # hex
    party: int
    party_name: str
    signed_by: str  # hex public identity key of the label owner
    signature: str  # hex

    @classmethod
    def sign(cls, identity, model_digest: str, party: int, party_name: str) -> "Consent":
        signature = identity.sign(consent_statement(bytes.fromhex(model_digest), party))
        return cls(model_digest, party, party_name, identity.public_key.hex(), signature.hex())

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps({"format": CONSENT_FORMAT, "version": 1, **self.__dict__}, indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "Consent":
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{path}: not a readable consent file ({exc})") from None
        if not isinstance(data, dict) or data.get("format") != CONSENT_FORMAT:
            raise ConfigError(f"{path}: not a teeboost consent file (the label owner writes one with "
                              "`teeboost consent`)")
        try:
            consent = cls(str(data["model_digest"]), int(data["party"]), str(data["party_name"]),
                          str(data["signed_by"]), str(data["signature"]))
            bytes.fromhex(consent.model_digest), bytes.fromhex(consent.signature)
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{path}: consent field {exc} is missing or malformed") from None
        return consent
