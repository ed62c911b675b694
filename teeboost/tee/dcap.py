"""Verifying quotes from real Intel hardware (SGX and TDX, DCAP), with a policy a bank can read.

The cryptographic chain (quote signature -> attestation key -> QE report -> PCK certificate ->
Intel's root, with CRLs, TCB info and QE identity) is checked by ``dcap-qvl``, a maintained
verifier (Rust core, MIT; optional extra ``teeboost[hardware]``). On top of it this module
decides what the project accepts, and says why it refuses:

- ``collateral-window``: "now" must lie inside the TCB info's and QE identity's issue/next-update
  window (stale collateral hides revoked TCBs);
- ``quote-signature``: anything the chain check rejects (one flipped byte of a report body lands
  here);
- ``tcb-status``: the platform's TCB status must be accepted (default: ``UpToDate`` only), and
  every advisory id it carries must be accepted too;
- ``measurement``: SGX: MRENCLAVE on the allow-list, or MRSIGNER with ISVPRODID and at least an
  ISVSVN; TDX: MRTD and the RTMRs the allow-list names;
- ``report-data``: the 64 report-data bytes must equal what the channel binds
  (``producers.hardware_report_data``: role, ephemeral key, both nonces and the run).

``DcapQuoteVerifier.verify`` has the signature of ``quote.QuoteVerifier.verify``, so the attested
channel takes either.
"""

from __future__ import annotations

import hmac
import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import AttestationError, ConfigError
from .producers import hardware_report_data
from .quote import Quote

__all__ = ["DcapPolicy", "DcapResult", "DcapQuoteVerifier", "Refused", "load_collateral", "REASONS"]

REASONS = ("quote-format", "collateral", "collateral-window", "quote-signature", "tcb-status", "measurement",
           "report-data")
#: TCB statuses Intel defines, for checking a configured policy.
TCB_STATUSES = ("UpToDate", "SWHardeningNeeded", "ConfigurationNeeded", "ConfigurationAndSWHardeningNeeded",
                "OutOfDate", "OutOfDateConfigurationNeeded", "Revoked")


class Refused(AttestationError):
    """A quote refused for a named reason (one of ``REASONS``)."""

    def __init__(self, reason: str, detail: str, result: "DcapResult | None" = None) -> None:
        super().__init__(f"quote refused ({reason}): {detail}")
        self.reason = reason
        self.detail = detail
        self.result = result  # what the quote said, when it verified but the policy refused it


@dataclass(frozen=True)
class SgxSigner:
    mr_signer: bytes
    isv_prod_id: int
    min_isv_svn: int


@dataclass(frozen=True)
class TdxMeasurement:
    mr_td: bytes
    rtmrs: tuple[bytes | None, ...] = (None, None, None, None)  # None: that RTMR is not pinned


@dataclass(frozen=True)
class DcapPolicy:
    """What the relying party accepts. Empty allow-lists accept no enclave at all."""

    accepted_statuses: frozenset[str] = frozenset({"UpToDate"})
    accepted_advisories: frozenset[str] = frozenset()
    mr_enclaves: frozenset[bytes] = frozenset()
    signers: tuple[SgxSigner, ...] = ()
    tdx: tuple[TdxMeasurement, ...] = ()

    def __post_init__(self) -> None:
        unknown = set(self.accepted_statuses) - set(TCB_STATUSES)
        if unknown:
            raise ConfigError(f"accepted TCB statuses {sorted(unknown)} are not Intel statuses "
                              f"({', '.join(TCB_STATUSES)})")
        if "Revoked" in self.accepted_statuses:
            raise ConfigError("a revoked TCB can never be accepted")

    @classmethod
    def from_config(cls, table: dict[str, Any]) -> "DcapPolicy":
        """``[attestation]`` table: accept_status, accept_advisories, mrenclave (hex list),
        mrsigner ({mrsigner, isv_prod_id, min_isv_svn} list), tdx ({mrtd, rtmr0..3} list)."""
        def hexes(value, name, size):
            try:
                out = bytes.fromhex(value)
            except (TypeError, ValueError):
                raise ConfigError(f"[attestation] {name} {value!r} must be hex") from None
            if len(out) != size:
                raise ConfigError(f"[attestation] {name} {value!r} must be {size} bytes")
            return out

        signers = tuple(SgxSigner(hexes(s["mrsigner"], "mrsigner", 32), int(s.get("isv_prod_id", 0)),
                                  int(s.get("min_isv_svn", 0))) for s in table.get("mrsigner", []))
        tdx = tuple(TdxMeasurement(hexes(t["mrtd"], "mrtd", 48),
                                   tuple(hexes(t[f"rtmr{i}"], f"rtmr{i}", 48) if f"rtmr{i}" in t else None
                                         for i in range(4))) for t in table.get("tdx", []))
        return cls(frozenset(table.get("accept_status", ["UpToDate"])),
                   frozenset(table.get("accept_advisories", [])),
                   frozenset(hexes(m, "mrenclave", 32) for m in table.get("mrenclave", [])), signers, tdx)


