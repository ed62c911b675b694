"""Stage 1 of the attack: exact meet-in-the-middle subset-sum, peeling, and the sparse EM."""

import itertools
import time

import numpy as np
import pytest

from teeboost.attack.order import Observation, exact_propagation, infer_bins, recovery
from teeboost.attack.subset_sum import INFEASIBLE, SOLVED, UNKNOWN, solve_subset_sum
from teeboost.attack.view import read_view
from teeboost.config import BoostParams
from teeboost.core.binning import fit_bins
from teeboost.federation import train_local


def brute_force(g, h, count, g_sum, h_sum):
    """Rows in every / in no subset of ``count`` rows with these sums; None if there is none."""
    solutions = [set(c) for c in itertools.combinations(range(len(g)), count)
                 if sum(g[list(c)]) == g_sum and sum(h[list(c)]) == h_sum]
    if not solutions:
        return None
    always = np.array([all(i in s for s in solutions) for i in range(len(g))], dtype=bool)
    never = np.array([all(i not in s for s in solutions) for i in range(len(g))], dtype=bool)
    return always, never


def test_solver_matches_brute_force_with_repeated_values():
    rng = np.random.default_rng(7)
    seen = {SOLVED: 0, INFEASIBLE: 0}
    for trial in range(400):
        n = int(rng.integers(1, 11))
        palette = rng.integers(-4, 5, size=(int(rng.integers(1, 6)), 2)) * np.array([1000, 7])
        g, h = palette[rng.integers(0, len(palette), size=n)].T
        count = int(rng.integers(0, n + 1))
        planted = rng.choice(n, size=count, replace=False)
        g_sum, h_sum = int(g[planted].sum()), int(h[planted].sum())
        if trial % 5 == 0:
            g_sum += 1000  # sometimes no subset fits
        expected = brute_force(g, h, count, g_sum, h_sum)
        answer = solve_subset_sum(g, h, count, g_sum, h_sum)
        if expected is None:
            assert answer.status == INFEASIBLE, trial
        else:
            assert answer.status == SOLVED, trial
            assert np.array_equal(answer.always(), expected[0]), trial
            assert np.array_equal(answer.never(), expected[1]), trial
            # a group with a fixed count is fixed in every brute-force solution too
            for j in np.flatnonzero(answer.fixed()):
                members = np.flatnonzero(answer.group == j)
                counts = {len(set(c) & set(members.tolist())) for c in itertools.combinations(range(n), count)
                          if sum(g[list(c)]) == g_sum and sum(h[list(c)]) == h_sum}
                assert counts == {int(answer.low[j])}, trial
        seen[answer.status] += 1
    assert seen[SOLVED] > 100 and seen[INFEASIBLE] > 20


def test_solver_counts_solutions_up_to_exchangeable_rows():
    g = np.array([5, 5, 5, 3, 3, 8])
    h = np.ones(6, dtype=np.int64)
    answer = solve_subset_sum(g, h, 2, 8, 2)  # {5, 3}: 3 x 2 row pairs, but one count vector
    assert answer.solved and answer.n_solutions == 1
    assert answer.fixed().all() and not answer.always().any()
    assert answer.never().tolist() == [False] * 5 + [True]  # the 8 needs a 0 partner


@pytest.mark.serial
def test_solver_finds_a_unique_subset_of_34_distinct_rows_quickly():
    rng = np.random.default_rng(3)
    g = rng.integers(-(10 ** 11), 10 ** 11, size=34)
    h = rng.integers(1, 10 ** 11, size=34)
    planted = rng.choice(34, size=17, replace=False)
    started = time.perf_counter()
    answer = solve_subset_sum(g, h, 17, int(g[planted].sum()), int(h[planted].sum()))
    assert time.perf_counter() - started < 5.0
    assert answer.solved and answer.n_solutions == 1
    truth = np.zeros(34, dtype=bool)
    truth[planted] = True
    assert np.array_equal(answer.always(), truth) and np.array_equal(answer.never(), ~truth)


@pytest.mark.serial
def test_solver_gives_up_cleanly_above_its_work_limit():
    rng = np.random.default_rng(4)
    g = rng.integers(1, 10 ** 9, size=40)
    h = rng.integers(1, 10 ** 9, size=40)
    started = time.perf_counter()
    answer = solve_subset_sum(g, h, 20, int(g[:20].sum()), int(h[:20].sum()), max_half=1000)
    assert time.perf_counter() - started < 1.0
    assert answer.status == UNKNOWN and answer.n_solutions == -1
    assert not answer.always().any() and not answer.never().any() and not answer.fixed().any()
    assert (answer.low == 0).all() and (answer.high == 1).all()  # only the trivial bounds


