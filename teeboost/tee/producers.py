"""Hardware quote producers: where a real enclave or confidential VM gets its quote.

``EnclaveRuntime.quote`` signs a *simulated* quote with the platform file's key. On hardware the
quote comes from the platform instead, through a file protocol; a ``QuoteProducer`` speaks it:

- ``GramineSgxProducer``: Gramine-SGX's ``/dev/attestation`` pseudo-files (DCAP). Write the 64
  report-data bytes to ``user_report_data``, read the quote from ``quote``.
- ``TsmReportProducer``: Linux configfs-tsm (``/sys/kernel/config/tsm/report``), the kernel's
  common interface for TDX (``tdx_guest``) and SEV-SNP (``sev_guest``) guests. One fresh report
  entry per quote: ``mkdir``, write ``inblob``, read ``outblob``, check ``generation`` so a
  concurrent writer cannot slip its own report data in, ``rmdir``
  (Documentation/ABI/testing/configfs-tsm in the kernel tree).

Hardware REPORTDATA is 64 bytes and has no separate nonce field, so ``hardware_report_data`` folds
the channel's binding and the peer's freshness nonce into it; the verifying side
(``tee.dcap``) recomputes the same value.

Status: the file protocols are exercised only against temporary directories that emulate
Gramine and the kernel (tests/tee/test_producers.py). Neither producer has run on SGX, TDX or
SEV-SNP hardware here.

This module runs inside enclaves (``tee.runtime`` imports it, so it is in every measured
bundle): standard library and ``..errors`` only.
"""

from __future__ import annotations

import hashlib
import os
import threading
from abc import ABC, abstractmethod
from pathlib import Path

from ..errors import EnclaveError

__all__ = ["REPORT_DATA_BYTES", "hardware_report_data", "QuoteProducer", "GramineSgxProducer",
           "TsmReportProducer", "producer_from_config", "PRODUCERS"]

REPORT_DATA_BYTES = 64
NONCE_BYTES = 32
_DOMAIN = b"teeboost-hw-quote-v1|"
#: configfs-tsm provider name -> the backend name teeboost reports.
_TSM_BACKENDS = {"tdx_guest": "tdx", "sev_guest": "sev-snp"}


def hardware_report_data(binding: bytes, nonce: bytes) -> bytes:
    """The 64 REPORTDATA bytes of a hardware quote: SHA-512 over
    ``b"teeboost-hw-quote-v1|" + binding + b"|" + nonce``. ``binding`` is what the channel binds
    (at most 64 bytes), ``nonce`` the peer's 32-byte freshness nonce."""
    binding, nonce = bytes(binding), bytes(nonce)
    if len(binding) > REPORT_DATA_BYTES or len(nonce) != NONCE_BYTES:
        raise EnclaveError(f"report data must be <= {REPORT_DATA_BYTES} bytes and the nonce {NONCE_BYTES} bytes "
                           f"(got {len(binding)} and {len(nonce)})")
    return hashlib.sha512(_DOMAIN + binding + b"|" + nonce).digest()


def _check_report_data(report_data: bytes) -> bytes:
    report_data = bytes(report_data)
    if len(report_data) != REPORT_DATA_BYTES:
        raise EnclaveError(f"a hardware quote takes exactly {REPORT_DATA_BYTES} bytes of report data, "
                           f"got {len(report_data)}")
    return report_data