@dataclass
class DcapResult:
    """What a verified quote says (``teeboost attestation verify`` prints it)."""

    tee: str  # "sgx" or "tdx"
    status: str
    advisories: list[str]
    measurements: dict[str, str]  # hex
    report_data: bytes
    collateral_window: tuple[str, str]
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"tee": self.tee, "tcb_status": self.status, "advisories": self.advisories,
                "measurements": self.measurements, "report_data": self.report_data.hex(),
                "collateral_window": list(self.collateral_window), **self.detail}


def _dcap():
    try:
        import dcap_qvl
    except ImportError:
        raise ConfigError("verifying hardware quotes needs dcap-qvl: pip install 'teeboost[hardware]'") from None
    return dcap_qvl


def load_collateral(path: str | Path) -> str:
    """Collateral JSON (the format Intel's PCS/PCCS serves, as dcap-qvl reads it) from a file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        json.loads(text)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read collateral: {exc.strerror}") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: collateral is not JSON ({exc})") from None
    return text


def fetch_collateral(pccs_url: str, quote: bytes) -> str:
    """Collateral for ``quote`` from a PCCS (or Intel PCS) at ``pccs_url``."""
    import asyncio

    dcap = _dcap()

    async def fetch():
        return await dcap.get_collateral(pccs_url, quote)  # dcap-qvl fetches on the running event loop

    try:
        collateral = asyncio.run(fetch())
    except (RuntimeError, ValueError, OSError) as exc:
        raise Refused("collateral", f"could not fetch collateral from {pccs_url}: {exc}") from None
    return collateral.to_json() if hasattr(collateral, "to_json") else json.dumps(collateral)


def _window(collateral: dict, key: str) -> tuple[datetime, datetime, str, str]:
    try:
        body = json.loads(collateral[key])
        issued, update = body["issueDate"], body["nextUpdate"]
        return (datetime.fromisoformat(issued.replace("Z", "+00:00")),
                datetime.fromisoformat(update.replace("Z", "+00:00")), issued, update)
    except (KeyError, TypeError, ValueError) as exc:
        raise Refused("collateral", f"collateral has no readable {key} issue/next-update dates ({exc})") from None


class DcapQuoteVerifier:
    """Checks DCAP quotes against collateral, a clock and a ``DcapPolicy``."""

    backend = "dcap"

    def __init__(self, policy: DcapPolicy, collateral: str | None = None, *, pccs_url: str | None = None,
                 clock=time.time) -> None:
        if collateral is None and pccs_url is None:
            raise ConfigError("hardware quote verification needs collateral (a file) or a PCCS URL")
        self.policy = policy
        self._collateral = collateral
        self._pccs_url = pccs_url
        self._clock = clock

    def inspect(self, quote: bytes, *, now: float | None = None,
                expected_report_data: bytes | None = None) -> DcapResult:
        """Verify ``quote`` fully; the result, or ``Refused`` with its reason."""
        dcap = _dcap()
        now = self._clock() if now is None else now
        text = self._collateral if self._collateral is not None else fetch_collateral(self._pccs_url, quote)
        try:
            collateral = json.loads(text)
        except ValueError as exc:
            raise Refused("collateral", f"collateral is not JSON ({exc})") from None
        moment = datetime.fromtimestamp(now).astimezone()
        windows = [_window(collateral, "tcb_info"), _window(collateral, "qe_identity")]
        for start, end, issued, update in windows:
            if not start <= moment < end:
                raise Refused("collateral-window", f"now ({moment.isoformat()}) is outside the collateral's "
                                                   f"window {issued} .. {update}")
        try:
            parsed = dcap.parse_quote(quote)
        except (ValueError, RuntimeError) as exc:
            raise Refused("quote-format", f"not a DCAP quote ({exc})") from None
        try:
            verified = dcap.verify(quote, dcap.QuoteCollateralV3.from_json(text), int(now))
        except (ValueError, RuntimeError) as exc:
            message = str(exc)
            reason = "collateral-window" if "expired" in message.lower() else "quote-signature"
            raise Refused(reason, message) from None
        report = json.loads(verified.to_json())
        body = report.get("report", {})
        if "SgxEnclave" in body:
            tee, fields = "sgx", body["SgxEnclave"]
            measurements = {"mr_enclave": fields["mr_enclave"], "mr_signer": fields["mr_signer"],
                            "isv_prod_id": str(fields["isv_prod_id"]), "isv_svn": str(fields["isv_svn"])}
        else:
            tee, fields = "tdx", next(iter(body.values()))
            measurements = {"mr_td": fields["mr_td"], **{f"rtmr{i}": fields[f"rt_mr{i}"] for i in range(4)}}
        status, advisories = verified.status, list(verified.advisory_ids)
        try:
            fmspc = parsed.fmspc()
        except (ValueError, RuntimeError):
            fmspc = None
        result = DcapResult(tee, status, advisories, measurements, bytes.fromhex(fields["report_data"]),
                            (windows[0][2], windows[0][3]),
                            {"fmspc": fmspc if isinstance(fmspc, str) else (fmspc.hex() if fmspc else None),
                             "qe_tcb_status": report.get("qe_status", {}).get("status")})
        try:
            self._check_policy(result)
        except Refused as refusal:
            raise Refused(refusal.reason, refusal.detail, result) from None
        if expected_report_data is not None and not hmac.compare_digest(result.report_data, expected_report_data):
            raise Refused("report-data", f"report data {result.report_data.hex()[:32]}... does not bind this "
                                         f"channel (expected {expected_report_data.hex()[:32]}...)", result)
        return result

    def _check_policy(self, result: DcapResult) -> None:
        policy = self.policy
        if result.status not in policy.accepted_statuses:
            raise Refused("tcb-status", f"TCB status {result.status} is not accepted "
                                        f"(accepted: {', '.join(sorted(policy.accepted_statuses))})")
        refused = [a for a in result.advisories if a not in policy.accepted_advisories]
        if refused:
            raise Refused("tcb-status", f"advisories {', '.join(refused)} are not accepted")
        m = result.measurements
        if result.tee == "sgx":
            enclave = bytes.fromhex(m["mr_enclave"])
            signer = bytes.fromhex(m["mr_signer"])
            ok = any(hmac.compare_digest(enclave, e) for e in policy.mr_enclaves) or any(
                hmac.compare_digest(signer, s.mr_signer) and int(m["isv_prod_id"]) == s.isv_prod_id
                and int(m["isv_svn"]) >= s.min_isv_svn for s in policy.signers)
            if not ok:
                raise Refused("measurement", f"MRENCLAVE {m['mr_enclave']} (MRSIGNER {m['mr_signer']}, ISVPRODID "
                                             f"{m['isv_prod_id']}, ISVSVN {m['isv_svn']}) is not on the allow-list")
        else:
            td = bytes.fromhex(m["mr_td"])
            rtmrs = [bytes.fromhex(m[f"rtmr{i}"]) if m.get(f"rtmr{i}") else b"" for i in range(4)]
            ok = any(hmac.compare_digest(td, t.mr_td) and all(
                want is None or hmac.compare_digest(have, want) for have, want in zip(rtmrs, t.rtmrs))
                for t in policy.tdx)
            if not ok:
                raise Refused("measurement", f"MRTD {m['mr_td']} with its RTMRs is not on the allow-list")

    def verify(self, quote_bytes: bytes, *, nonce: bytes, report_data: bytes) -> Quote:
        """The channel's check: ``report_data`` is its binding, ``nonce`` the freshness nonce it
        sent; both must be what the enclave put in REPORTDATA (``hardware_report_data``)."""
        result = self.inspect(quote_bytes, expected_report_data=hardware_report_data(report_data, nonce))
        measurement = bytes.fromhex(result.measurements["mr_enclave" if result.tee == "sgx" else "mr_td"])
        return Quote(f"{result.tee}-dcap", measurement, result.report_data, b"", nonce, b"")
