"""A passive party's own categorical split masks as a label channel, measured.

The attack (red team): the passive party makes up "categorical" columns that put a fixed set
of target rows into random groups of 10 rows (the floor), one category each, regrouped in
every column. A gradient-sorted subset sends left the groups with a low G/(H + lambda), i.e.
those holding a y=1 row, and the owner keeps the mask: a y=1 row lands left every time, a
y=0 row only when it shares a group with one. With ``category_subsets=False`` (the label
owner's choice, bound into the enclaves' criteria) a mask is a prefix in the owner's own code
order and says no more than a threshold.
"""

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from teeboost.config import BoostParams
from teeboost.data import split_columns
from teeboost.datasets import GIVE_ME_SOME_CREDIT_LABEL, GIVE_ME_SOME_CREDIT_PASSIVE, load_give_me_some_credit
from teeboost.federation import train_local

N, GROUP, PROBES = 3000, 10, 40


def group_testing_auc(category_subsets: bool) -> float:
    frame = load_give_me_some_credit().head(N).copy()
    labels = frame[GIVE_ME_SOME_CREDIT_LABEL].to_numpy()
    rng = np.random.default_rng(11)
    n_groups = 57
    targets = rng.permutation(N)[: n_groups * GROUP]
    groupings, names = [], []
    for p in range(PROBES):
        groups = rng.permutation(targets).reshape(n_groups, GROUP)
        base = frame[GIVE_ME_SOME_CREDIT_PASSIVE[p % len(GIVE_ME_SOME_CREDIT_PASSIVE)]].rank(method="first")
        column = np.array([f"s{int(v)}" if v == v else "sna" for v in pd.qcut(base, 4, labels=False)], dtype=object)
        for k, rows in enumerate(groups):
            column[rows] = f"t{k:03d}"
        frame[f"probe{p}"] = column
        groupings.append(groups)
        names.append(f"probe{p}")
    active, passives = split_columns(frame, [GIVE_ME_SOME_CREDIT_PASSIVE + names], label=GIVE_ME_SOME_CREDIT_LABEL,
                                     id_column="id", categorical=names)
    params = BoostParams(n_trees=50, max_depth=2, max_bin=64, category_subsets=category_subsets, subsample=0.8)
    model, _ = train_local(active, passives, params)
    passive = model.passives[0]
    left, seen = np.zeros(N), np.zeros(N)
    for _, record in passive.owner.items():
        name = passive.feature_names[record.feature]
        if name not in names:
            continue
        groups = groupings[names.index(name)]
        for code, category in enumerate(passive.vocabularies[name].names):
            if category.startswith("t"):
                rows = groups[int(category[1:])]
                seen[rows] += 1
                left[rows] += (record.categories >> code) & 1
    score = left[targets] / np.maximum(seen[targets], 1)
    return float(roc_auc_score(labels[targets], score))


@pytest.mark.parametrize("category_subsets, low, high", [(True, 0.85, 1.0), (False, 0.35, 0.65)])
def test_group_testing_through_own_masks(category_subsets, low, high):
    auc = group_testing_auc(category_subsets)
    assert low <= auc <= high, auc
