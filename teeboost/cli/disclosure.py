"""``teeboost consent`` and ``teeboost disclose``: the label owner lets one passive party see its
own sealed split records of a strict model, and that party's enclave opens them (both audited)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_consent(sub) -> None:
    consent = sub.add_parser("consent", help="label owner: let one passive party see its own split records of the "
                                             "saved strict model (they reveal which way labels lean; audited)")
    consent.add_argument("--config", type=Path, required=True, help="the active party's config")
    consent.add_argument("--party", required=True, metavar="NAME|INDEX", help="the passive party")
    consent.add_argument("--out", type=Path, required=True, metavar="FILE", help="the consent file to hand over")
    consent.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    consent.set_defaults(func=_cmd_consent)


def add_disclose(sub) -> None:
    disclose = sub.add_parser("disclose", help="passive party: open its sealed split records of a strict model in "
                                               "its enclave, on the label owner's consent file (audited)")
    disclose.add_argument("--config", type=Path, required=True, help="the passive party's config")
    disclose.add_argument("--consent", type=Path, required=True, metavar="FILE", help="from `teeboost consent`")
    disclose.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    disclose.set_defaults(func=_cmd_disclose)


def _cmd_consent(args: argparse.Namespace) -> int:
    from ..deploy.disclosure import consent

    signed = consent(args.config, args.party, args.out)
    print(json.dumps({"consent": str(args.out), "party": signed.party_name, "model_digest": signed.model_digest})
          if args.json else
          f"wrote your consent that party {signed.party_name} may see its own split records of model "
          f"{signed.model_digest[:16]} to {args.out}: they say which way your labels lean at its splits; hand it over "
          "only if you accept that (audited)")
    return 0


def _cmd_disclose(args: argparse.Namespace) -> int:
    from ..deploy.disclosure import disclose

    model = disclose(args.config, args.consent)
    print(json.dumps({"party": model.name, "records": len(model.owner), "model_digest": model.model_digest})
          if args.json else
          f"party {model.name}'s enclave opened its {len(model.owner)} sealed split records of model "
          f"{model.model_digest[:16]} on the label owner's consent; they are now in its model file "
          "(`teeboost export` and `teeboost importance` can use them; audited)")
    return 0