def _write_all(path: Path, data: bytes) -> None:
    """One ``write`` of all bytes on an unbuffered descriptor, then close: pseudo-files take the
    value as one write (configfs binary attributes commit it on close)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        written = os.write(fd, data)
    finally:
        os.close(fd)
    if written != len(data):
        raise EnclaveError(f"short write to {path}: {written} of {len(data)} bytes")


class QuoteProducer(ABC):
    """Turns 64 bytes of report data into a raw platform quote."""

    backend: str

    @abstractmethod
    def quote(self, report_data: bytes) -> bytes:
        """``report_data``: exactly 64 bytes (``hardware_report_data``). Returns the quote bytes
        exactly as the platform produced them (the verifier parses them)."""


class GramineSgxProducer(QuoteProducer):
    """SGX DCAP quotes through Gramine's ``/dev/attestation`` pseudo-filesystem.

    The manifest must set ``sgx.remote_attestation = "dcap"`` (``tee/gramine/
    enclave.manifest.template``). ``user_report_data`` is one per enclave, so quotes are
    serialised by a lock: two threads interleaving would otherwise each read the other's quote.

    Test seam: ``_write_attribute`` is where Gramine does work a plain file does not (the next
    read of ``quote`` reflects the report data written); tests override it to emulate that
    over a temporary directory. Production: one ``write`` of the 64 bytes.
    """

    backend = "gramine-sgx"
    _lock = threading.Lock()

    def __init__(self, root: Path | str = Path("/dev/attestation")) -> None:
        self.root = Path(root)

    def _write_attribute(self, path: Path, data: bytes) -> None:
        _write_all(path, data)

    def _attestation_type(self) -> str:
        path = self.root / "attestation_type"
        try:
            return path.read_bytes().decode("ascii", "replace").strip().strip("\0")
        except OSError as exc:
            raise EnclaveError(f"cannot read {path} ({exc.strerror or exc}): not running under Gramine-SGX "
                               "with remote attestation enabled") from None

    def quote(self, report_data: bytes) -> bytes:
        report_data = _check_report_data(report_data)
        kind = self._attestation_type()
        if kind != "dcap":
            raise EnclaveError(f"{self.root / 'attestation_type'} says {kind!r}, not 'dcap': the Gramine manifest "
                               "must set sgx.remote_attestation = \"dcap\" (and the enclave must run on SGX)")
        with self._lock:
            try:
                self._write_attribute(self.root / "user_report_data", report_data)
                quote = (self.root / "quote").read_bytes()
            except OSError as exc:
                raise EnclaveError(f"Gramine attestation under {self.root} failed: {exc}") from None
        if not quote:
            raise EnclaveError(f"{self.root / 'quote'} returned an empty quote")
        return quote


class TsmReportProducer(QuoteProducer):
    """TDX and SEV-SNP quotes (reports) through Linux configfs-tsm.

    Per quote: ``mkdir root/teeboost-<random hex>`` (the kernel populates the entry), read
    ``generation``, write 64 bytes to ``inblob``, read ``outblob``, read ``generation`` again
    and require exactly one write in between (the kernel bumps it on every ``inblob`` or option
    write, so anything else means another writer raced on this entry and ``outblob`` may carry
    its report data), read ``provider``, ``rmdir`` the entry. ``outblob`` is returned as is: a
    TDX quote, or a SEV-SNP attestation report (its certificates, in ``auxblob``, are not
    collected here).

    ``provider`` (e.g. ``"tdx_guest"``) pins the kernel provider; a mismatch is refused. Without
    it, the first quote's provider is pinned for the producer's life, and ``backend`` is
    ``"tsm"`` until then.

    Test seam: ``_make_entry``, ``_write_attribute`` and ``_remove_entry`` are the three places
    where configfs behaves unlike a plain directory (``mkdir`` populates the entry, a write
    regenerates it, ``rmdir`` takes the attributes away). Tests override them to emulate the
    kernel over a temporary directory; production uses them as written here: plain ``mkdir``,
    one ``write``, plain ``rmdir``.
    """

    def __init__(self, root: Path | str = Path("/sys/kernel/config/tsm/report"), provider: str | None = None) -> None:
        self.root = Path(root)
        if provider is not None and (not isinstance(provider, str) or not provider.strip()):
            raise EnclaveError(f"configfs-tsm provider must be a non-empty name such as 'tdx_guest', got {provider!r}")
        self.provider = provider.strip() if provider is not None else None

    @property
    def backend(self) -> str:
        if self.provider is None:
            return "tsm"
        return _TSM_BACKENDS.get(self.provider, f"tsm:{self.provider}")

    # -- the kernel boundary (overridden by tests; see the class docstring)

    def _make_entry(self, entry: Path) -> None:
        entry.mkdir(mode=0o700)

    def _write_attribute(self, path: Path, data: bytes) -> None:
        _write_all(path, data)

    def _remove_entry(self, entry: Path) -> None:
        entry.rmdir()

    # --

    def _read_generation(self, entry: Path) -> int:
        text = (entry / "generation").read_bytes().decode("ascii", "replace").strip()
        try:
            return int(text)
        except ValueError:
            raise EnclaveError(f"{entry / 'generation'} is not a number: {text!r}") from None

    def quote(self, report_data: bytes) -> bytes:
        report_data = _check_report_data(report_data)
        entry = self.root / f"teeboost-{os.urandom(8).hex()}"
        try:
            self._make_entry(entry)
        except OSError as exc:
            raise EnclaveError(f"cannot create configfs-tsm report entry {entry} ({exc.strerror or exc}); "
                               "is this a TDX or SEV-SNP guest with configfs mounted, and are we allowed "
                               "to write there?") from None
        failed = True
        try:
            try:
                before = self._read_generation(entry)
                self._write_attribute(entry / "inblob", report_data)
                outblob = (entry / "outblob").read_bytes()
                after = self._read_generation(entry)
                provider = (entry / "provider").read_bytes().decode("ascii", "replace").strip()
            except OSError as exc:
                raise EnclaveError(f"configfs-tsm report under {entry} failed: {exc}") from None
            if after != before + 1:
                raise EnclaveError(f"configfs-tsm report {entry}: generation went from {before} to {after}, expected "
                                   f"{before + 1} (our one inblob write): another writer raced on the entry or our "
                                   "write was not taken; refusing the outblob")
            if self.provider is not None and provider != self.provider:
                raise EnclaveError(f"configfs-tsm provider is {provider!r}, expected {self.provider!r}")
            if not provider:
                raise EnclaveError(f"{entry / 'provider'} is empty")
            if not outblob:
                raise EnclaveError(f"{entry / 'outblob'} returned an empty report")
            self.provider = provider  # pin it: a VM's provider does not change under a running program
            failed = False
            return outblob
        finally:
            try:
                self._remove_entry(entry)
            except OSError as exc:
                if not failed:  # a failure above stays the error reported; this one would hide it
                    raise EnclaveError(f"cannot remove configfs-tsm report entry {entry}: {exc}") from None


#: Names ``producer_from_config`` accepts.
PRODUCERS = ("gramine-sgx", "tsm", "tdx", "sev-snp")


def producer_from_config(name: str, **kw) -> QuoteProducer:
    """``"gramine-sgx"`` -> ``GramineSgxProducer(**kw)``; ``"tsm"`` -> ``TsmReportProducer(**kw)``;
    ``"tdx"`` / ``"sev-snp"``: ``TsmReportProducer`` pinned to ``tdx_guest`` / ``sev_guest``."""
    if name == "gramine-sgx":
        return GramineSgxProducer(**kw)
    if name == "tsm":
        return TsmReportProducer(**kw)
    if name in ("tdx", "sev-snp"):
        pinned = "tdx_guest" if name == "tdx" else "sev_guest"
        if kw.get("provider", pinned) != pinned:
            raise EnclaveError(f"quote producer {name!r} means provider {pinned!r}, not {kw['provider']!r}")
        return TsmReportProducer(**{**kw, "provider": pinned})
    raise EnclaveError(f"unknown quote producer {name!r}; known: {', '.join(PRODUCERS)}")
