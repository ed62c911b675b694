import numpy as np
from sklearn.metrics import roc_auc_score

from teeboost.metrics import roc_auc


def test_auc_matches_scikit_learn_with_ties():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 500)
    score = np.round(rng.random(500) + 0.3 * y, 1)  # many ties
    assert roc_auc(y, score) == np.float64(roc_auc_score(y, score)).item() or \
        abs(roc_auc(y, score) - roc_auc_score(y, score)) < 1e-12
