"""``teeboost audit show``: a party's audit log (runs, queries, prediction batches, refusals)
and its budgets over the last 24 hours."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import ConfigError


def add_audit(sub) -> None:
    audit = sub.add_parser("audit", help="a party's audit log: runs, queries, prediction batches, refusals")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True)
    show = audit_sub.add_parser("show", help="summarise a party's audit log")
    show.add_argument("--log", type=Path, help="the audit log file")
    show.add_argument("--config", type=Path, help="or: the party's config (its [audit] log)")
    show.add_argument("--json", action="store_true", help="print every entry as JSON instead")
    show.set_defaults(func=_cmd_audit_show)


def _cmd_audit_show(args: argparse.Namespace) -> int:
    from ..audit_counters import read_counters
    from ..audit_report import read_audit, summarise

    path = args.log
    if path is None:
        if args.config is None:
            raise ConfigError("give the audit log (--log FILE) or the party's config (--config party.toml)")
        from ..deploy.config import load_config

        path = load_config(args.config).audit_log
    if not path.exists():
        raise ConfigError(f"{path}: no audit log here (a party writes it once it starts)")
    entries = read_audit(path)
    if args.json:
        print(json.dumps(entries))
    else:
        from ..budget import RowLedger, ledger_path

        routing = None
        if ledger_path(path).exists():  # the row ledger beside the log: bits per row of routing answers
            ledger = RowLedger(ledger_path(path), entries[-1].get("party", "?") if entries else "?")
            routing = ledger.day()
            ledger.close()
        # the last 24 h as the party counts them (beside the log: rotated or not, its budgets are there)
        print(summarise(entries, routing=routing, usage=read_counters(path)))
    return 0
