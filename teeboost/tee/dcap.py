"""Verifying quotes from real Intel hardware (SGX and TDX, DCAP), with a policy a bank can read.

The cryptographic chain (quote signature -> attestation key -> QE report -> PCK certificate ->
Intel's root, with CRLs, TCB info and QE identity) is checked by ``dcap-qvl``, a maintained
verifier (Rust core, MIT; optional extra ``teeboost[hardware]``). On top of it this module
decides what the project accepts, and says why it refuses:

- ``collateral-window``: "now" must lie inside the TCB info's and QE identity's issue/next-update
  window (stale collateral hides revoked TCBs);
- ``quote-signature``: the quote's own signatures fail (one flipped byte of a report body lands
  here); ``collateral``: the collateral is unreadable, does not match the quote, is older than the
  policy's minimum TCB evaluation data number, or its CRLs/chains fail; ``debug``: a debug enclave
  or TD;
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
import math
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import AttestationError, ConfigError
from .producers import hardware_report_data
from .quote import Quote

__all__ = ["DcapPolicy", "DcapResult", "DcapQuoteVerifier", "Refused", "load_collateral", "REASONS"]

REASONS = ("quote-format", "collateral", "collateral-window", "quote-signature", "debug", "tcb-status",
           "measurement", "report-data")
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
    mr_config_id: bytes | None = None


@dataclass(frozen=True)
class DcapPolicy:
    """What the relying party accepts. Empty allow-lists accept no enclave at all."""

    accepted_statuses: frozenset[str] = frozenset({"UpToDate"})
    accepted_advisories: frozenset[str] = frozenset()
    mr_enclaves: frozenset[bytes] = frozenset()
    signers: tuple[SgxSigner, ...] = ()
    tdx: tuple[TdxMeasurement, ...] = ()
    min_tcb_evaluation_data_number: int = 0  # refuse collateral older than a TCB recovery

    def __post_init__(self) -> None:
        unknown = set(self.accepted_statuses) - set(TCB_STATUSES)
        if unknown:
            raise ConfigError(f"accepted TCB statuses {sorted(unknown)} are not Intel statuses "
                              f"({', '.join(TCB_STATUSES)})")
        if "Revoked" in self.accepted_statuses:
            raise ConfigError("a revoked TCB can never be accepted")

    @classmethod
    def from_config(cls, table: dict[str, Any]) -> "DcapPolicy":
        """``[attestation]`` table: accept_status, accept_advisories, min_tcb_evaluation_data_number,
        mrenclave (hex list), mrsigner ({mrsigner, isv_prod_id, min_isv_svn} list), tdx ({mrtd,
        rtmr0..3, optional mrconfigid; allow_unpinned_rtmrs} list). Every key is checked: a misspelt
        one would otherwise widen what is accepted."""
        where = "[attestation]"
        known = {"accept_status", "accept_advisories", "min_tcb_evaluation_data_number", "mrenclave", "mrsigner",
                 "tdx", "collateral", "pccs_url"}
        _no_unknown(table, known, where)

        def strings(name):
            value = table.get(name, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{where} {name} must be a list of strings, not {value!r}")
            return value

        def entries(name):
            value = table.get(name, [])
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                raise ConfigError(f"{where} {name} must be a list of tables, not {value!r}")
            return value

        signers = []
        for entry in entries("mrsigner"):
            _no_unknown(entry, {"mrsigner", "isv_prod_id", "min_isv_svn"}, f"{where} mrsigner entry")
            for key in ("mrsigner", "isv_prod_id", "min_isv_svn"):  # no default: 0 would accept any rollback
                if key not in entry:
                    raise ConfigError(f"{where} mrsigner entry needs {key!r}")
            signers.append(SgxSigner(_hex(entry["mrsigner"], "mrsigner", 32),
                                     _u16(entry["isv_prod_id"], "isv_prod_id"), _u16(entry["min_isv_svn"],
                                                                                    "min_isv_svn")))
        tdx = []
        for entry in entries("tdx"):
            _no_unknown(entry, {"mrtd", "rtmr0", "rtmr1", "rtmr2", "rtmr3", "mrconfigid", "allow_unpinned_rtmrs"},
                        f"{where} tdx entry")
            if "mrtd" not in entry:
                raise ConfigError(f"{where} tdx entry needs 'mrtd'")
            unpinned = entry.get("allow_unpinned_rtmrs", False)
            if not isinstance(unpinned, bool):
                raise ConfigError(f"{where} tdx allow_unpinned_rtmrs must be true or false")
            missing = [f"rtmr{i}" for i in (1, 2, 3) if f"rtmr{i}" not in entry]
            if missing and not unpinned:
                raise ConfigError(f"{where} tdx entry pins no {', '.join(missing)}: MRTD and RTMR0 measure the "
                                  "firmware only, the kernel and workload are in RTMR1-3 (set "
                                  "allow_unpinned_rtmrs = true to accept any)")
            tdx.append(TdxMeasurement(
                _hex(entry["mrtd"], "mrtd", 48),
                tuple(_hex(entry[f"rtmr{i}"], f"rtmr{i}", 48) if f"rtmr{i}" in entry else None for i in range(4)),
                _hex(entry["mrconfigid"], "mrconfigid", 48) if "mrconfigid" in entry else None))
        minimum = table.get("min_tcb_evaluation_data_number", 0)
        if isinstance(minimum, bool) or not isinstance(minimum, int) or minimum < 0:
            raise ConfigError(f"{where} min_tcb_evaluation_data_number must be a whole number >= 0")
        return cls(frozenset(strings("accept_status") or ["UpToDate"]), frozenset(strings("accept_advisories")),
                   frozenset(_hex(m, "mrenclave", 32) for m in strings("mrenclave")), tuple(signers), tuple(tdx),
                   minimum)


def _no_unknown(table: dict, known: set[str], where: str) -> None:
    unknown = set(table) - known
    if unknown:
        raise ConfigError(f"{where} has unknown field(s) {', '.join(sorted(unknown))}")


def _hex(value: Any, name: str, size: int) -> bytes:
    try:
        out = bytes.fromhex(value)
    except (TypeError, ValueError):
        raise ConfigError(f"[attestation] {name} {value!r} must be hex") from None
    if len(out) != size:
        raise ConfigError(f"[attestation] {name} {value!r} must be {size} bytes")
    return out


def _u16(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0xFFFF:
        raise ConfigError(f"[attestation] {name} = {value!r} must be a whole number from 0 to 65535")
    return value


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


def _window(collateral: dict, key: str) -> tuple[datetime, datetime, str, str, dict]:
    try:
        body = json.loads(collateral[key])
        issued, update = body["issueDate"], body["nextUpdate"]
        start = datetime.fromisoformat(issued.replace("Z", "+00:00"))
        end = datetime.fromisoformat(update.replace("Z", "+00:00"))
        if start.tzinfo is None or end.tzinfo is None:
            raise ValueError("dates without a time zone")
        return start, end, issued, update, body
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise Refused("collateral", f"collateral has no readable {key} issue/next-update dates ({exc})") from None


def _reason(message: str) -> str:
    """dcap-qvl's error text -> our reason: collateral faults are not the quote's."""
    text = message.lower()
    if "expired" in text or "not yet valid" in text:
        return "collateral-window"
    if "debug" in text:
        return "debug"
    if any(word in text for word in ("fmspc", "crl", "revocation", "qe identity", "qeidentity", "tcb info",
                                     "tcbinfo", "collateral", "issuer chain", "json")):
        return "collateral"
    return "quote-signature"


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
        quote = bytes(quote)
        now = self._clock() if now is None else now
        if not math.isfinite(now):
            raise Refused("collateral-window", f"'now' must be a finite time, not {now}")
        text = self._collateral if self._collateral is not None else fetch_collateral(self._pccs_url, quote)
        try:
            collateral = json.loads(text)
            parsed_collateral = dcap.QuoteCollateralV3.from_json(text)
        except (ValueError, TypeError, RuntimeError) as exc:
            raise Refused("collateral", f"collateral is not usable JSON ({exc})") from None
        if not isinstance(collateral, dict):
            raise Refused("collateral", "collateral must be a JSON object")
        moment = datetime.fromtimestamp(now).astimezone()
        windows = [_window(collateral, "tcb_info"), _window(collateral, "qe_identity")]
        for start, end, issued, update, _ in windows:
            if not start <= moment < end:
                raise Refused("collateral-window", f"now ({moment.isoformat()}) is outside the collateral's "
                                                   f"window {issued} .. {update}")
        evaluation = windows[0][4].get("tcbEvaluationDataNumber")
        if not isinstance(evaluation, int) or evaluation < self.policy.min_tcb_evaluation_data_number:
            raise Refused("collateral", f"TCB info evaluation data number {evaluation!r} is older than the policy's "
                                        f"minimum {self.policy.min_tcb_evaluation_data_number}")
        try:
            parsed = dcap.parse_quote(quote)
        except (ValueError, RuntimeError) as exc:
            raise Refused("quote-format", f"not a DCAP quote ({exc})") from None
        try:
            verified = dcap.verify(quote, parsed_collateral, int(now))
        except (ValueError, RuntimeError) as exc:
            raise Refused(_reason(str(exc)), str(exc)) from None
        report = json.loads(verified.to_json())
        body = report.get("report", {})
        if "SgxEnclave" in body:
            tee, fields = "sgx", body["SgxEnclave"]
            measurements = {"mr_enclave": fields["mr_enclave"], "mr_signer": fields["mr_signer"],
                            "isv_prod_id": str(fields["isv_prod_id"]), "isv_svn": str(fields["isv_svn"])}
        else:
            tee, fields = "tdx", next(iter(body.values()))
            measurements = {"mr_td": fields["mr_td"], **{f"rtmr{i}": fields[f"rt_mr{i}"] for i in range(4)},
                            "mr_config_id": fields.get("mr_config_id", "")}
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
            first = next((i for i, (a, b) in enumerate(zip(result.report_data, expected_report_data)) if a != b),
                         min(len(result.report_data), len(expected_report_data)))
            raise Refused("report-data", f"report data differs from the expected {len(expected_report_data)} bytes "
                                         f"from byte {first} on (quote: {result.report_data[first:first + 8].hex()}..., "
                                         f"expected: {expected_report_data[first:first + 8].hex()}...)", result)
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
            config_id = bytes.fromhex(m.get("mr_config_id", ""))
            ok = any(hmac.compare_digest(td, t.mr_td) and all(
                want is None or hmac.compare_digest(have, want) for have, want in zip(rtmrs, t.rtmrs))
                and (t.mr_config_id is None or hmac.compare_digest(config_id, t.mr_config_id))
                for t in policy.tdx)
            if not ok:
                raise Refused("measurement", f"MRTD {m['mr_td']} with its RTMRs is not on the allow-list")

    def verify(self, quote_bytes: bytes, *, nonce: bytes, report_data: bytes) -> Quote:
        """The channel's check: ``report_data`` is its binding, ``nonce`` the freshness nonce it
        sent; both must be what the enclave put in REPORTDATA (``hardware_report_data``)."""
        result = self.inspect(quote_bytes, expected_report_data=hardware_report_data(report_data, nonce))
        measurement = bytes.fromhex(result.measurements["mr_enclave" if result.tee == "sgx" else "mr_td"])
        return Quote(f"{result.tee}-dcap", measurement, result.report_data, b"", nonce, b"")
