"""A malicious passive host's crafted-columns label attack, end to end, from the files it holds.

The passive party appends crafted columns to its own data (``--variant missing``: one copy of
``age`` per target with that target's value left empty; ``--variant category``: made-up
categorical columns giving each group of ``--group-size`` targets its own category), a run
trains, and the attack reads every file the passive host holds afterwards
(``teeboost.attack.crafted_columns``). It prints the label AUC on the targets from the attack,
from the party's own columns alone (oriented on the ~1% of rows whose labels it is assumed to
know; and the same predictor oriented on every non-target label, a ceiling no attacker has),
the records found, and the seconds.

In process (default): ``train_local``, the model saved with ``FederatedModel.save`` and the
run's checkpoint directory kept; the passive host's files are ``passive-1.json`` and
``passive-1.ckpt``. In process every party has one operator, so a strict run's passive records
are disclosed there; to measure what sealing changes, use ``--deployed``.

``--deployed``: the loopback federation of ``teeboost demo`` (``write_federation``), each party
its own OS process, with the crafted ``passive-1.csv`` in place of the passive party's file; the
passive host's view is its model directory ``model-passive-1`` (checkpoints under it), its
audit log ``audit-passive-1.jsonl`` (and its SQLite counters), its stdout/stderr ``passive-1.log``
and ready file. Only the passive party's files are read. ``--disclose`` (strict): the label owner
consents and the passive host discloses its records first (``teeboost consent`` / ``disclose``).

    python benchmarks/crafted_columns.py --rows 6000 --targets 150 --trees 50 --depth 6 --protocol plain
    python benchmarks/crafted_columns.py --variant category --group-size 10 --targets 570 --columns 40 \\
        --rows 3000 --trees 50 --depth 2 --max-bin 64
    python benchmarks/crafted_columns.py --group-size 20 --min-samples-leaf 20 --targets 300 --rows 3000 \\
        --trees 20 --depth 5 --protocol strict          # passes strict's near-duplicate check
    python benchmarks/crafted_columns.py --deployed --protocol strict --rows 3000 --targets 300 --group-size 20 \\
        --min-samples-leaf 20 --trees 20 --depth 5
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from teeboost.attack.crafted_columns import attack_report, craft_category_columns, craft_missing_copies, known_label_rows
from teeboost.attack.host_view import read_passive_host_view
from teeboost.config import BoostParams, ProtocolOptions
from teeboost.data import PartyData
from teeboost.datasets import (
    GIVE_ME_SOME_CREDIT_ID as ID, GIVE_ME_SOME_CREDIT_LABEL as LABEL, GIVE_ME_SOME_CREDIT_PASSIVE as OWN,
    load_give_me_some_credit,
)
from teeboost.federation import train_local


def parse(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=6000, help="first rows of the bundled sample")
    parser.add_argument("--targets", type=int, default=150, help="target rows (random among the party's rows)")
    parser.add_argument("--trees", type=int, default=50)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--min-samples-leaf", type=int, default=1, help="k (a deployed passive party's floor is 20)")
    parser.add_argument("--variant", choices=["missing", "category"], default="missing")
    parser.add_argument("--group-size", type=int, help="targets per missing copy (default 1) or per made-up "
                        "category (default 10); missing copies of groups >= max(k, 10) pass strict's "
                        "near-duplicate check")
    parser.add_argument("--columns", type=int, help="crafted columns (default: one copy per target / 40 categorical)")
    parser.add_argument("--min-apart", type=int, help="missing groups: rows any two copies differ in (default "
                        "max(k, 10); deployed, only the training rows of the intersection count, so draw more)")
    parser.add_argument("--base", default="age", help="the own column copied (missing) or quantiled (category)")
    parser.add_argument("--max-bin", type=int, default=32)
    parser.add_argument("--no-category-subsets", action="store_true",
                        help="category_subsets off (masks become prefixes in the owner's code order)")
    parser.add_argument("--protocol", default="plain", help="plain, secureboost, ntee, onetee or strict")
    parser.add_argument("--known", type=float, default=0.01, help="share of rows whose labels the attacker knows")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=1, help="independent target draws (seed, seed+1, ...)")
    parser.add_argument("--deployed", action="store_true", help="separate OS processes over gRPC (teeboost demo's)")
    parser.add_argument("--disclose", action="store_true", help="--deployed strict: the label owner consents and "
                        "the passive party discloses its records (teeboost consent / disclose) before the attack")
    parser.add_argument("--known-split", action="store_true", help="--deployed: targets only among the rows the "
                        "run trains on, as the passive host learns them from an earlier run's PSI result and Setup")
    parser.add_argument("--test-size", type=float, default=0.3, help="--deployed: the active party's held-out share")
    parser.add_argument("--workdir", type=Path, help="keep the run's files here (default: a temporary directory)")
    parser.add_argument("--json", action="store_true", help="one JSON object per run instead of text")
    return parser.parse_args(argv)


def params_of(args) -> BoostParams:
    return BoostParams(n_trees=args.trees, max_depth=args.depth, min_samples_leaf=args.min_samples_leaf,
                       max_bin=args.max_bin, category_subsets=not args.no_category_subsets, subsample=0.8)


def craft(args, own: pd.DataFrame, targets, seed: int):
    if args.variant == "missing":
        group = args.group_size or 1
        return craft_missing_copies(own, args.base, targets, id_column=ID, group_size=group, n_copies=args.columns,
                                    min_apart=args.min_apart or max(10, args.min_samples_leaf), seed=seed)
    return craft_category_columns(own, targets, group_size=args.group_size or 10, n_columns=args.columns or 40,
                                  id_column=ID, base=args.base, seed=seed, max_bin=args.max_bin)


def pick_targets(own: pd.DataFrame, args, rng) -> np.ndarray:
    """Random rows of the party's own file (with a value in the copied column)."""
    usable = np.flatnonzero(pd.to_numeric(own[args.base], errors="coerce").notna().to_numpy())
    return np.sort(rng.choice(usable, args.targets, replace=False))


