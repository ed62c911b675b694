import numpy as np
import pytest

from teeboost.core.gradients import SUM_BITS, EncodedGradients, GradientCodec
from teeboost.errors import DataError


def test_sums_over_all_rows_stay_exact_and_below_the_bound():
    rng = np.random.default_rng(0)
    n = 200_000
    g = rng.uniform(-1, 1, n)
    g[:1000] = 1.0  # worst case: many rows at the maximum
    h = rng.uniform(0, 0.25, n)
    enc = EncodedGradients.encode(g, h, np.arange(n), n)
    total = int(np.abs(enc.g).sum())
    assert total < 2**SUM_BITS
    # float64 accumulation is exact below 2**53
    assert int(np.abs(enc.g).astype(np.float64).sum()) == total
    assert abs(enc.codec.decode(enc.g.sum()) - g.sum()) < n * 2.0 ** -enc.codec.frac_bits


def test_known_answer_encoding():
    codec = GradientCodec(10)
    assert codec.encode(np.array([0.5, -0.25, 1 / 3])).tolist() == [512, -256, 341]
    assert codec.decode(np.array([512, -256])).tolist() == [0.5, -0.25]


def test_precision_grows_for_small_trees():
    g = np.ones(100)
    assert GradientCodec.for_values(g, g, 100).frac_bits > GradientCodec.for_values(g, g, 10**6).frac_bits


def test_gradients_too_large_are_refused_with_advice():
    g = np.full(10, 1e15)
    with pytest.raises(DataError, match="scale the label"):
        GradientCodec.for_values(g, np.ones(10), 10**6)


def test_rows_outside_the_sample_carry_zero():
    g = np.arange(5, dtype=float)
    enc = EncodedGradients.encode(g, np.ones(5), np.array([1, 3]), 5)
    assert enc.g[[0, 2, 4]].tolist() == [0, 0, 0]
    assert enc.g[1] > 0
