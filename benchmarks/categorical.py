"""Native categorical features against XGBoost's, on a real dataset with text columns.

The diamonds table (53,940 diamonds, bundled): is a diamond expensive for its size (price per
carat above the median)? The active party holds the label, carat, cut, depth and table; the
passive party (the grading lab) holds color and clarity as text. Same 70/30 split and the same
parameters for XGBoost (``enable_categorical``, hist, its native partition splits) and for
teeboost in each protocol; XGBoost with the grades as bare numeric codes shows what the
categories are worth.

    python benchmarks/categorical.py [--rows 53940] [--protocols plain,ntee,onetee,strict]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import xgboost as xgb

from teeboost.config import BoostParams, ProtocolOptions
from teeboost.data import split_columns
from teeboost.datasets import DIAMONDS_LABEL, DIAMONDS_PASSIVE, load_diamonds
from teeboost.estimator import party_features
from teeboost.federation import train_local
from teeboost.row_matching import train_test_rows

PARAMS = BoostParams(n_trees=20, max_depth=4, learning_rate=0.3, subsample=1.0, max_bin=32)
XGB = {"objective": "binary:logistic", "max_depth": 4, "eta": 0.3, "reg_lambda": 1.0, "min_child_weight": 1.0,
       "max_bin": 32, "tree_method": "hist", "subsample": 1.0, "nthread": 2}
CATEGORIES = ["cut", "color", "clarity"]


def xgboost_accuracy(frame, train, test, categorical: bool, n_trees: int) -> float:
    x = frame.drop(columns=["id", DIAMONDS_LABEL]).copy()
    for column in CATEGORIES:
        x[column] = x[column].astype("category") if categorical else x[column].astype("category").cat.codes
    y = frame[DIAMONDS_LABEL].to_numpy()
    booster = xgb.train(XGB, xgb.DMatrix(x.iloc[train], label=y[train], enable_categorical=categorical),
                        n_trees)
    proba = booster.predict(xgb.DMatrix(x.iloc[test], enable_categorical=categorical))
    return float(np.mean((proba >= 0.5) == y[test]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=53_940)
    parser.add_argument("--protocols", default="plain,ntee,onetee,strict")
    parser.add_argument("--max-bin", type=int, default=32)
    args = parser.parse_args()
    params = PARAMS.replace(max_bin=args.max_bin)
    XGB["max_bin"] = args.max_bin
    frame = load_diamonds().head(args.rows)
    active, passives = split_columns(frame, [DIAMONDS_PASSIVE], label=DIAMONDS_LABEL, id_column="id")
    train, test = train_test_rows(active.n_rows, 0.3, 0)
    print(f"diamonds: {active.n_rows:,} rows ({train.size:,} train / {test.size:,} test); "
          f"active {list(active.feature_names)}, passive {list(passives[0].feature_names)}; "
          f"{params.n_trees} trees of depth {params.max_depth}, {params.max_bin} bins")
    started = time.perf_counter()
    reference = xgboost_accuracy(frame, train, test, True, params.n_trees)
    print(f"xgboost {xgb.__version__} native categorical   accuracy {reference:.4f}  "
          f"({time.perf_counter() - started:.2f} s)")
    print(f"xgboost, grades as numeric codes     accuracy {xgboost_accuracy(frame, train, test, False, params.n_trees):.4f}")
    options = ProtocolOptions(allow_simulated_tee=True)
    test_active, test_passives = active.take(test), [p.take(test) for p in passives]
    for protocol in args.protocols.split(","):
        started = time.perf_counter()
        model, _ = train_local(active.take(train), [p.take(train) for p in passives], params, protocol,
                               options=options)
        seconds = time.perf_counter() - started
        a, p = party_features(model, test_active, test_passives)
        accuracy = float(np.mean((model.predict(a, p) >= 0.5) == test_active.labels))
        print(f"teeboost {protocol:<8} categorical        accuracy {accuracy:.4f}  "
              f"(difference to xgboost {accuracy - reference:+.4f}; {seconds:.2f} s"
              f"{', simulated enclaves' if protocol != 'plain' else ''})")


if __name__ == "__main__":
    main()
