"""Near-duplicate columns: found by blocks, refused by a strict passive enclave (issue #32)."""

import numpy as np
import pytest

from teeboost.config import BoostParams, ProtocolOptions
from teeboost.core.near_duplicates import near_duplicate_pairs
from teeboost.data import split_columns
from teeboost.datasets import GIVE_ME_SOME_CREDIT_LABEL, GIVE_ME_SOME_CREDIT_PASSIVE, load_give_me_some_credit
from teeboost.errors import TeeboostError
from teeboost.federation import train_local


def test_columns_differing_in_a_few_rows_are_found_wherever_the_rows_are():
    rng = np.random.default_rng(0)
    base = rng.integers(0, 50, 5000).astype(np.uint16)
    others = [rng.integers(0, 50, 5000).astype(np.uint16) for _ in range(4)]
    for changed in ([0], [4999], [17, 2500, 4000], list(range(100, 119))):  # 1 to 19 rows, anywhere
        copy = base.copy()
        copy[changed] = 64  # the missing bin
        found = near_duplicate_pairs(np.stack([*others, base, copy]), 20)
        assert found == [(4, 5, len(changed))]
    copy = base.copy()
    copy[:20] = 64  # 20 rows: not fewer than 20
    assert near_duplicate_pairs(np.stack([base, copy]), 20) == []
    assert near_duplicate_pairs(np.stack([base, base.copy()]), 20) == []  # identical columns say nothing


def test_nearly_constant_columns_are_left_alone():
    flag = np.zeros(5000, dtype=np.uint16)
    flag[[3, 9]] = 1
    other = np.zeros(5000, dtype=np.uint16)
    other[[3, 400]] = 1
    assert near_duplicate_pairs(np.stack([flag, other]), 20) == []


def test_a_strict_passive_enclave_refuses_a_copy_of_a_column_with_one_row_changed():
    frame = load_give_me_some_credit().head(1500).copy()
    frame["age_copy"] = frame["age"]
    frame.loc[frame.index[7], "age_copy"] = np.nan
    active, passives = split_columns(frame, [GIVE_ME_SOME_CREDIT_PASSIVE + ["age_copy"]],
                                     label=GIVE_ME_SOME_CREDIT_LABEL, id_column="id")
    params = BoostParams(n_trees=2, max_depth=2, min_samples_leaf=20, subsample=0.8, max_bin=32)
    options = ProtocolOptions(allow_simulated_tee=True)
    with pytest.raises(TeeboostError, match=r"columns 0 and 5 of this party .* all but 1 of .* fewer than 20 rows"):
        train_local(active, passives, params, protocol="strict", options=options)
    model, _ = train_local(active, passives, params, protocol="plain")  # other protocols: the host holds its records
    assert model.n_trees == 2
