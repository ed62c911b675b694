"""The partition attack: anonymous passive cuts -> features -> row orders, on known answers."""

import numpy as np
import pytest

from teeboost.attack.attribution import PublicFeature, largest_atom
from teeboost.attack.cuts import cluster_cuts, cut_set
from teeboost.attack.infer import infer_orders
from teeboost.attack.ranking import rank_rows
from teeboost.attack.view import ActiveView, PassiveSplit, read_view
from teeboost.config import BoostParams, ProtocolOptions
from teeboost.core.binning import fit_bins
from teeboost.federation import train_local
from teeboost.metrics import spearman


def synthetic_cuts(values: np.ndarray, n_cuts: int, rng, *, default_left=None) -> list[PassiveSplit]:
    """Cuts "x <= t" on random nodes (random halves of the rows), as the active party sees them:
    left and right rows only. Missing values follow a random default side per cut."""
    n_rows, n_features = values.shape
    splits, features = [], []
    c = 0
    while len(splits) < n_cuts:
        feature = c % n_features
        c += 1
        node = np.sort(rng.choice(n_rows, size=n_rows // 2, replace=False))
        x = values[node, feature]
        present = x[~np.isnan(x)]
        threshold = np.quantile(present, rng.uniform(0.1, 0.9))
        left_default = rng.random() < 0.5 if default_left is None else default_left
        go_left = np.where(np.isnan(x), left_default, x <= threshold)
        if go_left.all() or not go_left.any():
            continue  # a split always has rows on both sides
        splits.append(PassiveSplit(0, 1, c, node[go_left], node[~go_left], -1, -1, None))
        features.append(feature)
    return splits, np.array(features)


def test_cuts_on_independent_features_fall_into_one_group_each():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(2000, 3))
    splits, features = synthetic_cuts(values, 90, rng)
    cuts = cut_set(splits, 1, 2000)
    groups = cluster_cuts(cuts)
    assert len(groups) == 3
    for group in groups:
        assert len(set(features[cuts.index[group]])) == 1  # one feature per group


def test_ranking_recovers_the_order_and_the_missing_rows():
    rng = np.random.default_rng(1)
    x = rng.gamma(2.0, 1000.0, size=3000)
    missing = rng.random(3000) < 0.2
    x[missing] = np.nan
    splits, _ = synthetic_cuts(x[:, None], 120, rng)
    ranking = rank_rows(cut_set(splits, 1, 3000))
    assert np.array_equal(ranking.missing, missing)  # flagged exactly the rows without a value
    present = ~missing
    assert spearman(ranking.scores[present], x[present]) > 0.99


def test_ranking_without_missing_values_flags_none_and_ties_equal_values():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 6, size=2000).astype(float)  # six values: cuts can only separate them
    ranking = rank_rows(cut_set(synthetic_cuts(x[:, None], 60, rng)[0], 1, 2000))
    assert not ranking.missing.any()
    assert ranking.n_levels == 5
    pinned = ranking.interval[:, 0] == ranking.interval[:, 1]
    assert pinned.mean() > 0.8
    assert np.array_equal(ranking.interval[pinned, 0], x[pinned].astype(int))  # each value its own interval
    bins = ranking.exact_bins(6)
    assert np.array_equal(bins[pinned], x[pinned].astype(int)) and (bins[~pinned] == -1).all()


def test_columns_are_told_apart_from_public_knowledge_alone():
    """Three anonymous columns: a many-valued one, one with 20% missing values (its cuts split
    into two groups by default side until the missing rows are found), and one whose most
    common value holds over half the rows. Stage 1 names each from public traits."""
    rng = np.random.default_rng(3)
    n = 3000
    income = rng.gamma(2.0, 1000.0, size=n)
    income[rng.random(n) < 0.2] = np.nan
    dependents = np.minimum(rng.poisson(0.6, size=n), 5).astype(float)
    age = rng.normal(50, 12, size=n).round()
    values = np.stack([age, income, dependents], axis=1)
    splits, _ = synthetic_cuts(values, 150, rng)
    bins = fit_bins(values, 32).n_value_bins
    view = ActiveView("ntee", n, 32, {1: bins})
    view.splits = splits
    public_rng = np.random.default_rng(4)
    public = [PublicFeature.from_sample(name, values[:, j], int(bins[j]), rng=public_rng)
              for j, name in enumerate(["age", "income", "dependents"])]
    assert largest_atom(public[2]) >= 0.5 and largest_atom(public[0]) == 0
    orders = infer_orders(view, 1, public, [0, 1, 2])
    for j in range(3):
        present = ~np.isnan(values[:, j])
        assert orders[j].source == "grouped cuts"
        assert spearman(orders[j].scores[present & ~orders[j].missing], values[present & ~orders[j].missing, j]) > 0.9
    assert np.array_equal(orders[1].missing, np.isnan(income))  # the missing rows, found
    assert not orders[0].missing.any()


@pytest.mark.parametrize("protocol", ["ntee", "onetee"])
def test_tee_transcripts_leak_the_order_of_a_passive_column(tmp_path, small_credit, protocol):
    """The paper's designs reveal every passive split's left set: the attack rebuilds age from
    them (the residual leakage docs/attack.md reports at full size)."""
    active, passives = small_credit
    path = tmp_path / "run.tbt"
    train_local(active, passives, BoostParams(n_trees=30, max_depth=5, subsample=0.8, max_bin=32), protocol, transcript=path,
                options=ProtocolOptions(allow_simulated_tee=True))
    view = read_view(path)
    assert not view.histograms and all(s.feature == -1 for s in view.splits)
    assert sum(s.routed for s in view.splits) > 0  # routing answers joined the cuts
    columns = passives[0].features
    rng = np.random.default_rng(0)
    public = [PublicFeature.from_sample(name, columns[:, j], int(view.n_value_bins[1][j]), rng=rng)
              for j, name in enumerate(passives[0].feature_names)]
    order = infer_orders(view, 1, public, [0])[0]  # age
    assert order.source == "grouped cuts"
    assert spearman(order.scores, columns[:, 0]) > 0.9


def test_a_few_known_values_name_groups_public_traits_cannot_tell_apart():
    """Two columns with the same public distribution: blind naming is a coin toss; knowing 1%
    of one column's values (--known-values) names its group."""
    rng = np.random.default_rng(5)
    n = 3000
    values = rng.normal(40, 10, size=(n, 2)).round()
    splits, features = synthetic_cuts(values, 120, rng)
    bins = fit_bins(values, 32).n_value_bins
    view = ActiveView("ntee", n, 32, {1: bins})
    view.splits = splits
    public = [PublicFeature.from_sample(name, values[:, j], int(bins[j]), rng=rng) for j, name in enumerate("ab")]
    known_rows = np.sort(rng.choice(n, size=30, replace=False))
    for feature in (0, 1):
        order = infer_orders(view, 1, public, [feature], {feature: (known_rows, values[known_rows, feature])})
        assert spearman(order[feature].scores, values[:, feature]) > 0.95