def in_process(args, seed: int, workdir: Path) -> dict:
    frame = load_give_me_some_credit().head(args.rows).reset_index(drop=True)
    labels = frame[LABEL].to_numpy()
    own = frame[[ID, *OWN]]
    passive_frame, crafted = craft(args, own, pick_targets(own, args, np.random.default_rng(seed)), seed)
    active = PartyData.from_frame(frame[[c for c in frame.columns if c not in OWN]], id_column=ID, label=LABEL,
                                  name="active", require_label=True)
    passive = PartyData.from_frame(passive_frame, id_column=ID, name="passive-1",
                                   categorical=crafted.names if args.variant == "category" else ())
    started = time.perf_counter()
    model, _ = train_local(active, [passive], params_of(args), args.protocol,
                           options=ProtocolOptions(allow_simulated_tee=True), checkpoint_dir=workdir / "checkpoint")
    seconds = time.perf_counter() - started
    model.save(workdir / "model")
    host = [p for p in (workdir / "model" / "passive-1.json", workdir / "checkpoint" / "passive-1.ckpt") if p.exists()]
    view = read_passive_host_view(host, feature_names=crafted.feature_names, names=crafted.names)
    known = known_label_rows(labels, crafted.targets, args.known, seed)
    report = attack_report(view, crafted, own.drop(columns=[ID]), labels, known)
    return {"mode": "in process", "rows": args.rows, "train_seconds": round(seconds, 2), "report": report}


