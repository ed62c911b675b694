import numpy as np
import pytest

from teeboost.core.binning import bin_dtype, fit_bins
from teeboost.errors import ConfigError


def test_split_at_bin_equals_raw_threshold_comparison():
    rng = np.random.default_rng(1)
    raw = rng.normal(size=(5000, 3))
    raw[rng.random(raw.shape) < 0.1] = np.nan
    bins = fit_bins(raw, max_bin=16)
    binned = bins.transform(raw)
    for feature in range(3):
        for b in range(bins.cuts[feature].size):
            threshold = bins.threshold(feature, b)
            present = ~np.isnan(raw[:, feature])
            by_bin = binned[present, feature] <= b
            by_value = raw[present, feature] <= threshold
            assert np.array_equal(by_bin, by_value)


def test_missing_values_get_their_own_bin():
    raw = np.array([[1.0], [np.nan], [2.0], [3.0]])
    bins = fit_bins(raw, max_bin=8)
    assert bins.transform(raw)[:, 0].tolist() == [0, 8, 1, 2]
    assert bins.missing_bin == 8


def test_few_distinct_values_each_get_a_bin():
    raw = np.repeat([[0.0], [1.0], [5.0]], [100, 3, 50], axis=0)
    bins = fit_bins(raw, max_bin=32)
    assert bins.cuts[0].tolist() == [0.0, 1.0]  # the rare value 1.0 keeps its own bin
    assert bins.n_value_bins.tolist() == [3]


def test_many_values_use_at_most_max_bin_bins_of_similar_size():
    raw = np.random.default_rng(2).exponential(size=(100_000, 1))
    bins = fit_bins(raw, max_bin=32)
    counts = np.bincount(bins.transform(raw)[:, 0])
    assert bins.n_value_bins[0] <= 32
    assert counts.max() < 2 * counts.min()


def test_all_missing_column_has_no_cut_and_one_value_is_cut_at_itself():
    """One value (plus missing cells) is cut at that value, so "present or missing" can split."""
    raw = np.array([[np.nan, 4.0], [np.nan, 4.0], [np.nan, np.nan]])
    bins = fit_bins(raw, max_bin=4)
    assert bins.n_value_bins.tolist() == [1, 2]
    assert bins.transform(raw)[:, 1].tolist() == [0, 0, bins.missing_bin]


def test_dtype_and_range():
    assert bin_dtype(255) == np.uint8
    assert bin_dtype(256) == np.uint16
    with pytest.raises(ConfigError, match="max_bin=65536"):
        bin_dtype(65536)
    with pytest.raises(ConfigError, match="max_bin=1"):
        fit_bins(np.zeros((2, 1)), 1)


def test_large_max_bin_uses_uint16():
    raw = np.arange(1000, dtype=float)[:, None]
    bins = fit_bins(raw, max_bin=600)
    binned = bins.transform(raw)
    assert binned.dtype == np.uint16
    assert bins.n_value_bins[0] <= 600


@pytest.mark.parametrize("max_bin", [16, 1000], ids=["compare-per-cut", "binary-search"])
def test_bin_of_a_value_is_the_number_of_cuts_below_it(max_bin):
    """Both ways of binning (a comparison per cut for few cuts, a search for many) put a
    value equal to a cut in that cut's bin, infinities at the ends and NaN in the missing bin."""
    rng = np.random.default_rng(2)
    raw = rng.normal(size=(4000, 2))
    bins = fit_bins(raw, max_bin=max_bin)
    cuts = bins.cuts[0]
    probe = np.concatenate([cuts, np.nextafter(cuts, np.inf), [-np.inf, np.inf, np.nan]])
    column = np.column_stack([probe, np.zeros_like(probe)])
    expected = np.searchsorted(cuts, probe, side="left")
    expected[-1] = bins.missing_bin
    assert bins.transform(column)[:, 0].tolist() == expected.tolist()
