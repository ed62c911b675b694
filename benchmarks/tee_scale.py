"""The TEE protocols at scale (issue #20): training time beside XGBoost's and peak memory
beside plain's, with every protocol checked to grow plain's trees.

Workload: ``teeboost.bench.point.workload`` (rows resampled with replacement from the bundled
Give Me Some Credit sample's training 70%; 10 features split 5/5 between the active and one
passive party; 5 trees, depth 3, lr 0.3, subsample 0.8, 32 bins). XGBoost: hist, 2 threads,
QuantileDMatrix construction included. Enclaves run on the SIMULATED backend (separate
processes on this machine, no hardware isolation), start-up and attestation included.

Every (rows, protocol) point runs in a process of its own (this script with ``--point``), so
its memory is its own; data generation is outside the training time but inside the memory
peak (the parties' data stays resident while they train). Peak memory is the whole process
tree's (party process, enclave and worker processes): summed PSS polled every 20 ms
(``teeboost/bench/process_tree.py``); "largest MB" is the largest single process's exact
ru_maxrss. Each point writes its trees; this process compares them with plain's.

Bounds (issue #20): ntee and onetee train in at most 2x XGBoost's time, and peak at most at
1.2x plain's memory.

    python benchmarks/tee_scale.py [--rows 1000000 10000000] [--protocols xgboost plain ntee]
                                   [--repeat N] [--timeout S] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from importlib.metadata import packages_distributions, version
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from teeboost.bench.point import boost_params, train_xgboost, workload  # noqa: E402
from teeboost.bench.process_tree import peak_rss_mb, run_measured  # noqa: E402
from teeboost.config import ProtocolOptions  # noqa: E402
from teeboost.metrics import roc_auc  # noqa: E402

PROTOCOLS = ["xgboost", "plain", "ntee", "onetee", "onetee/index-sets", "strict"]  # onetee: bins once (default)
BOUND_PROTOCOLS = ["ntee", "onetee"]  # the protocols the bounds are about
TIME_BOUND, MEMORY_BOUND = 2.0, 1.2  # x XGBoost's training time, x plain's peak memory
N_TREES = 5


def protocol_and_options(label: str) -> tuple[str, ProtocolOptions]:
    """A table label -> (teeboost protocol, its options); enclaves are simulated."""
    if label == "plain":
        return "plain", ProtocolOptions()
    if label == "onetee/index-sets":
        return "onetee", ProtocolOptions(onetee_bins_once=False, allow_simulated_tee=True)
    if label in ("ntee", "onetee", "strict"):
        return label, ProtocolOptions(allow_simulated_tee=True)
    raise SystemExit(f"unknown protocol {label!r} (choose from {', '.join(PROTOCOLS)})")


def _json_ready(value):
    """Tree descriptions as JSON values; floats keep every bit (repr round-trips)."""
    return json.loads(json.dumps(value, default=lambda v: v.item() if isinstance(v, np.generic) else list(v)))


def train_point(label: str, rows: int, seed: int = 0) -> dict:
    """Train one point in this process: time, traffic, held-out AUC and the trees grown."""
    active, passives, test_active, test_passives = workload(rows, seed=seed)
    result = {"protocol": label, "rows": rows, "features": active.features.shape[1] + sum(
        p.features.shape[1] for p in passives)}
    if label == "xgboost":
        import xgboost as xgb

        features, labels = np.hstack([active.features, *[p.features for p in passives]]), active.labels
        del active, passives  # the centralised copy replaces the parties' columns
        seconds, booster = train_xgboost(features, labels, N_TREES, seed)
        test = np.hstack([test_active.features, *[p.features for p in test_passives]])
        auc = roc_auc(test_active.labels, booster.predict(xgb.DMatrix(test, nthread=2)))
        return {**result, "seconds": seconds, "auc": auc, "bytes": {"active_to_passive": 0, "passive_to_active": 0},
                "trees": None}
    from teeboost.federation import train_local
    from tests.helpers import federated_descriptions

    protocol, options = protocol_and_options(label)
    started = time.perf_counter()
    model, run = train_local(active, passives, boost_params(N_TREES, seed), protocol, options=options)
    seconds = time.perf_counter() - started
    auc = roc_auc(test_active.labels, model.predict(test_active.features, [p.features for p in test_passives]))
    return {**result, "seconds": seconds, "auc": auc, "bytes": run.traffic["bytes"], "phases": run.phases,
            **({"enclaves": run.enclaves} if run.enclaves else {}),
            "trees": _json_ready(federated_descriptions(model, statistics=False))}  # strict publishes no gains


def run_point(label: str, rows: int, *, seed: int = 0, timeout: float = 900.0) -> dict:
    """One point in a process of its own, its process tree's memory polled from here. A point
    that fails or runs out of time comes back with ``status`` saying so, not as an exception."""
    with tempfile.TemporaryDirectory(prefix="tee-scale-") as work:
        work = Path(work)
        command = [sys.executable, str(Path(__file__).resolve()), "--point", label, "--rows", str(rows),
                   "--seed", str(seed), "--result", str(work / "result.json")]
        with open(work / "output.txt", "w+") as output:
            measured = run_measured(command, timeout=timeout, stdout=output, stderr=subprocess.STDOUT, cwd=REPO)
            output.seek(0)
            printed = output.read()
        memory = {"peak_tree_mb": measured.peak_tree_mb, "peak_tree_rss_mb": measured.peak_tree_rss_mb,
                  "largest_process_mb": measured.largest_process_mb, "memory_measure": measured.measure,
                  "most_processes": measured.most_processes, "at_peak_mb": list(measured.at_peak_mb),
                  "process_seconds": round(measured.seconds, 2)}
        if measured.timed_out:
            return {"protocol": label, "rows": rows, "status": f"timed out after {timeout:g} s", **memory}
        if measured.returncode != 0:
            last = printed.strip().splitlines()[-1:] or [f"exit code {measured.returncode}"]
            return {"protocol": label, "rows": rows, "status": f"failed: {last[0][:200]}",
                    "output_tail": printed[-2000:], **memory}
        result = json.loads((work / "result.json").read_text())
        memory["largest_process_mb"] = max(memory["largest_process_mb"], result.pop("own_peak_mb"))
        return {**result, "status": "ok", **memory}


def summarise(runs: list[dict]) -> dict:
    """Repeats of one point -> best time, its spread, the highest memory peaks, and whether
    every repeat grew the same trees."""
    done = [r for r in runs if r["status"] == "ok"]
    if not done:
        return {k: runs[-1][k] for k in ("protocol", "rows", "status", "peak_tree_mb", "largest_process_mb")}
    times = [r["seconds"] for r in done]
    first = done[0]
    return {"protocol": first["protocol"], "rows": first["rows"], "status": "ok", "repeats": len(done),
            "failed_repeats": [r["status"] for r in runs if r["status"] != "ok"],
            "seconds": min(times), "seconds_max": max(times), "auc": first["auc"], "bytes": first["bytes"],
            "phases": first.get("phases", {}), "features": first["features"],
            "peak_tree_mb": max(r["peak_tree_mb"] for r in done),
            "peak_tree_rss_mb": max(r["peak_tree_rss_mb"] for r in done),
            "largest_process_mb": max(r["largest_process_mb"] for r in done),
            "memory_measure": first["memory_measure"], "most_processes": max(r["most_processes"] for r in done),
            "at_peak_mb": max(done, key=lambda r: r["peak_tree_mb"])["at_peak_mb"],
            "trees": first["trees"], "repeats_agree": all(r["trees"] == first["trees"] for r in done),
            **({"enclaves": first["enclaves"]} if "enclaves" in first else {})}


def _ratio(value: float | None, base: float | None) -> str:
    return f"{value / base:.2f}" if value is not None and base else "-"


HEADER = (f"{'rows':>10} {'protocol':<17} {'train s':>8} {'spread':>7} {'x xgboost':>9} {'peak MB (tree)':>14} "
          f"{'MB x plain':>10} {'largest MB':>10} {'MB a->p':>8} {'MB p->a':>8} {'AUC':>6} {'same trees':>10}")


def table_line(point: dict, by_label: dict[str, dict]) -> str:
    """One row of the table; ratios are against XGBoost and plain at the same rows, this run."""
    if point["status"] != "ok":
        return (f"{point['rows']:>10,} {point['protocol']:<17} {point['status']} "
                f"(peak so far: tree {point['peak_tree_mb']:.0f} MB, "
                f"largest process {point['largest_process_mb']:.0f} MB)")
    xgb, plain = by_label.get("xgboost"), by_label.get("plain")
    xgb_s = xgb["seconds"] if xgb and xgb["status"] == "ok" else None
    plain_mb = plain["peak_tree_mb"] if plain and plain["status"] == "ok" else None
    spread = f"+{100 * (point['seconds_max'] / point['seconds'] - 1):.0f}%" if point["repeats"] > 1 else "-"
    if point["protocol"] == "xgboost":
        same = "n/a"
    elif plain is None or plain["status"] != "ok":
        same = "no plain"
    else:
        same = "yes" if point["trees"] == plain["trees"] and point["repeats_agree"] else "NO"
    return (f"{point['rows']:>10,} {point['protocol']:<17} {point['seconds']:>8.2f} {spread:>7} "
            f"{_ratio(point['seconds'], xgb_s):>9} {point['peak_tree_mb']:>14.0f} "
            f"{_ratio(point['peak_tree_mb'], plain_mb):>10} {point['largest_process_mb']:>10.0f} "
            f"{point['bytes']['active_to_passive'] / 1e6:>8.1f} {point['bytes']['passive_to_active'] / 1e6:>8.1f} "
            f"{point['auc']:>6.4f} {same:>10}"
            + (f"  ({len(point['failed_repeats'])} repeat(s) {point['failed_repeats'][0]})"
               if point["failed_repeats"] else ""))


def bounds_line(rows: int, by_label: dict[str, dict]) -> str:
    """The issue's bounds at one row count, each stated as met or not."""
    def ok(label):
        point = by_label.get(label)
        return point if point and point["status"] == "ok" else None

    xgb, plain = ok("xgboost"), ok("plain")
    parts = []
    for label in BOUND_PROTOCOLS:
        point = ok(label)
        if label not in by_label:
            continue
        if point is None:
            parts.append(f"{label} {by_label[label]['status']}")
            continue
        time_part = (f"{point['seconds'] / xgb['seconds']:.2f}x xgboost's time "
                     f"({'met' if point['seconds'] <= TIME_BOUND * xgb['seconds'] else 'NOT met'})"
                     if xgb else "no xgboost time")
        memory_part = (f"{point['peak_tree_mb'] / plain['peak_tree_mb']:.2f}x plain's peak memory "
                       f"({'met' if point['peak_tree_mb'] <= MEMORY_BOUND * plain['peak_tree_mb'] else 'NOT met'})"
                       if plain else "no plain memory")
        parts.append(f"{label} {time_part}, {memory_part}")
    return (f"{rows:>10,} rows, bounds <= {TIME_BOUND:g}x xgboost and <= {MEMORY_BOUND:g}x plain's memory: "
            + ("; ".join(parts) or "no ntee or onetee run"))


