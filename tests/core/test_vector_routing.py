"""Scoring with whole arrays (online sessions, in the active enclave) gives exactly the margins
``Ensemble.margin`` gives, bit for bit: the same leaves, added tree by tree in the same order."""

import numpy as np
import pytest

from teeboost.config import BoostParams
from teeboost.core.central import LocalOracle, train_central
from teeboost.core.vector_routing import EnsembleArrays, RecordArrays


@pytest.mark.parametrize("objective, classes", [("binary", 2), ("multiclass", 3), ("regression", 2)])
def test_array_margins_are_the_ensembles_bit_for_bit(objective, classes):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(600, 4))
    x[rng.random(x.shape) < 0.05] = np.nan  # missing values take their learned side
    y = (x[:, 0] > 0).astype(float) + (np.nan_to_num(x[:, 1]) > 0.5) if classes == 3 else \
        (np.nan_to_num(x[:, 0]) + rng.normal(scale=0.5, size=600) > 0).astype(float)
    params = BoostParams(n_trees=30, max_depth=4, learning_rate=0.3, max_bin=32, min_samples_leaf=5)
    ensemble, owner = train_central(x, y, params, objective, n_classes=classes)
    held = rng.normal(size=(97, 4))
    expected = ensemble.margin(held.shape[0], LocalOracle(owner, held))
    records = RecordArrays.from_owner(owner)
    got = EnsembleArrays(ensemble).margin(held.shape[0], lambda party, asked, rows: records.go_left(held, rows, asked))
    assert got.shape == expected.shape == (97, ensemble.n_outputs)
    np.testing.assert_array_equal(got, expected)
