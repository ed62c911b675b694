"""Time teeboost's plain federation against centralised xgboost in the same process.

Rows are resampled (with replacement) from the bundled Give Me Some Credit sample to the
requested sizes; both train the same workload on the same 10 columns (teeboost: 5 at the
active party, 5 at one passive party, over the in-memory channel, binning included; xgboost
hist: QuantileDMatrix construction included, 2 threads). Workloads: ``default`` is XGBoost's
defaults (100 trees, depth 6, learning rate 0.3, 256 bins, subsample 1), ``small`` the old one
(5 trees, depth 3, subsample 0.8, 32 bins). Each timing is the best of ``--repeat`` runs.
Targets (issue #37, default workload): ratio <= 8 at 1e4 rows, <= 2 at 1e5 and 1e6.

    python benchmarks/plain_vs_xgboost.py [--rows 10000 100000] [--workloads default small] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from teeboost.config import BoostParams
from teeboost.data import PartyData, split_columns
from teeboost.datasets import (GIVE_ME_SOME_CREDIT_ID, GIVE_ME_SOME_CREDIT_LABEL, GIVE_ME_SOME_CREDIT_PASSIVE,
                               load_give_me_some_credit)
from teeboost.federation import train_local
from teeboost.metrics import roc_auc


def resample(n_rows: int, seed: int = 0) -> tuple[PartyData, PartyData]:
    frame = load_give_me_some_credit().drop(columns=[GIVE_ME_SOME_CREDIT_ID])  # a row number, not a feature
    active, (passive,) = split_columns(frame, [GIVE_ME_SOME_CREDIT_PASSIVE], label=GIVE_ME_SOME_CREDIT_LABEL)
    index = np.random.default_rng(seed).integers(0, active.n_rows, n_rows)
    return active.take(index), passive.take(index)


WORKLOADS = {
    "default": dict(n_trees=100, max_depth=6, learning_rate=0.3, subsample=1.0, max_bin=256),
    "small": dict(n_trees=5, max_depth=3, learning_rate=0.3, subsample=0.8, max_bin=32),
}


def best_of(repeat: int, fn) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> None:
    import xgboost as xgb

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--workloads", nargs="+", choices=sorted(WORKLOADS), default=["default", "small"])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}, "
          f"numpy {np.__version__}, xgboost {xgb.__version__}")
    print(f"{'workload':>8} {'rows':>9} {'teeboost s':>11} {'xgboost s':>10} {'ratio':>6} {'auc tb':>7} "
          f"{'auc xgb':>8} {'MB sent':>8}")
    for name in args.workloads:
        w = WORKLOADS[name]
        params = BoostParams(**w)
        for n_rows in args.rows:
            active, passive = resample(n_rows)
            tb_seconds, (model, run) = best_of(args.repeat, lambda: train_local(active, [passive], params))
            features = np.hstack([active.features, passive.features])

            def train_xgb():
                matrix = xgb.QuantileDMatrix(features, label=active.labels, max_bin=w["max_bin"], nthread=2)
                return xgb.train({"objective": "binary:logistic", "max_depth": w["max_depth"],
                                  "eta": w["learning_rate"], "subsample": w["subsample"], "max_bin": w["max_bin"],
                                  "tree_method": "hist", "nthread": 2, "seed": 0}, matrix, w["n_trees"])

            xgb_seconds, booster = best_of(args.repeat, train_xgb)
            auc_tb = roc_auc(active.labels, model.predict(active.features, [passive.features]))
            auc_xgb = roc_auc(active.labels, booster.predict(xgb.DMatrix(features, nthread=2)))
            print(f"{name:>8} {n_rows:>9} {tb_seconds:>11.3f} {xgb_seconds:>10.3f} {tb_seconds / xgb_seconds:>6.2f} "
                  f"{auc_tb:>7.4f} {auc_xgb:>8.4f} {run.traffic['bytes_total'] / 1e6:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
