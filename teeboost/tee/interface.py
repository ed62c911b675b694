"""The enclave interface protocol code programs against, whatever the hardware.

Two faces, two types. The host holds an ``Enclave`` handle: the measurement its loader
reported, the program's own entry points (``ecall``) and ``close``; nothing else. Quoting,
sealing and key material exist only on the runtime object handed to enclave code inside
(``tee.runtime.EnclaveRuntime``), so no host-side code can name them. The simulated backend
(``tee.simulated``) implements this with an OS process; a Gramine-SGX or SEV-SNP backend
implements the same (docs/enclaves.md).
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
        """Measurement of the code actually loaded (reported by the loader)."""

    @abstractmethod
    def ecall(self, name: str, payload: bytes = b"", *, timeout: float | None = None) -> bytes:
        """Call the program's entry point ``ecall_<name>``; errors inside come back as
        ``EnclaveError`` (or the enclave's ``IntegrityError``/``AttestationError``/``ProtocolError``)."""

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
