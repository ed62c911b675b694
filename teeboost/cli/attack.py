"""``teeboost attack``: the leakage-abuse attack, what the active party can guess of passive
values (and a passive party of the labels) from what a protocol lets it see (docs/attacks.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import DataError
from .options import _add_training_options, _load_parties, _options, _params


def add_attack(sub) -> None:
    attack = sub.add_parser("attack", help="leakage-abuse attack: what the active party can guess of passive values")
    _add_training_options(attack)
    attack.add_argument("--target", action="append", required=True, metavar="FEATURE:TOL,TOL,...",
                        help="a passive column and the tolerances to score, e.g. age:1,2,3,4,5")
    attack.add_argument("--aux", type=Path, help="auxiliary public sample (CSV) for the approximate distribution")
    attack.add_argument("--aux-noise", type=float, default=0.0, help="relative noise added to its deciles")
    attack.add_argument("--out", type=Path, default=Path("teeboost-attack"), help="CSV and PNG output directory")
    attack.add_argument("--sweep", metavar="TxD,TxD,...",
                        help="model sizes to attack in turn, e.g. 5x3,10x4,20x5,50x6 (overrides --n-trees/--max-depth)")
    attack.add_argument("--protocols", metavar="P,P,...", help="attack several protocols in turn (overrides --protocol)")
    attack.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="attack N draws (seeds --random-state, +1, ...: split and training) and report the spread")
    attack.add_argument("--upper-bound", action="store_true",
                        help="also score the true bin order (the leakage profile's upper bound, not an attack)")
    attack.add_argument("--known-labels", type=float, default=0.01, metavar="SHARE",
                        help="share of rows whose labels a passive party attacking labels is assumed to know")
    attack.add_argument("--reuse-transcripts", action="store_true",
                        help="attack transcripts already in --out from an earlier run with the same parameters "
                             "instead of training again (resumes a sweep)")
    attack.add_argument("--known-values", type=float, default=0.01, metavar="SHARE",
                        help="share of rows whose true values of each attacked column the active party is assumed "
                             "to know (names groups of anonymous cuts; 0: blind)")
    attack.set_defaults(func=_cmd_attack)


def _print_spread(reports: list[dict]) -> None:
    """Mean and range over seeds of method (iv), per protocol, model size, column and tolerance."""
    import statistics

    print(f"\nover {len({r['seed'] for r in reports})} seeds: rows guessed within each tolerance, method (iv), "
          "mean [min, max]")
    groups: dict[tuple, list[float]] = {}
    for r in reports:
        for row in r["results"]:
            if row["order"] == "inferred" and row["method"] == "attack_approx" and row["rows"] == "training":
                key = (r["protocol"], f"{r['n_trees']}x{r['max_depth']}", row["feature"], row["tolerance"])
                groups.setdefault(key, []).append(100 * row["accuracy"])
    for (protocol, size, feature, tolerance), values in groups.items():
        print(f"  {protocol:<12} {size:<6} {feature} +-{tolerance:g}: {statistics.mean(values):5.1f}% "
              f"[{min(values):.1f}, {max(values):.1f}]")


def _cmd_attack(args: argparse.Namespace) -> int:
    from ..attack.report import write_outputs
    from ..attack.run import UPPER_BOUND, AttackTarget, ModelSize, run_sweep
    from ..data import PartyData, read_csv
    from ..datasets import GIVE_ME_SOME_CREDIT_ID
    from teeboost.protocols.registry import PROTOCOLS

    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()] if args.protocols else [args.protocol]
    for protocol in protocols:
        if protocol not in PROTOCOLS:
            raise DataError(f"protocol {protocol!r} is not implemented (available: {', '.join(sorted(PROTOCOLS))})")
    params = _params(args)
    sizes = ModelSize.parse_list(args.sweep) if args.sweep else [ModelSize(params.n_trees, params.max_depth)]
    if args.repeat < 1:
        raise DataError(f"--repeat {args.repeat} must be >= 1")
    if args.transcript is not None and (len(protocols) > 1 or len(sizes) > 1 or args.repeat > 1):
        raise DataError("--transcript attacks one recorded run: it cannot be combined with --sweep, --repeat or "
                        "several --protocols")
    if args.transcript is not None and not args.transcript.is_file():
        raise DataError(f"{args.transcript}: transcript not found")
    if not 0 < args.known_labels < 1:
        raise DataError(f"--known-labels {args.known_labels} must be a share between 0 and 1")
    if not 0 <= args.known_values < 1:
        raise DataError(f"--known-values {args.known_values} must be a share between 0 and 1")
    targets = [AttackTarget.parse(t) for t in args.target]
    active, passives = _load_parties(args)
    aux, aux_ids = None, None
    if args.aux is not None:
        frame = read_csv(args.aux)
        aux = {}
        for target in targets:
            if target.feature not in frame.columns:
                raise DataError(f"{args.aux}: auxiliary sample has no column {target.feature!r}")
        id_column = args.id_column or (GIVE_ME_SOME_CREDIT_ID if args.data is None and args.active_data is None
                                       else None)
        if id_column and id_column in frame.columns:
            aux_ids = frame[id_column].to_numpy()
            frame = frame.drop(columns=[id_column])
        for name in frame.columns:
            aux[str(name)] = PartyData.from_frame(frame[[name]], source=str(args.aux),
                                                  ).features[:, 0]

    def show(report: dict) -> None:
        if args.json:
            return
        simulated = ", enclaves simulated" if PROTOCOLS[report["protocol"]].uses_enclaves else ""
        print(f"\nattack on {report['protocol']}, {report['n_trees']} trees x depth {report['max_depth']} "
              f"({report['n_attacked_rows']} training rows, {report['max_bin']} bins{simulated}; "
              f"train {report['seconds']['train']:.1f} s, stage 1 {report['seconds']['stage1']:.1f} s)")
        for feature, r in report["recovery"].items():
            print(f"  {feature}: from {r['source']}: exact bin {100 * r['exact_share']:.1f}% "
                  f"({r['wrongly_pinned_rows']} wrongly pinned), Spearman {r['spearman']:.3f}"
                  + (f"; {r['missing_flagged']} of {r['missing_rows']} missing values flagged, "
                     f"{r['present_flagged_missing']} present values flagged as missing (scored as misses)"
                     if r["missing_rows"] or r["present_flagged_missing"] else ""))
        for feature, r in report.get("held_out_recovery", {}).items():
            print(f"  {feature}, {report['n_held_out_rows']} held-out rows (early stopping routes them through every "
                  f"tree): from {r['source']}: Spearman {r['spearman']:.3f}")
        for feature, which in [(f, w) for w in ("training", "held-out") for f in report["recovery"]]:
            rows = [r for r in report["results"] if r["feature"] == feature and r["rows"] == which]
            if not rows:
                continue
            tolerances = sorted({r["tolerance"] for r in rows})
            print(f"  {feature}: share of {rows[0]['scored_rows']} {which} rows with a value guessed within +-"
                  + ", ".join(f"{t:g}" for t in tolerances))
            for order in ("inferred", UPPER_BOUND):
                for method in ("random_minmax", "attack_minmax", "random_approx", "attack_approx"):
                    picked = [r for r in rows if r["order"] == order and r["method"] == method]
                    if picked:
                        label = f"{method} ({order})"
                        print(f"    {label:<52}" + " ".join(f"{100 * r['accuracy']:6.1f}%" for r in picked))
        for row in report["labels"]:
            if row["role"] == "passive":
                print(f"  labels inferred by passive party {row['party']}: AUC "
                      + ", ".join(f"{k[4:].replace('_', ' ')} {v:.3f}" for k, v in row.items()
                                  if k.startswith("auc_") and isinstance(v, float)))

    seeds = [args.random_state + k for k in range(args.repeat)]
    reports = run_sweep(active, passives, targets, params, protocols, sizes, seeds=seeds, on_report=show,
                        options=_options(args),
                        transcript=args.transcript, aux=aux, aux_noise=args.aux_noise, out_dir=args.out,
                        seed=args.random_state, upper_bound=args.upper_bound, known_labels=args.known_labels,
                        known_values=args.known_values, reuse_transcripts=args.reuse_transcripts,
                        aux_ids=aux_ids, validation_size=args.validation_size)
    written = [Path(r["transcript"]) for r in reports if r["transcript_written"]] + write_outputs(reports, args.out)
    reused = [r["transcript"] for r in reports if r.get("transcript_reused")]
    if args.json:
        print(json.dumps({"reports": reports, "files": [str(p) for p in written]}))
        return 0
    if args.repeat > 1:
        _print_spread(reports)
    print("\nassumptions:\n" + "\n".join(f"  - {a}" for a in reports[0]["assumptions"]))
    print("\nwrote:\n" + "\n".join(f"  {p}" for p in written))
    if reused:
        print("read (--reuse-transcripts):\n" + "\n".join(f"  {p}" for p in reused))
    return 0