def deployed(args, seed: int, workdir: Path) -> dict:
    """The demo's federation with the crafted passive file; the passive host's files only."""
    from teeboost.deploy.active import shutdown_peers
    from teeboost.deploy.config import load_config
    from teeboost.deploy.demo import set_peer_addresses, start_passive, write_federation

    training = {"protocol": args.protocol, "n_trees": args.trees, "max_depth": args.depth,
                "min_samples_leaf": args.min_samples_leaf, "max_bin": args.max_bin,
                "category_subsets": not args.no_category_subsets, "test_size": args.test_size}
    configs = write_federation(workdir, training=training)
    if args.min_samples_leaf < 20:  # the passive party's default floor refuses smaller leaves: this party allows them
        text = configs["passive-1"].read_text()
        configs["passive-1"].write_text(text.replace("[policy]\n", f"[policy]\nmin_rows_per_node = "
                                                                   f"{args.min_samples_leaf}\n", 1))
    sample = load_give_me_some_credit()
    keep = set(sample[ID].head(args.rows))
    truth = dict(zip(sample[ID], sample[LABEL]))
    for name in ("active", "passive-1"):  # the first --rows customers of each organisation's file
        path = workdir / f"{name}.csv"
        data = pd.read_csv(path, dtype={ID: str})
        data[data[ID].isin(keep)].to_csv(path, index=False)
    own = pd.read_csv(workdir / "passive-1.csv", dtype={ID: str}).reset_index(drop=True)
    candidates = own
    if args.known_split:  # the active party aligns in its own row order and holds out test_size of it
        from teeboost.row_matching import train_test_rows

        active_order = pd.read_csv(workdir / "active.csv", dtype={ID: str})[ID]
        aligned = active_order[active_order.isin(set(own[ID]))].to_numpy()
        trained = set(aligned[train_test_rows(aligned.size, args.test_size, 0)[0]])
        candidates = own[own[ID].isin(trained)]
    rows = pick_targets(candidates.reset_index(drop=True), args, np.random.default_rng(seed))
    targets = candidates[ID].to_numpy()[rows].tolist()  # as ids
    passive_frame, crafted = craft(args, own, targets, seed)
    passive_frame.to_csv(workdir / "passive-1.csv", index=False)  # the malicious host's data file
    labels = own[ID].map(truth).to_numpy()  # evaluation only; the attack sees labels[known]
    active_ids = set(pd.read_csv(workdir / "active.csv", dtype={ID: str})[ID])
    log = workdir / "passive-1.log"
    started = time.perf_counter()
    process, address = start_passive(configs["passive-1"], workdir / "passive-1.address", log)
    try:
        set_peer_addresses(configs["active"], {1: ("passive-1", address)})
        result = subprocess.run([sys.executable, "-m", "teeboost.cli", "party", "--config", str(configs["active"]),
                                 "--protocol", args.protocol, "--json"], capture_output=True, text=True, timeout=3600)
        if result.returncode != 0:
            raise SystemExit(f"active party failed: {result.stderr.strip()[-3000:]}")
    finally:
        try:
            shutdown_peers(load_config(configs["active"]), "benchmark finished")
        except Exception:  # noqa: BLE001 - the passive party may be gone already
            pass
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    seconds = time.perf_counter() - started
    passive = load_config(configs["passive-1"])
    shared = np.array([i in active_ids for i in own[ID]])
    known = known_label_rows(np.where(shared, labels, 0), crafted.targets, args.known, seed)
    known = known[shared[known]]  # the attacker knows outcomes of customers both hold

    def attack():
        host = [passive.model_dir, passive.checkpoint_dir, passive.audit_log, *workdir.glob("audit-passive-1*"), log,
                workdir / "passive-1.address", *workdir.glob("consent-*")]  # not its data file: the attacker wrote that
        view = read_passive_host_view([p for p in dict.fromkeys(host) if p is not None and Path(p).exists()],
                                      feature_names=crafted.feature_names, names=crafted.names)
        return attack_report(view, crafted, own.drop(columns=[ID]), np.where(shared, labels, -1), known)

    report = attack()  # what the host holds after the run, before anyone consents to anything
    before = None
    if args.disclose:  # the label owner's consent, then the passive host opens its records (both audited)
        consent = workdir / "consent-passive-1.json"
        for command in (["consent", "--config", str(configs["active"]), "--party", "passive-1", "--out", str(consent)],
                        ["disclose", "--config", str(configs["passive-1"]), "--consent", str(consent)]):
            done = subprocess.run([sys.executable, "-m", "teeboost.cli", *command], capture_output=True, text=True,
                                  timeout=600)
            if done.returncode != 0:
                raise SystemExit(f"teeboost {command[0]} failed: {done.stderr.strip()[-2000:]}")
        before, report = report, attack()
    return {"mode": "deployed", "rows": int(len(own)), "train_seconds": round(seconds, 2), "report": report,
            "targets_outside_the_active_file": int((~shared[crafted.targets]).sum()),
            **({"before_consent": {"auc_attack": round(before.auc_attack, 4), "auc_baseline": round(before.auc_baseline, 4),
                                   "records_found": before.records_found}} if before is not None else {})}