def test_two_valued_gradients_give_label_conditional_bin_counts():
    """First tree of a binary task: g = p - y takes two values, h one. Per bin, the (count, sum g)
    pair names how many rows of each label are in it, though not which."""
    p = 1_000_003
    labels = np.array([0] * 30 + [1] * 12)
    g = np.where(labels == 1, p - 10_000_000, p)
    h = np.full(labels.size, 77)
    in_bin = np.r_[np.arange(0, 30, 3), np.arange(30, 42, 4)]  # 10 negatives, 3 positives
    answer = solve_subset_sum(g, h, in_bin.size, int(g[in_bin].sum()), int(h[in_bin].sum()))
    assert answer.solved and answer.fixed().all()
    per_label = {int(v): int(k) for v, k in zip(answer.values[:, 0], answer.low)}
    assert per_label == {p: 10, p - 10_000_000: 3}
    assert not answer.always().any() and not answer.never().any()
    # through the propagation they become exact derived constraints, one per label
    allowed = np.ones((labels.size, 2), dtype=bool)
    bins = np.zeros(labels.size, dtype=np.int64)
    bins[np.setdiff1d(np.arange(labels.size), in_bin)] = 1
    exact = exact_propagation(allowed, [observation(np.arange(labels.size), g, h, bins, 2)])
    assert exact.derived == 2 and (exact.pinned == -1).all()


def observation(rows, g, h, bins, width):
    """Exact per-bin sums of rows with these true bins, as a histogram would show them."""
    rows = np.asarray(rows)
    sums = np.zeros((width, 3), dtype=np.int64)
    np.add.at(sums, (bins[rows], 0), g)
    np.add.at(sums, (bins[rows], 1), h)
    np.add.at(sums, (bins[rows], 2), 1)
    return Observation(rows, g, h, sums)


def test_peeling_solves_a_node_that_is_ambiguous_alone():
    bins = np.array([0, 1, 1, 0, 1])
    # node A (one tree): bin 0 holds {0, 3}, g = 1 + 4 = 5, but {1, 2} = 2 + 3 fits as well
    node_a = observation([0, 1, 2, 3], np.array([1, 2, 3, 4]), np.ones(4, dtype=np.int64), bins, 2)
    # node B (another tree, its own gradients): its bin 0 names row 0
    node_b = observation([0, 4], np.array([10, 20]), np.ones(2, dtype=np.int64), bins, 2)
    alone = np.ones((5, 2), dtype=bool)
    assert (exact_propagation(alone, [node_a]).pinned[:4] == -1).all()
    allowed = np.ones((5, 2), dtype=bool)
    exact = exact_propagation(allowed, [node_a, node_b])
    # row 0 pinned by B, peeled off A: bin 0 of A then needs one row of g = 4
    assert exact.pinned.tolist() == bins.tolist()


def test_inconsistent_sums_are_refused():
    bins = np.array([0, 1])
    node = observation([0, 1], np.array([3, 5]), np.ones(2, dtype=np.int64), bins, 2)
    node.sums[0, 0] += 1
    with pytest.raises(ValueError, match="inconsistent"):
        exact_propagation(np.ones((2, 2), dtype=bool), [node])


def test_plain_transcript_pins_no_row_wrongly(tmp_path, small_credit):
    active, passives = small_credit
    rows = np.arange(1200)
    active, passives = active.take(rows), [p.take(rows) for p in passives]
    params = BoostParams(n_trees=6, max_depth=4, subsample=0.8, max_bin=32)
    path = tmp_path / "run.tbt"
    train_local(active, passives, params, transcript=path)
    view = read_view(path)
    true_bins = fit_bins(passives[0].features, 32).transform(passives[0].features).astype(int)
    for feature in (0, 1):
        posterior = infer_bins(view, party=1, feature=feature)
        truth = true_bins[:, feature]
        guess = posterior.probabilities.argmax(axis=1)
        assert posterior.pinned > 0 and posterior.pinned == posterior.pinned_rows.sum()
        assert (guess[posterior.pinned_rows] == truth[posterior.pinned_rows]).all()  # zero errors
        assert (guess[posterior.determined()] == truth[posterior.determined()]).all()
        assert (posterior.probabilities[np.arange(truth.size), truth] > 0).all()  # truth never excluded
        assert np.allclose(posterior.probabilities.sum(axis=1), 1.0)
        assert posterior.derived_constraints > 0  # label-conditional counts of the first tree, at least
        assert 0 < posterior.iterations <= 300
        stats = recovery(posterior, truth, passives[0].features[:, feature])
        assert stats["exact_share"] == pytest.approx(posterior.pinned / truth.size)
        assert stats["spearman"] > 0.5
