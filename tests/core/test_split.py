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


def test_the_compiled_and_sparse_split_searches_find_numpys_gain_and_winner_to_the_last_bit(monkeypatch):
    """``split_kernel`` (hosts) and ``split_sparse`` (enclaves: the non-empty bins only) score
    the common case by numpy's formula, in its order: every gain and winner equal to scoring
    every candidate, also with lambda 0 (0/0 and x/0 candidates), L1, empty bins and ties."""
    import teeboost.core.split as split
    from teeboost.core.gradients import GradientCodec

    rng = np.random.default_rng(0)
    compared = 0
    for trial in range(300):
        n_nodes, n_features, width = rng.integers(1, 12), rng.integers(1, 7), int(rng.choice([3, 9, 33, 257]))
        counts = rng.integers(0, 5, (n_nodes, n_features, width))
        if trial % 3 == 0:
            counts[:, :, rng.integers(0, width)] = 0
        hist = np.stack([rng.integers(-2**20, 2**20, counts.shape) * counts,
                         rng.integers(0, 2**20, counts.shape) * counts, counts], axis=-1).astype(np.int64)
        if trial % 5 == 0:  # ties: every feature the same
            hist[:, :] = hist[:, :1]
        n_value_bins = rng.integers(1, width, n_features)
        criteria = split.SplitCriteria(reg_lambda=float(rng.choice([0.0, 0.5, 1.0])),
                                       min_child_weight=float(rng.choice([0, 1e-3, 1.0])),
                                       min_samples_leaf=int(rng.choice([1, 2, 5])),
                                       min_split_gain=float(rng.choice([0, 0.1])), reg_alpha=float(rng.choice([0, 0.3])))
        codec = GradientCodec(int(rng.choice([10, 20, 30])))
        sampled = rng.random(n_features) < 0.8 if trial % 2 else None
        compiled = split.best_splits(hist, n_value_bins, codec, criteria, None, sampled)
        with monkeypatch.context() as m, np.errstate(all="ignore"):
            m.setattr(split, "best_candidates", None)  # as in an enclave: the sparse numpy search
            sparse = split.best_splits(hist, n_value_bins, codec, criteria, None, sampled)
            m.setattr(split, "best_candidates_numpy", None)  # every candidate scored
            reference = split.best_splits(hist, n_value_bins, codec, criteria, None, sampled)
        assert compiled == reference and sparse == reference, trial
        compared += sum(best.valid for best in reference)
    assert compared > 500  # most nodes had a split to agree on


def test_the_sparse_search_keeps_bin_zero_when_it_is_empty(monkeypatch):
    """With bin 0 empty, its cut with missing values sent left (missing alone on the left) may
    be the best split: the sparse search, which skips empty bins, still scores bin 0. A node
    with no valid split is -inf in both."""
    import teeboost.core.split as split

    node = hist([(1, 50, 10, 10), (2, 40, 10, 10), (3, -90, 10, 10)])  # bin 3 is the missing bin
    nothing = hist([(1, 1, 1, 1)])
    both = np.concatenate([node, nothing])
    criteria = SplitCriteria(reg_lambda=1.0, min_child_weight=0.0, min_samples_leaf=1)
    monkeypatch.setattr(split, "best_candidates", None)
    sparse = split.best_splits(both, np.array([3]), CODEC, criteria)
    monkeypatch.setattr(split, "best_candidates_numpy", None)
    assert sparse == split.best_splits(both, np.array([3]), CODEC, criteria)
    assert (sparse[0].feature, sparse[0].bin, sparse[0].default_left) == (0, 0, True) and not sparse[1].valid
