"""What protocol tests share: small training settings, and comparisons (models must match the
reference exactly)."""

from __future__ import annotations

from teeboost.core.model import Ensemble
from teeboost.core.tree import OwnerTable

#: The seed paper's small setting (5 trees of depth 3, subsample 0.8, 32 bins), which the tests'
#: expectations (tree shapes, bytes, AUCs) and the suite's duration were measured at; the
#: defaults are XGBoost's (100 trees of depth 6, subsample 1, 256 bins), 20-50x the work.
SMALL = {"n_trees": 5, "max_depth": 3, "subsample": 0.8, "max_bin": 32}
#: The same for the estimators, by XGBoost's parameter name.
SMALL_ESTIMATOR = {"n_estimators": 5, "max_depth": 3, "subsample": 0.8, "max_bin": 32}
#: The same as ``teeboost train`` / ``teeboost attack`` flags.
SMALL_FLAGS = ["--n-trees", "5", "--max-depth", "3", "--subsample", "0.8", "--max-bin", "32"]


def split_descriptions(ensemble: Ensemble, tables: dict[int, tuple[OwnerTable, list[str]]],
                       statistics: bool = True) -> list:
    """Every tree as nested tuples of (feature name, threshold, category mask, missing_left) and leaf values.

    Party indices and record ids differ between a central and a vertical run; what each
    split *means* (which column, which threshold) and every leaf value must not. Without
    ``statistics`` gains and node sizes are left out (strict mode does not publish them).
    """
    out = []
    for tree in ensemble.trees:
        nodes = []
        for node in range(tree.n_nodes):
            if tree.is_leaf(node):
                nodes.append(("leaf", tree.value[node]) + ((tree.n_rows[node],) if statistics else ()))
            else:
                owner, names = tables[tree.party[node]]
                record = owner.get(tree.record[node])
                nodes.append((names[record.feature], record.threshold, record.categories, record.missing_left)
                             + ((tree.gain[node], tree.n_rows[node]) if statistics else ()))
        out.append((tree.output, tuple(nodes)))
    return out


def federated_descriptions(model, statistics: bool = True) -> list:
    tables = {0: (model.active.owner, model.active.feature_names)}
    tables.update({m.index: (m.owner, m.feature_names) for m in model.passives})
    return split_descriptions(model.active.ensemble, tables, statistics)


def stop_passive_parties(active_config, processes) -> None:
    """Ask the passive parties to shut down through the active party's config, or terminate
    them; wait for each (killed after 10 s)."""
    import subprocess

    from teeboost.deploy.active import shutdown_peers
    from teeboost.deploy.config import load_config

    config = load_config(active_config)
    config.connect_timeout = 3.0
    try:
        shutdown_peers(config, "test finished")
    except Exception:
        for process in processes:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def integer_table(objective: str, seed: int = 0):
    """Columns of few distinct values: teeboost and XGBoost bin them one value a bin, so their
    trees can be compared split for split. -> (x, y, (active, passives))."""
    import numpy as np
    import pandas as pd

    from teeboost.data import split_columns

    rng = np.random.default_rng(seed)
    x = rng.integers(0, 8, size=(600, 5)).astype(float)
    y = 0.8 * x[:, 0] - 0.5 * x[:, 1] + 0.3 * x[:, 2] * (x[:, 3] > 3) + rng.normal(0, 1.0, 600)
    if objective == "binary":
        y = (y > np.median(y)).astype(float)
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(5)]).assign(y=y)
    return x, y, split_columns(frame, [["f3", "f4"]], label="y")
