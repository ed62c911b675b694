"""``teeboost bench``: the protocols side by side over sample sizes (resumable), with CSV,
plots and a reproduction report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import _row_count


def add_bench(sub) -> None:
    bench = sub.add_parser("bench", help="protocols side by side over sample sizes (resumable), CSV, plots, report")
    bench.add_argument("--rows", type=_row_count, nargs="+", default=[10_000, 20_000, 50_000, 100_000, 150_000],
                       metavar="N", help="training sample sizes, e.g. 1e4 2e4 5e4")
    bench.add_argument("--protocols", nargs="+", default=["xgboost", "plain", "secureboost", "ntee", "onetee", "strict"],
                       choices=["xgboost", "plain", "secureboost", "ntee", "onetee", "strict"],
                       help="protocols to compare (xgboost: centralised, the floor)")
    bench.add_argument("--n-trees", type=int, default=5,
                       help="trees per run (the benchmarks' small workload: depth 3, subsample 0.8, 32 bins; "
                            "training's defaults are XGBoost's 100 trees x depth 6 x 256 bins)")
    bench.add_argument("--passive-parties", type=int, default=1, help="split the passive columns among this many parties")
    bench.add_argument("--extra-features", type=int, default=0, help="add noisy copies of passive columns")
    bench.add_argument("--scheme", choices=("paillier", "ou"), nargs="+", default=["paillier"],
                       help="homomorphic scheme(s) of the secureboost runs (e.g. --scheme paillier ou: both, "
                            "the first is the baseline of the ratios)")
    bench.add_argument("--scale", action="store_true", help="also the TEE-only scale run (to 1e6 samples)")
    bench.add_argument("--scale-rows", type=_row_count, nargs="+", default=[250_000, 500_000, 1_000_000],
                       metavar="N", help="sample sizes of the scale run, e.g. 2.5e5 5e5 1e6")
    bench.add_argument("--with-secureboost", action="store_true", help="include SecureBoost in the scale run")
    bench.add_argument("--timeout", type=float, default=3600.0, help="seconds per point")
    bench.add_argument("--out", type=Path, default=Path("teeboost-bench"),
                       help="directory of results (kept between runs: a sweep resumes) and plots")
    bench.add_argument("--report", type=Path, help="write the markdown reproduction report here")
    bench.set_defaults(func=_cmd_bench)


def _cmd_bench(args: argparse.Namespace) -> int:
    import shutil

    from ..bench.report import write_csv, write_plots, write_report
    from ..bench.sweep import plan, run_sweep

    common = dict(n_trees=args.n_trees, passive_parties=args.passive_parties, extra_features=args.extra_features,
                  scheme=args.scheme[0])
    points = plan(args.rows, args.protocols, **common)
    if "secureboost" in args.protocols:  # one more secureboost point per size for each further scheme
        points += [p for scheme in args.scheme[1:] for p in plan(args.rows, ["secureboost"], **{**common, "scheme": scheme})]
    if args.scale:
        scale_protocols = ["xgboost", "plain", "ntee", "onetee", "strict"] + (["secureboost"] if args.with_secureboost else [])
        points += [p for p in plan(args.scale_rows, scale_protocols, **common) if p not in points]
    total = len(points)
    progress = None
    if sys.stderr.isatty():
        from tqdm import tqdm

        progress = tqdm(total=total, unit="point", file=sys.stderr, desc="benchmark")
    state = {"done": 0}

    def on_point(point, entry, cached):
        state["done"] += 1
        if progress is not None:
            progress.update(1)
        if entry is None:
            return
        mb = sum(entry["bytes"].values()) / 1e6
        status = "(already done)" if cached else ""
        message = (f"[{state['done']}/{total}] {point.protocol:<12} {point.rows:>9,} rows: {entry['seconds']:8.2f} s, "
                   f"{mb:9.2f} MB, peak {entry.get('peak_tree_mb', entry['peak_rss_mb']):.0f} MB, "
                   f"AUC {entry['auc']:.4f} {status}")
        (progress.write if progress is not None else lambda m: print(m, file=sys.stderr))(message)

    try:
        results = run_sweep(points, args.out, timeout=args.timeout, on_point=on_point)
    finally:
        if progress is not None:
            progress.close()
    wanted = {p.key() for p in points}
    results = {k: v for k, v in results.items() if k in wanted}
    files = [write_csv(results, args.out / "results.csv"), *write_plots(results, args.out)]
    if args.report is not None:
        figures_dir = args.report.parent / "figures"
        figures_dir.mkdir(parents=True, exist_ok=True)
        figures = []
        for figure in files[1:]:
            target = figures_dir / figure.name
            shutil.copyfile(figure, target)
            figures.append(target)
        command = "teeboost " + " ".join(sys.argv[1:]) if sys.argv[0].endswith("teeboost") else \
            "teeboost bench " + " ".join(a for a in sys.argv[2:])
        files.append(write_report(results, args.report, command, figures))
    print("wrote " + ", ".join(str(f) for f in files))
    return 0