def main(argv=None) -> int:
    args = parse(argv)
    runs = []
    for repeat in range(args.repeats):
        seed = args.seed + repeat
        with tempfile.TemporaryDirectory(prefix="teeboost-crafted-") as tmp:
            workdir = (args.workdir / f"run-{seed}") if args.workdir else Path(tmp)
            workdir.mkdir(parents=True, exist_ok=True)
            started = time.perf_counter()
            run = (deployed if args.deployed else in_process)(args, seed, workdir)
            run["seconds"] = round(time.perf_counter() - started, 2)
        report = run.pop("report")
        runs.append(report)
        figures = {**run, "seed": seed, "variant": args.variant, "protocol": args.protocol, "trees": args.trees,
                   "depth": args.depth, "min_samples_leaf": args.min_samples_leaf, "targets": report.targets,
                   "positives": report.positives, "auc_attack": round(report.auc_attack, 4),
                   "auc_baseline": round(report.auc_baseline, 4), "auc_ceiling": round(report.auc_ceiling, 4),
                   "records_found": report.records_found, "records_on_crafted": report.records_on_crafted,
                   "targets_named": report.targets_named, "files_read": len(report.files_read),
                   "files_opaque": len(report.files_unreadable), "scoring": report.method}
        if args.json:
            print(json.dumps(figures))
            continue
        group = args.group_size or (1 if args.variant == "missing" else 10)
        print(f"{figures['mode']}, {args.protocol}, {args.variant} (groups of {group}): rows {figures['rows']}, "
              f"targets {report.targets} "
              f"({report.positives} label 1), {args.trees} trees x depth {args.depth}, k {args.min_samples_leaf}, "
              f"seed {seed}")
        print(f"  AUC attack {report.auc_attack:.3f} | own-column baseline {report.auc_baseline:.3f} "
              f"| ceiling {report.auc_ceiling:.3f}")
        print(f"  records found {report.records_found} ({report.records_on_crafted} on crafted columns, "
              f"{report.targets_named} targets named); files read {len(report.files_read)} "
              f"({len(report.files_unreadable)} opaque)")
        extra = (f"; {run['targets_outside_the_active_file']} targets not in the active party's file"
                 if "targets_outside_the_active_file" in run else "")
        if "before_consent" in run:
            sealed = run["before_consent"]
            print(f"  before consent (records sealed): AUC attack {sealed['auc_attack']:.3f} | baseline "
                  f"{sealed['auc_baseline']:.3f} | records found {sealed['records_found']}; the figures above are "
                  "after the label owner's consent and `teeboost disclose`")
        print(f"  seconds: training {run['train_seconds']}, total {run['seconds']}{extra}")
        print(f"  scoring: {report.method}")
    if len(runs) > 1 and not args.json:
        attack = [r.auc_attack for r in runs]
        baseline, ceiling = np.mean([r.auc_baseline for r in runs]), np.mean([r.auc_ceiling for r in runs])
        print(f"over {len(runs)} draws: AUC attack mean {np.mean(attack):.3f} (min {min(attack):.3f}), baseline mean "
              f"{baseline:.3f}, ceiling mean {ceiling:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
