"""TreeSHAP per party: exact Shapley values of the path-dependent game (grouped players
included), summing to the federated margin, and XGBoost's pred_contribs when one party holds
every feature."""

import itertools
from math import factorial

import numpy as np
import pytest

from teeboost.core.tree import Tree
from teeboost.errors import ConfigError
from teeboost.explain import shap_players, shap_values
from teeboost.explain.shap import party_directions, tree_shap
from teeboost.export import export_xgboost

from . import trained_models as tm


def random_tree(rng, depth: int, n_players: int) -> tuple[Tree, np.ndarray]:
    tree = Tree()
    frontier = [0]
    for _ in range(depth):
        nxt = []
        for node in frontier:
            if rng.random() < 0.85:
                nxt += tree.add_split(node, 0, 0, 1.0)
        frontier = nxt
    players = np.array([-1 if tree.is_leaf(n) else rng.integers(n_players) for n in range(tree.n_nodes)])
    cover = [0.0] * tree.n_nodes
    for node in reversed(range(tree.n_nodes)):  # children have larger ids
        cover[node] = rng.uniform(0.5, 5.0) if tree.is_leaf(node) else cover[tree.left[node]] + cover[tree.right[node]]
    tree.cover = cover
    tree.value = [float(rng.normal()) if tree.is_leaf(n) else 0.0 for n in range(tree.n_nodes)]
    return tree, players


def brute_force_shapley(tree: Tree, players: np.ndarray, go_left: dict, row: int, n_players: int) -> np.ndarray:
    """Shapley values of v(S) = the path-dependent expectation with players S known."""

    def value(node: int, known: frozenset) -> float:
        if tree.is_leaf(node):
            return tree.value[node]
        left, right = tree.left[node], tree.right[node]
        if players[node] in known:
            return value(left if go_left[node][row] else right, known)
        return (tree.cover[left] * value(left, known) + tree.cover[right] * value(right, known)) / tree.cover[node]

    phi = np.zeros(n_players)
    for i in range(n_players):
        others = [p for p in range(n_players) if p != i]
        for size in range(n_players):
            for subset in itertools.combinations(others, size):
                weight = factorial(size) * factorial(n_players - size - 1) / factorial(n_players)
                phi[i] += weight * (value(0, frozenset(subset) | {i}) - value(0, frozenset(subset)))
    return phi


@pytest.mark.parametrize("seed", range(6))
def test_tree_shap_equals_brute_force_shapley_with_repeated_players(seed):
    rng = np.random.default_rng(seed)
    n_players, n_rows = 4, 7
    tree, players = random_tree(rng, depth=5, n_players=n_players)
    go_left = {n: rng.random(n_rows) < 0.5 for n in range(tree.n_nodes) if not tree.is_leaf(n)}
    phi, expected = tree_shap(tree, players, go_left, n_rows, n_players)
    for row in range(n_rows):
        assert np.allclose(phi[row], brute_force_shapley(tree, players, go_left, row, n_players), atol=1e-12)
    leaves = [n for n in range(tree.n_nodes) if tree.is_leaf(n)]
    assert np.isclose(expected, sum(tree.value[n] * tree.cover[n] for n in leaves) / tree.cover[0])


CASES = {"binary": tm.credit_binary, "three-parties": tm.credit_two_passives, "regression": tm.credit_regression,
         "multiclass": tm.credit_multiclass, "poisson": tm.credit_poisson, "categorical": tm.diamonds_categorical}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_values_plus_expected_value_sum_to_the_federated_margin_for_every_explainer(case):
    trained = case()
    model = trained.model
    rows = slice(0, 400)
    active_x, passive_x = trained.active_x[rows], [x[rows] for x in trained.passive_x]
    margin, _ = model.predict_margin(active_x, passive_x)
    for party in range(len(model.passives) + 1):
        values, expected = shap_values(model, active_x, passive_x, party)
        players = shap_players(model, party)
        assert values.shape[:2] == (400, len(players))
        total = values.sum(axis=1) + expected
        assert np.abs(total - (margin if values.ndim == 3 else margin[:, 0])).max() <= 1e-6


def test_players_are_own_features_then_each_other_party_as_one():
    model = tm.credit_two_passives().model
    names = [p.name for p in model.passives]
    assert shap_players(model, 0) == [*model.active.feature_names, *(f"party:{n}" for n in names)]
    assert shap_players(model, 2) == [*model.passives[1].feature_names, "party:active", f"party:{names[0]}"]
    with pytest.raises(ConfigError, match="party=5"):
        shap_players(model, 5)


def test_the_other_party_as_one_player_gets_its_share():
    trained = tm.credit_binary()
    model = trained.model
    values, _ = shap_values(model, trained.active_x[:50], [x[:50] for x in trained.passive_x], 0)
    uses_passive = any(t.party[n] == 1 for t in model.active.ensemble.trees for n in range(t.n_nodes))
    assert uses_passive and np.abs(values[:, -1]).max() > 0


@pytest.mark.parametrize("case", [tm.credit_one_party, tm.credit_one_party_multiclass], ids=["binary", "multiclass"])
def test_one_party_holding_every_feature_gets_xgboost_pred_contribs(case):
    trained = case()
    booster = tm.load_booster(export_xgboost(trained.model))
    rows = slice(0, 500)
    contribs = booster.predict(tm.joined_matrix(booster, trained.joined_x[rows]),
                               pred_contribs=True).astype(np.float64)
    values, expected = shap_values(trained.model, trained.active_x[rows], [], 0)
    if values.ndim == 3:  # XGBoost: (rows, classes, features + bias)
        contribs = np.moveaxis(contribs, 1, 2)
    assert np.abs(values - contribs[:, :-1]).max() <= 1e-5
    assert np.abs(expected - contribs[:, -1]).max() <= 1e-5


def test_each_party_answers_directions_only_for_its_own_splits():
    trained = tm.credit_binary()
    model = trained.model
    trees = model.active.ensemble.trees
    found = party_directions(trees, 1, model.passives[0].owner, trained.passive_x[0][:10])
    for tree, nodes in zip(trees, found):
        assert set(nodes) == {n for n in range(tree.n_nodes) if not tree.is_leaf(n) and tree.party[n] == 1}
        assert all(v.shape == (10,) for v in nodes.values())


def test_strict_models_are_refused_for_want_of_covers():
    trained = tm.credit_strict()
    with pytest.raises(ConfigError, match="strict model does not publish"):
        shap_values(trained.model, trained.active_x[:5], [x[:5] for x in trained.passive_x])
