"""``teeboost party`` (one party from its config), ``teeboost demo`` and ``teeboost
example-data``: a federation across processes, and what it takes to try one."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from .common import _CONTRACT_PROTOCOLS, _print_report, _Progress


def add_demo(sub) -> None:
    demo = sub.add_parser("demo", help="every party as its own process over gRPC+mTLS: PSI, all protocols, "
                                       "prediction, one report")
    demo.add_argument("--workdir", type=Path, help="where the demo writes data, certificates, models "
                                                   "(default: a new temporary directory)")
    demo.add_argument("--in-memory", action="store_true", help="run all parties in this process instead")
    demo.add_argument("--model-dir", type=Path, default=Path("teeboost-demo"),
                      help="with --in-memory: where each protocol's model is written")
    demo.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    demo.set_defaults(func=_cmd_demo)


def add_example_data(sub) -> None:
    example = sub.add_parser("example-data", help="write the bundled Give Me Some Credit sample as each party's own "
                                                  "CSV (ids partly shared) and new rows to score, to try a "
                                                  "federation across processes")
    example.add_argument("--out", type=Path, required=True, help="directory for active.csv, passive-1.csv, ... "
                                                                 "and new.csv")
    example.add_argument("--rows", type=int, help="use only the first N rows of the sample (default: all 19,999)")
    example.add_argument("--passive-parties", type=int, default=1, help="split the passive columns among K parties")
    example.add_argument("--new-rows", type=int, default=200,
                         help="customers taken out of active.csv (label dropped) into new.csv, for predict")
    example.add_argument("--force", action="store_true", help="replace files already there")
    example.set_defaults(func=_cmd_example_data)


def add_party(sub) -> None:
    party = sub.add_parser("party", help="run one party from its config (the active party drives; "
                                         "passive parties serve)")
    party.add_argument("--config", type=Path, required=True, help="this party's TOML config")
    party.add_argument("--protocol", choices=_CONTRACT_PROTOCOLS, help="active: override [training] protocol")
    party.add_argument("--transcript", type=Path, help="active: record its view of the run")
    party.add_argument("--ready-file", type=Path, help="passive: write host:port here once listening")
    party.add_argument("--shutdown-peers", action="store_true", help="active: stop the passive parties afterwards")
    party.add_argument("--resume", action="store_true",
                       help="active: continue the interrupted run from every party's checkpoint")
    party.add_argument("--allow-simulated-tee", action="store_true",
                       help="accept simulated enclaves and quotes (as [tee] allow_simulated = true)")
    party.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout (active: the run's report; passive: what it served, when it stops)")
    party.set_defaults(func=_cmd_party)


def _cmd_demo(args: argparse.Namespace) -> int:
    if not args.in_memory:
        from ..deploy.demo import run_demo

        return run_demo(args.workdir, as_json=args.json)
    from teeboost.protocols.registry import PROTOCOLS
    from ..param_defaults import DEMO_SETTINGS_TEXT
    from .options import _demo_defaults
    from .train import _run_training

    print("teeboost demo: Give Me Some Credit sample (bundled), one active and one passive party, "
          f"in-memory federation; {DEMO_SETTINGS_TEXT}", file=sys.stderr)
    demo_args = argparse.Namespace(**{**vars(_demo_defaults()), "model_dir": args.model_dir, "json": args.json})
    started = time.perf_counter()
    reports = []
    for protocol in sorted(PROTOCOLS):
        demo_args.protocol = protocol
        demo_args.model_dir = args.model_dir / protocol
        reports.append(_run_training(demo_args))
    if args.json:
        print(json.dumps({"settings": DEMO_SETTINGS_TEXT, "demo": reports,
                          "seconds": round(time.perf_counter() - started, 3)}))
        return 0
    for report in reports:
        _print_report(report)
        print()
    print(f"{'protocol':<12} {report['metric']:>8} {'train s':>8} {'bytes':>12}")
    for report in reports:
        print(f"{report['protocol']:<12} {report['value']:>8.4f} {report['train_seconds']:>8.3f} {report['bytes_total']:>12,}")
    return 0


def _cmd_example_data(args: argparse.Namespace) -> int:
    import pandas as pd

    from ..deploy.example_data import write_example_data

    written = write_example_data(args.out, args.passive_parties, rows=args.rows, new_rows=args.new_rows,
                                 force=args.force)
    for name, path in written.items():
        frame = pd.read_csv(path)
        what = ("new rows for the active party to score (no label; every passive party holds them too)"
                if name == "new" else f"party {name!r}")
        print(f"wrote {path}: {what}, {len(frame):,} rows, columns {', '.join(frame.columns)}")
    return 0


def _cmd_party(args: argparse.Namespace) -> int:
    import dataclasses

    from ..deploy.config import load_config

    config = load_config(args.config)
    if args.allow_simulated_tee:
        config.options = dataclasses.replace(config.options, allow_simulated_tee=True)
    if config.role == "passive":
        from ..deploy.passive import serve_passive

        served = serve_passive(config, ready_file=args.ready_file)
        print(json.dumps(served) if args.json else _passive_summary(served, args.config))
        return 0
    from ..deploy.active import run_training, shutdown_peers

    if args.protocol:
        config.protocol = args.protocol
    progress = _Progress(config.params.n_trees, sys.stderr.isatty() and not args.json)
    try:
        report = run_training(config, transcript=args.transcript, on_tree=progress, resume=args.resume,
                              on_phase=progress.phase)
    finally:
        progress.close()
    if args.shutdown_peers:
        shutdown_peers(config)
    if args.json:
        print(json.dumps(report))
    else:
        from .train import _print_early_stopping

        _print_report(report)
        _print_early_stopping(report)
        print(f"audit log       {config.audit_log}")
    return 0


def _passive_summary(served: dict[str, Any], config: Path) -> str:
    """What a passive party served, printed when it stops."""
    runs = f"{served['runs']} trained" + (f" ({', '.join(served['protocols'])})" if served["protocols"] else "")
    return "\n".join([
        f"party           {served['party']} (passive {served['index']}) stopped; it listened on {served['address']}",
        f"runs            {runs}",
        f"predictions     {served['prediction_batches']} batch(es), {served['prediction_rows']} rows",
        f"online scoring  {served.get('online_requests', 0)} request(s), {served.get('online_rows', 0)} rows",
        f"refusals        {served['refusals']}",
        f"model dir       {served['model_dir']}",
        f"audit log       {served['audit_log']}  (teeboost audit show --config {config})",
    ])
