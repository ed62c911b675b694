"""``teeboost tee`` (a party's identity key, a simulated platform, their public keys) and
``teeboost attestation verify`` (an SGX/TDX DCAP quote against Intel collateral and a policy)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import ConfigError, DataError


def add_tee(sub) -> None:
    tee = sub.add_parser("tee", help="enclave set-up: a party's identity key, a simulated platform")
    tee_sub = tee.add_subparsers(dest="tee_command", required=True)
    identity = tee_sub.add_parser("identity", help="create (or read) this party's identity key (keep it secret) "
                                                   "and print its public key for every party's [tee] identities")
    identity.add_argument("--out", type=Path, required=True, help="key file (created if missing, mode 0600; never replaced)")
    identity.set_defaults(func=_cmd_tee_identity)
    platform = tee_sub.add_parser("platform", help="create (or read) a simulated platform file and print its "
                                                   "attestation public key for every party's [tee] trusted_roots")
    platform.add_argument("--out", type=Path, required=True, help="platform file (created if missing)")
    platform.set_defaults(func=_cmd_tee_platform)
    public_key = tee_sub.add_parser("public-key", help="print the public key of a platform file (for [tee] "
                                                       "trusted_roots) or of an identity key (for [tee] identities)")
    public_key.add_argument("file", type=Path, help="a platform file or an identity key file")
    public_key.set_defaults(func=_cmd_tee_public_key)


def add_attestation(sub) -> None:
    attestation = sub.add_parser("attestation", help="hardware attestation: verify SGX/TDX DCAP quotes")
    attestation_sub = attestation.add_subparsers(dest="attestation_command", required=True)
    verify = attestation_sub.add_parser("verify", help="verify a DCAP quote against Intel collateral and a policy")
    verify.add_argument("quote", type=Path, help="raw quote file")
    source = verify.add_mutually_exclusive_group(required=True)
    source.add_argument("--collateral", type=Path, help="collateral JSON (PCS/PCCS format)")
    source.add_argument("--pccs-url", help="fetch the collateral from this PCCS (or Intel PCS)")
    verify.add_argument("--now", type=float, help="verify as of this Unix time (default: now)")
    verify.add_argument("--policy", type=Path, help="TOML file with an [attestation] table (see docs/enclaves.md)")
    verify.add_argument("--accept-status", action="append", metavar="STATUS",
                        help="accept this TCB status too (default: UpToDate only); repeat")
    verify.add_argument("--accept-advisory", action="append", metavar="ID", help="accept this advisory id; repeat")
    verify.add_argument("--mrenclave", action="append", metavar="HEX", help="allowed SGX MRENCLAVE; repeat")
    verify.add_argument("--mrsigner", action="append", metavar="HEX:PRODID:MINSVN",
                        help="allowed SGX signer, product id and lowest ISVSVN; repeat")
    verify.add_argument("--mrtd", action="append", metavar="HEX", help="allowed TDX MRTD; repeat")
    verify.add_argument("--rtmr", action="append", metavar="N=HEX",
                        help="TDX RTMR N the quote must carry (with --mrtd); repeat for 1, 2, 3")
    verify.add_argument("--allow-unpinned-rtmrs", action="store_true",
                        help="accept a TDX quote whatever RTMR1-3 hold (they measure kernel and workload)")
    verify.add_argument("--report-data", metavar="HEX", help="report data the quote must carry (exactly 64 bytes)")
    verify.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    verify.set_defaults(func=_cmd_attestation_verify)


def _cmd_tee_identity(args: argparse.Namespace) -> int:
    """Like ``tee platform``: creates the key if missing, else reads it and prints its public
    key again, so a set-up script can be re-run. Printing is safe (the public half is what
    every party is given anyway); replacing is what would not be, and never happens here."""
    from ..tee.identity import PartyIdentity

    if args.out.is_symlink() and not args.out.exists():
        raise ConfigError(f"{args.out} is a dangling symlink; an identity key is created only as a new file")
    existed = args.out.exists()
    if existed:
        identity = PartyIdentity.load(args.out)  # refuses a file that is not an identity key
        if args.out.stat().st_mode & 0o077:
            print(f"teeboost: warning: {args.out} can be read by other users; it is this party's secret "
                  f"(chmod 600 {args.out})", file=sys.stderr)
    else:
        identity = PartyIdentity.generate()
        identity.save(args.out)
    print(identity.public_key.hex())
    print(f"{args.out}: {'an existing identity key, kept (never replaced;' if existed else 'a new identity key (mode 0600;'}"
          " keep it on this host); the key printed is its public key, for every party's [tee] identities at this "
          "party's index", file=sys.stderr)
    return 0


def _cmd_tee_platform(args: argparse.Namespace) -> int:
    from ..tee.simulated import SimulatedPlatform

    existed = args.out.exists()
    print(SimulatedPlatform.load_or_create(args.out).attestation_root.hex())
    print(f"{args.out}: {'an existing' if existed else 'a new'} simulated platform (keep it on this host); the "
          "key printed is its public key, for every party's [tee] trusted_roots", file=sys.stderr)
    return 0


def _cmd_tee_public_key(args: argparse.Namespace) -> int:
    from ..tee.key_files import public_key_of

    kind, key = public_key_of(args.file)
    print(key.hex())
    where = "trusted_roots" if kind == "platform" else "identities (at this party's index)"
    print(f"{args.file}: a {kind} file; the key printed is its public key, for every party's [tee] {where}",
          file=sys.stderr)
    return 0


def _cmd_attestation_verify(args: argparse.Namespace) -> int:
    import tomllib

    from ..tee.dcap import DcapPolicy, DcapQuoteVerifier, Refused, load_collateral

    table: dict = {}
    if args.policy is not None:
        try:
            table = dict(tomllib.loads(args.policy.read_text(encoding="utf-8")).get("attestation", {}))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{args.policy}: cannot read the policy: {exc}") from None
    if args.accept_status:
        table["accept_status"] = sorted(set(table.get("accept_status", ["UpToDate"])) | set(args.accept_status))
    if args.accept_advisory:
        table["accept_advisories"] = list(table.get("accept_advisories", [])) + args.accept_advisory
    table["mrenclave"] = list(table.get("mrenclave", [])) + (args.mrenclave or [])
    signers = list(table.get("mrsigner", []))
    for text in args.mrsigner or []:
        parts = text.split(":")
        if len(parts) != 3:
            raise ConfigError(f"--mrsigner {text!r} must be HEX:PRODID:MINSVN")
        signers.append({"mrsigner": parts[0], "isv_prod_id": int(parts[1]), "min_isv_svn": int(parts[2])})
    table["mrsigner"] = signers
    rtmrs = {}
    for text in args.rtmr or []:
        index, sep, value = text.partition("=")
        if not sep or index not in ("0", "1", "2", "3"):
            raise ConfigError(f"--rtmr {text!r} must be N=HEX with N from 0 to 3")
        rtmrs[f"rtmr{index}"] = value
    table["tdx"] = list(table.get("tdx", [])) + [
        {"mrtd": m, **rtmrs, **({"allow_unpinned_rtmrs": True} if args.allow_unpinned_rtmrs else {})}
        for m in args.mrtd or []]
    policy = DcapPolicy.from_config(table)
    expected = None
    if args.report_data is not None:
        try:
            expected = bytes.fromhex(args.report_data)
        except ValueError:
            raise ConfigError(f"--report-data {args.report_data!r} must be hex") from None
        if len(expected) != 64:
            raise ConfigError(f"--report-data must be exactly 64 bytes (128 hex digits), not {len(expected)}")
    try:
        quote = args.quote.read_bytes()
    except OSError as exc:
        raise DataError(f"{args.quote}: cannot read the quote: {exc.strerror}") from None
    collateral = load_collateral(args.collateral) if args.collateral is not None else None
    verifier = DcapQuoteVerifier(policy, collateral, pccs_url=args.pccs_url)
    try:
        result = verifier.inspect(quote, now=args.now, expected_report_data=expected)
    except Refused as refusal:
        seen = refusal.result.to_json() if refusal.result is not None else {}
        if args.json:
            print(json.dumps({"verified": False, "reason": refusal.reason, "detail": refusal.detail, **seen}))
        else:
            print(f"REFUSED ({refusal.reason}): {refusal.detail}")
            for key, value in seen.items():
                print(f"  {key:<18} {value}")
        return 1
    if args.json:
        print(json.dumps({"verified": True, **result.to_json()}))
        return 0
    print(f"verified: {result.tee.upper()} quote, TCB status {result.status}"
          + (f" (accepted advisories: {', '.join(result.advisories)})" if result.advisories else ""))
    for key, value in result.measurements.items():
        print(f"  {key:<12} {value}")
    print(f"  report data  {result.report_data.hex()}")
    print(f"  collateral   valid {result.collateral_window[0]} .. {result.collateral_window[1]}")
    return 0
