"""The enclave interface protocol code programs against, whatever the hardware.

A backend loads ``EnclaveCode`` into an isolated environment and returns an ``Enclave``:
entry points (ecalls) take and return bytes; ``quote`` produces an attestation quote over
caller-chosen report data; ``seal``/``unseal`` protect data stored outside the enclave.
The simulated backend (``tee.simulated``) implements it with an OS process; a Gramine-SGX or
SEV-SNP backend implements the same four operations (docs/enclaves.md).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from .code import EnclaveCode

__all__ = ["Enclave", "EnclaveBackend"]


class Enclave(ABC):
    backend: str  # "simulated", "gramine-sgx", ...

    @property
    @abstractmethod
    def measurement(self) -> bytes:
        """Measurement of the code actually loaded (reported by the enclave itself)."""

    @abstractmethod
    def ecall(self, name: str, payload: bytes = b"", *, timeout: float | None = None) -> bytes:
        """Call entry point ``name``; errors inside the enclave come back as ``EnclaveError``."""

    @abstractmethod
    def quote(self, report_data: bytes, nonce: bytes) -> bytes:
        """Attestation quote binding ``report_data`` (<= 64 bytes) and a verifier's nonce."""

    @abstractmethod
    def seal(self, data: bytes, context: bytes = b"") -> bytes:
        """Encrypt data so that only this enclave code on this platform can unseal it."""

    @abstractmethod
    def unseal(self, blob: bytes, context: bytes = b"") -> bytes:
        """Inverse of ``seal``; ``IntegrityError`` for any other code, platform or tampering."""

    @abstractmethod
    def close(self) -> None:
        """Destroy the enclave and its memory."""

    def describe(self) -> str:
        return f"{self.backend} enclave, measurement {self.measurement.hex()[:16]}..."

    def __enter__(self) -> "Enclave":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class EnclaveBackend(ABC):
    name: str

    @abstractmethod
    def load(self, code: EnclaveCode, *, label: str = "enclave") -> Enclave:
        """Start an enclave running ``code``."""

    @property
    @abstractmethod
    def attestation_root(self) -> bytes:
        """Public key verifiers trust for this backend's quotes."""
