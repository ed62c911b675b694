"""Where teeboost's AUC differs from XGBoost's in the accuracy table, and how much of that is noise.

100 trees of depth 6 at learning rate 0.3 amplify any small difference in the first splits, so
a per-seed gap between two libraries means little on its own. On the same splits and seeds as
``benchmarks/accuracy.py``, this prints paired differences (mean ± std over the seeds) of:

- teeboost − XGBoost: the accuracy table's comparison;
- XGBoost at 255 bins − XGBoost at 256: XGBoost's own sensitivity to one bin more or less, the
  size of difference that bin edges alone produce;
- teeboost − XGBoost with every category column given to both as numeric codes (missing cells
  kept missing): what is left once categorical split rules are out of the picture;

and, on seed 0's split, where each engine starts: XGBoost's estimated ``base_score`` and the
probability of teeboost's base margin.

    python benchmarks/accuracy_controls.py [--datasets credit_data,...] [--seeds 5]
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
import pandas as pd
from accuracy import DATASETS, THREADS, fit_teeboost, fit_xgboost, split  # this folder's accuracy.py


def as_codes(frame: pd.DataFrame) -> pd.DataFrame:
    """Category columns as their numeric codes, missing cells left missing."""
    return frame.apply(lambda c: c.cat.codes.astype(float).where(c.notna()) if isinstance(c.dtype, pd.CategoricalDtype)
                       else c)


def xgboost_with(x_train, y_train, seed: int, **params):
    import xgboost as xgb

    return xgb.XGBClassifier(tree_method="hist", enable_categorical=True, n_jobs=THREADS, random_state=seed,
                             **params).fit(x_train, y_train)


def differences(name: str, seeds: int) -> dict[str, list[float]]:
    from sklearn.metrics import roc_auc_score

    table = DATASETS[name]()
    categorical = any(isinstance(t, pd.CategoricalDtype) for t in table.features.dtypes)
    found: dict[str, list[float]] = {"teeboost − xgboost": [], "xgboost 255 bins − 256 bins": []}
    if categorical:
        found["teeboost − xgboost, categories as codes"] = []
    for seed in range(seeds):
        x_train, x_test, y_train, y_test = split(table, seed)

        def auc(model, x=x_test):
            return roc_auc_score(y_test, model.predict_proba(x)[:, 1])

        xgboost = auc(fit_xgboost(table, x_train, y_train, seed, 100))
        found["teeboost − xgboost"].append(auc(fit_teeboost(table, x_train, y_train, seed, 100)) - xgboost)
        found["xgboost 255 bins − 256 bins"].append(auc(xgboost_with(x_train, y_train, seed, max_bin=255)) - xgboost)
        if categorical:
            codes_train, codes_test = as_codes(x_train), as_codes(x_test)
            found["teeboost − xgboost, categories as codes"].append(
                auc(fit_teeboost(table, codes_train, y_train, seed, 100), codes_test)
                - auc(xgboost_with(codes_train, y_train, seed), codes_test))
    return found


def starting_points(name: str) -> tuple[float, float, float]:
    """(positive rate, XGBoost's base_score, teeboost's starting probability) on seed 0's training rows."""
    import json

    table = DATASETS[name]()
    x_train, _, y_train, _ = split(table, 0)
    config = json.loads(fit_xgboost(table, x_train, y_train, 0, 1).get_booster().save_config())
    base_score = float(config["learner"]["learner_model_param"]["base_score"].strip("[]"))
    margin = float(fit_teeboost(table, x_train, y_train, 0, 1).model_.active.ensemble.base_margin[0])
    return float(np.mean(y_train)), base_score, 1 / (1 + np.exp(-margin))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    print(f"paired AUC differences, mean ± std over {args.seeds} seeds (100 trees, depth 6, learning rate 0.3)\n")
    print("| dataset | comparison | mean ± std | largest gap |\n|---|---|---|---|")
    for name in args.datasets.split(","):
        for comparison, values in differences(name, args.seeds).items():
            spread = statistics.stdev(values) if len(values) > 1 else 0.0
            print(f"| {name} | {comparison} | {statistics.fmean(values):+.4f} ± {spread:.4f} | "
                  f"{np.max(np.abs(values)):.4f} |")
    print("\n| dataset | positive rate, seed 0 training rows | xgboost base_score | teeboost starting probability |"
          "\n|---|---|---|---|")
    for name in args.datasets.split(","):
        print("| " + " | ".join([name, *(f"{v:.5f}" for v in starting_points(name))]) + " |")


if __name__ == "__main__":
    main()
