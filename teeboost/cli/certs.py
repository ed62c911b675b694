"""``teeboost certs``: the federation's TLS certificates (a CA, and per-party keys that stay
with their party)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_certs(sub) -> None:
    certs = sub.add_parser("certs", help="TLS certificates: a federation CA, and per-party keys that stay with "
                                         "their party")
    certs_sub = certs.add_subparsers(dest="certs_command", required=True)
    init_ca = certs_sub.add_parser("init-ca", help="CA operator, once: create the federation CA (ca.pem, ca.key)")
    init_ca.add_argument("--out", type=Path, required=True, help="directory for ca.pem and ca.key")
    init_ca.add_argument("--days", type=int, default=3650, help="validity in days (default 3650)")
    init_ca.add_argument("--force", action="store_true",
                         help="replace an existing CA (invalidates every certificate it signed)")
    init_ca.set_defaults(func=_cmd_certs_init_ca)
    request = certs_sub.add_parser("request", help="each party, on its own host: create its key (0600) and a "
                                                   "signing request (NAME.csr) for the CA")
    request.add_argument("--party", required=True, help="this party's name, as in its [party] name")
    request.add_argument("--out", type=Path, default=Path("."), help="directory for NAME.key and NAME.csr")
    request.add_argument("--force", action="store_true", help="re-key: replace an existing key of this party")
    request.set_defaults(func=_cmd_certs_request)
    sign = certs_sub.add_parser("sign", help="CA operator: sign a party's request into its certificate")
    sign.add_argument("--ca", type=Path, required=True, help="directory holding ca.pem and ca.key")
    sign.add_argument("--csr", type=Path, required=True, help="the party's NAME.csr")
    sign.add_argument("--out", type=Path, help="certificate to write (default: <party>.pem beside the request, "
                                                     "named after the party the request names)")
    sign.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    sign.add_argument("--dns", action="append", metavar="NAME", help="extra DNS name for the certificate; repeat")
    sign.add_argument("--ip", action="append", metavar="ADDRESS", help="extra IP address; repeat")
    sign.add_argument("--force", action="store_true", help="replace an existing certificate file (renewal)")
    sign.set_defaults(func=_cmd_certs_sign)
    demo_certs = certs_sub.add_parser("demo", help="LOCAL DEMOS ONLY: a CA and every party's key in one "
                                                   "directory (whoever holds it can pose as any party)")
    demo_certs.add_argument("--out", type=Path, required=True, help="directory to write")
    demo_certs.add_argument("--parties", required=True, help="comma-separated party names, e.g. active,passive-1")
    demo_certs.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    demo_certs.add_argument("--force", action="store_true", help="replace the CA and keys already there")
    demo_certs.set_defaults(func=_cmd_certs_demo)


def _cmd_certs_init_ca(args: argparse.Namespace) -> int:
    from ..transport.tls import certificate_fingerprint, init_ca

    cert, key = init_ca(args.out, days=args.days, force=args.force)
    print(f"wrote {cert} (give it to every party) and {key} (mode 0600: keep it offline, with the CA operator)")
    print(f"CA fingerprint {certificate_fingerprint(cert.read_bytes())}")
    return 0


def _cmd_certs_request(args: argparse.Namespace) -> int:
    from ..transport.tls import request_certificate

    key, csr, fingerprint = request_certificate(args.party, args.out, force=args.force)
    print(f"wrote {key} (mode 0600: this party's private key, never leaves this host) and {csr}")
    print(f"send {csr.name} to the CA operator, and confirm this public-key fingerprint with them over another "
          f"channel (phone, signed mail):\n  {fingerprint}")
    return 0


def _cmd_certs_sign(args: argparse.Namespace) -> int:
    from ..transport.tls import sign_request

    party, key_fp, cert_fp, out = sign_request(args.ca, args.csr, args.out, days=args.days, dns=args.dns or [],
                                               ips=args.ip or [], force=args.force)
    print(f"signed a certificate for party {party!r}: {out}")
    print(f"  public key  {key_fp}   (must match what the party printed)")
    print(f"  certificate {cert_fp}")
    return 0


def _cmd_certs_demo(args: argparse.Namespace) -> int:
    from ..transport.tls import create_federation_certs

    parties = [p.strip() for p in args.parties.split(",") if p.strip()]
    files = create_federation_certs(args.out, parties, days=args.days, force=args.force)
    print(f"LOCAL DEMO ONLY: {args.out} holds every party's private key, so whoever has it can pose as any "
          "party; a real federation uses 'certs init-ca', 'certs request' and 'certs sign'", file=sys.stderr)
    print(f"wrote {args.out / 'ca.pem'}, {args.out / 'ca.key'} and, per party, "
          + ", ".join(f"{f.cert.name}/{f.key.name}" for f in files.values()))
    return 0