def _git_state() -> str:
    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10).stdout.rstrip()
        except (OSError, subprocess.SubprocessError):
            return ""

    changed = [line for line in git("status", "--porcelain", "--untracked-files=no").splitlines() if line]
    state = f"git {git('rev-parse', '--short', 'HEAD').strip() or 'unknown'}"
    if changed:
        state += f" plus uncommitted changes to {', '.join(line[3:] for line in changed)}"
    return state


def header_lines(args) -> list[str]:
    # xgboost is not imported here: its library mapped in this process would take a share of the points' PSS
    xgb_version = next((version(name) for name in packages_distributions().get("xgboost", [])), "not installed")
    memory_gib = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
    return [
        f"teeboost TEE protocols at scale (issue #20), {time.strftime('%Y-%m-%d %H:%M')}, {_git_state()}",
        f"machine: {platform.machine()}, {os.cpu_count()} cores, {memory_gib:.0f} GiB, "
        f"python {platform.python_version()}, numpy {np.__version__}, xgboost {xgb_version}; "
        f"load average at start {os.getloadavg()[0]:.2f}",
        "enclaves: SIMULATED backend (enclaves are separate processes on this machine, no hardware isolation)",
        "workload: GMSC rows resampled with replacement, 10 features split 5/5, 5 trees, depth 3, lr 0.3, "
        "subsample 0.8, 32 bins; time = training wall time (xgboost: QuantileDMatrix included; teeboost: "
        "binning, enclave start-up and attestation included), data generation excluded"
        + (f"; best of {args.repeat}, spread = slowest over best" if args.repeat > 1 else ""),
        "peak MB (tree) = peak of the summed PSS of the point's process and all its descendants (enclaves, "
        "workers), polled every 20 ms over the whole point process (data generation included; pages shared "
        "with processes outside the tree count in part); largest MB = the largest single process's peak RSS "
        "(VmHWM: ru_maxrss without the spawning process's RSS that Linux carries into it at exec)",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--protocols", nargs="+", default=PROTOCOLS, choices=PROTOCOLS)
    parser.add_argument("--repeat", type=int, default=1, help="runs per point; time is the best, spread shown")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a point's process may take")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write every point's results here")
    parser.add_argument("--point", help=argparse.SUPPRESS)  # inside a point's own process
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.point:
        (rows,) = args.rows
        result = train_point(args.point, rows, args.seed)
        args.result.write_text(json.dumps({**result, "own_peak_mb": round(peak_rss_mb(), 1)}))
        return 0

    header = header_lines(args)
    print("\n".join(header) + "\n\n" + HEADER, flush=True)
    points, runs = [], []
    for rows in args.rows:
        by_label = {}
        for label in [p for p in PROTOCOLS if p in args.protocols]:
            repeats = [run_point(label, rows, seed=args.seed, timeout=args.timeout) for _ in range(args.repeat)]
            runs += repeats
            by_label[label] = summarise(repeats)
            print(table_line(by_label[label], by_label), flush=True)
        points.append(by_label)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")
    for rows, by_label in zip(args.rows, points):
        print(bounds_line(rows, by_label))
    print("\nat each tree's peak, MB per process (the point's own process first, then enclaves and workers):")
    for by_label in points:
        for point in by_label.values():
            if point["status"] == "ok":
                print(f"{point['rows']:>10,} {point['protocol']:<17} "
                      + " + ".join(f"{mb:.0f}" for mb in point["at_peak_mb"]))
    if args.json:
        strip = lambda r: {k: v for k, v in r.items() if k != "trees"}  # noqa: E731
        args.json.write_text(json.dumps({"header": header, "points": [strip(p) for by in points for p in by.values()],
                                         "runs": [strip(r) for r in runs]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
