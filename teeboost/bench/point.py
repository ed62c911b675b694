"""One benchmark point, run in its own process so its peak memory is its own.

Workload (the seed paper's): rows resampled with replacement from the training 70% of the
bundled Give Me Some Credit sample; one active party with the label and 5 columns, passive
parties sharing the other 5 (or more columns, each a noisy copy); depth 3, lr 0.3,
subsample 0.8, 32 bins; Paillier 2048 / AES-128. AUC is measured on the untouched 30%.
Prints one JSON object; ``peak_rss_mb`` is the largest single process's peak (the sweep
measures the whole process tree from outside).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

import numpy as np

from ..config import BoostParams, ProtocolOptions
from ..data import split_columns
from ..datasets import (
    GIVE_ME_SOME_CREDIT_ID, GIVE_ME_SOME_CREDIT_LABEL, GIVE_ME_SOME_CREDIT_PASSIVE, load_give_me_some_credit,
)
from ..metrics import roc_auc
from ..row_matching import train_test_rows

__all__ = ["workload", "boost_params", "train_xgboost", "run_point"]


def workload(n_rows: int, *, passive_parties: int = 1, extra_features: int = 0, seed: int = 0):
    """(train active, [train passives], test active, [test passives]).

    The rows are drawn with replacement, so they carry no ids (ids must be unique) and the
    parties are aligned by position; the source file's row number is not a feature either."""
    frame = load_give_me_some_credit().drop(columns=[GIVE_ME_SOME_CREDIT_ID], errors="ignore")
    rng = np.random.default_rng(seed)
    for k in range(extra_features):  # noisy copies of real columns: more features, same signal
        source = GIVE_ME_SOME_CREDIT_PASSIVE[k % len(GIVE_ME_SOME_CREDIT_PASSIVE)]
        column = frame[source].to_numpy(dtype=float)
        frame[f"{source}_copy{k}"] = column * (1 + 0.05 * rng.standard_normal(column.size))
    passive_columns = [c for c in frame.columns if c in GIVE_ME_SOME_CREDIT_PASSIVE or "_copy" in c]
    groups = [list(g) for g in np.array_split(np.array(passive_columns), passive_parties)]
    active, passives = split_columns(frame, groups, label=GIVE_ME_SOME_CREDIT_LABEL)
    train, test = train_test_rows(active.n_rows, 0.3, seed)
    picked = train[rng.integers(0, train.size, n_rows)]
    return (active.take(picked), [p.take(picked) for p in passives],
            active.take(test), [p.take(test) for p in passives])


def boost_params(n_trees: int, seed: int) -> BoostParams:
    return BoostParams(n_trees=n_trees, max_depth=3, learning_rate=0.3, subsample=0.8, max_bin=32,
                       random_state=seed)


def train_xgboost(features: np.ndarray, labels: np.ndarray, n_trees: int, seed: int):
    """(seconds, booster): XGBoost hist on 2 threads, the same trees' shape as ``boost_params``;
    the time includes building the QuantileDMatrix (XGBoost's binning), as ours includes binning."""
    try:
        import xgboost as xgb
    except ImportError:
        raise SystemExit("the centralised floor needs xgboost: pip install xgboost "
                         "(or leave xgboost out of --protocols)") from None

    started = time.perf_counter()
    matrix = xgb.QuantileDMatrix(features, label=labels, max_bin=32, nthread=2)
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 3, "eta": 0.3, "subsample": 0.8,
                         "max_bin": 32, "tree_method": "hist", "nthread": 2, "seed": seed}, matrix, n_trees)
    return time.perf_counter() - started, booster


def _peak_rss_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024.0  # Linux reports kilobytes


def run_point(protocol: str, n_rows: int, *, n_trees: int, passive_parties: int, extra_features: int,
              scheme: str, seed: int) -> dict:
    active, passives, test_active, test_passives = workload(n_rows, passive_parties=passive_parties,
                                                            extra_features=extra_features, seed=seed)
    params = boost_params(n_trees, seed)
    result = {"protocol": protocol, "rows": n_rows, "n_trees": n_trees, "passive_parties": passive_parties,
              "features": active.features.shape[1] + sum(p.features.shape[1] for p in passives)}
    if protocol == "xgboost":
        seconds, booster = train_xgboost(np.hstack([active.features, *[p.features for p in passives]]),
                                         active.labels, n_trees, seed)
        import xgboost as xgb

        x_test = np.hstack([test_active.features, *[p.features for p in test_passives]])
        auc = roc_auc(test_active.labels, booster.predict(xgb.DMatrix(x_test, nthread=2)))
        result.update(seconds=seconds, phases={}, bytes={"active_to_passive": 0, "passive_to_active": 0},
                      bytes_by_message={}, auc=auc, xgboost=xgb.__version__)
    else:
        from ..federation import train_local

        options = ProtocolOptions(scheme=scheme, allow_simulated_tee=True)  # reports say "simulated"
        started = time.perf_counter()
        model, run = train_local(active, passives, params, protocol, options=options)
        seconds = time.perf_counter() - started
        auc = roc_auc(test_active.labels, model.predict(test_active.features, [p.features for p in test_passives]))
        result.update(seconds=seconds, phases=run.phases, bytes=run.traffic["bytes"],
                      bytes_by_message=run.traffic["bytes_by_message"], auc=auc,
                      **({"scheme": scheme} if protocol == "secureboost" else {}),
                      **({"enclaves": run.enclaves} if run.enclaves else {}))
    result["peak_rss_mb"] = round(_peak_rss_mb(), 1)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m teeboost.bench.point")
    parser.add_argument("--protocol", required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--n-trees", type=int, default=5)
    parser.add_argument("--passive-parties", type=int, default=1)
    parser.add_argument("--extra-features", type=int, default=0)
    parser.add_argument("--scheme", default="paillier")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    result = run_point(args.protocol, args.rows, n_trees=args.n_trees, passive_parties=args.passive_parties,
                       extra_features=args.extra_features, scheme=args.scheme, seed=args.seed)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
