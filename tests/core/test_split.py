import numpy as np
import pytest

from teeboost.core.gradients import GradientCodec
from teeboost.core.split import NodeBest, SplitCriteria, best_splits, pick_global_best

CODEC = GradientCodec(0)  # integers are the values themselves


def hist(rows):
    """rows: list of (bin, g, h, count) for one node, one feature, width 4 (3 value bins + missing)."""
    out = np.zeros((1, 1, 4, 3), dtype=np.int64)
    for b, g, h, c in rows:
        out[0, 0, b] += (g, h, c)
    return out


def test_known_answer_gain():
    # bins: 0 -> G=-4,H=2 ; 1 -> G=6,H=2 ; no missing. lambda=1
    h = hist([(0, -4, 2, 2), (1, 6, 2, 2)])
    crit = SplitCriteria(reg_lambda=1.0, min_child_weight=0.0)
    (best,) = best_splits(h, np.array([2]), CODEC, crit)
    expected = 16 / 3 + 36 / 3 - 4 / 5
    assert best.feature == 0 and best.bin == 0
    assert best.gain == pytest.approx(expected)
    assert best.default_left is False  # no missing values: first direction (missing right)


def test_missing_direction_is_learned():
    # missing rows look like bin 0 rows, so they should go left
    h = hist([(0, -4, 2, 2), (1, 6, 2, 2), (3, -4, 2, 2)])
    (best,) = best_splits(h, np.array([2]), CODEC, SplitCriteria(min_child_weight=0.0))
    assert best.bin == 0 and best.default_left is True


def test_constraints_remove_candidates():
    h = hist([(0, -4, 2, 1), (1, 6, 2, 3)])
    (best,) = best_splits(h, np.array([2]), CODEC, SplitCriteria(min_samples_leaf=2, min_child_weight=0))
    assert not best.valid
    (best,) = best_splits(h, np.array([2]), CODEC, SplitCriteria(min_child_weight=3.0))
    assert not best.valid
    (best,) = best_splits(h, np.array([2]), CODEC, SplitCriteria(min_child_weight=0, min_split_gain=1e9))
    assert not best.valid


def test_last_value_bin_is_never_a_threshold():
    h = hist([(0, -4, 2, 2), (1, 6, 2, 2), (2, 5, 2, 2)])
    (best,) = best_splits(h, np.array([2]), CODEC, SplitCriteria(min_child_weight=0))
    assert best.bin == 0  # bin 1 would be the last of 2 value bins


def test_ties_go_to_the_first_candidate_and_lowest_party():
    a = NodeBest(5.0, 3, 1, False)
    b = NodeBest(5.0, 0, 0, True)
    assert pick_global_best([(2, b), (1, a)]) == (1, a)
    assert pick_global_best([(1, NodeBest(-np.inf, -1, -1, False))]) is None
