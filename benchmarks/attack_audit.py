"""Time of a full leakage audit (train with a transcript, stage 1, stage 2, label attack) at
1e4 rows x 50 trees x depth 6, per protocol, on the bundled data; plain training in the same
process is the reference the ratios use.

    python benchmarks/attack_audit.py [--protocols plain,ntee,onetee] [--trees 50] [--depth 6]

Prints one line per protocol: seconds per phase, the share of ages within +-2 years and of
incomes within +-$1,000 (method iv), Spearman of the inferred orders and the passive party's
label AUC. Enclaves are simulated.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from teeboost.attack.run import AttackTarget, run_attack
from teeboost.config import BoostParams, ProtocolOptions
from teeboost.datasets import (GIVE_ME_SOME_CREDIT_ID, GIVE_ME_SOME_CREDIT_LABEL, GIVE_ME_SOME_CREDIT_PASSIVE,
                               load_give_me_some_credit)
from teeboost.data import split_columns
from teeboost.federation import train_local


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocols", default="plain,ntee,onetee")
    parser.add_argument("--trees", type=int, default=50)
    parser.add_argument("--depth", type=int, default=6)
    args = parser.parse_args()
    frame = load_give_me_some_credit()
    active, passives = split_columns(frame, [GIVE_ME_SOME_CREDIT_PASSIVE], label=GIVE_ME_SOME_CREDIT_LABEL,
                                     id_column=GIVE_ME_SOME_CREDIT_ID)
    params = BoostParams(n_trees=args.trees, max_depth=args.depth, subsample=0.8, max_bin=32)
    options = ProtocolOptions(allow_simulated_tee=True)
    targets = [AttackTarget("age", (2.0,)), AttackTarget("MonthlyIncome", (1000.0,))]
    half = active.take(range(active.n_rows // 2)), [p.take(range(active.n_rows // 2)) for p in passives]
    started = time.perf_counter()
    train_local(*half, params, "plain")
    reference = time.perf_counter() - started
    print(f"machine: 2 cores; {active.n_rows // 2} attacked rows, {args.trees} trees x depth {args.depth}, 32 bins; "
          f"reference: plain training without transcript {reference:.2f} s")
    print(f"{'protocol':<12}{'train s':>9}{'stage1 s':>10}{'labels s':>10}{'total s':>9}{'x ref':>7}"
          f"{'age+-2':>8}{'inc+-1k':>9}{'rho age':>9}{'rho inc':>9}{'label AUC':>11}")
    for protocol in args.protocols.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            report = run_attack(active, passives, targets, params, protocol, options=options, out_dir=Path(tmp))
        pick = {(r["feature"], r["method"]): r["accuracy"] for r in report["results"]}
        seconds = report["seconds"]
        auc = next(row for row in report["labels"] if row["role"] == "passive").get("auc_transcript")
        print(f"{protocol:<12}{seconds['train']:>9.2f}{seconds['stage1']:>10.2f}{seconds['labels']:>10.2f}"
              f"{seconds['total']:>9.2f}{seconds['total'] / reference:>7.1f}"
              f"{100 * pick[('age', 'attack_approx')]:>7.1f}%{100 * pick[('MonthlyIncome', 'attack_approx')]:>8.1f}%"
              f"{report['recovery']['age']['spearman']:>9.3f}{report['recovery']['MonthlyIncome']['spearman']:>9.3f}"
              f"{auc:>11.3f}")


if __name__ == "__main__":
    main()
