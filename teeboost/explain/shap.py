"""Path-dependent TreeSHAP (Lundberg et al. 2018, Algorithm 2) for one party's players.

The explaining party's players are its own features, one each, and every other party as one
grouped player: a split owned by party q tests the player "party q". TreeSHAP stays exact for
such groups, because each split depends on exactly one player.

What it needs per tree: the structure, each node's cover (hessian sum, the "how many
training rows went this way" of the path-dependent expectation), leaf values, and for every
explained row the direction it takes at every split (not only along its own path: the
expectation over absent players walks both sides). Each party computes the directions at its
own splits from its own raw features (:func:`party_directions`); what crosses parties is
described in docs/explain.md.

The algorithm runs over all rows at once: a path's "one fractions" are per-row vectors, its
"zero fractions" (cover ratios) are shared by every row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..core.model import Ensemble
from ..core.tree import OwnerTable, Tree
from ..errors import ConfigError, DataError

if TYPE_CHECKING:
    from ..federation import FederatedModel

__all__ = ["party_directions", "tree_shap", "shap_players", "shap_values"]

Directions = list[dict[int, np.ndarray]]  # per tree: split node -> go-left per explained row


def party_directions(trees: list[Tree], party: int, owner: OwnerTable, raw: np.ndarray) -> Directions:
    """Go-left of every explained row at every split ``party`` owns, from its own raw features."""
    rows = np.arange(raw.shape[0])
    return [{node: owner.go_left(raw, tree.record[node], rows)
             for node in range(tree.n_nodes) if not tree.is_leaf(node) and tree.party[node] == party}
            for tree in trees]


class _Path:
    """The unique path of Algorithm 2: per element its player, zero fraction (scalar), one
    fraction and permutation weight (one value per row)."""

    __slots__ = ("players", "zeros", "ones", "weights")

    def __init__(self, players: list[int], zeros: list[float], ones: list[np.ndarray],
                 weights: list[np.ndarray]) -> None:
        self.players, self.zeros, self.ones, self.weights = players, zeros, ones, weights

    def extended(self, zero: float, one: np.ndarray, player: int) -> "_Path":
        """EXTEND: a copy with one more element, permutation weights updated."""
        depth = len(self.players)
        weights = [w.copy() for w in self.weights]
        weights.append(np.ones_like(one) if depth == 0 else np.zeros_like(one))
        for i in range(depth - 1, -1, -1):
            weights[i + 1] += one * weights[i] * (i + 1) / (depth + 1)
            weights[i] = zero * weights[i] * (depth - i) / (depth + 1)
        return _Path(self.players + [player], self.zeros + [zero], self.ones + [one], weights)

    def unwound(self, index: int) -> "_Path":
        """UNWIND: this path without element ``index`` (a player split on again further down)."""
        depth = len(self.players) - 1
        one, zero = self.ones[index], self.zeros[index]
        hot = one != 0
        safe_one = np.where(hot, one, 1.0)
        weights = [w.copy() for w in self.weights]
        following = weights[depth].copy()
        for i in range(depth - 1, -1, -1):
            previous = weights[i]
            on_hot = following * (depth + 1) / ((i + 1) * safe_one)
            on_cold = previous * (depth + 1) / (zero * (depth - i)) if zero != 0 else np.zeros_like(previous)
            weights[i] = np.where(hot, on_hot, on_cold)
            following = np.where(hot, previous - weights[i] * zero * (depth - i) / (depth + 1), following)
        keep = [k for k in range(depth + 1) if k != index]
        return _Path([self.players[k] for k in keep], [self.zeros[k] for k in keep],
                     [self.ones[k] for k in keep], weights[:depth])

    def unwound_sum(self, index: int) -> np.ndarray:
        """Total permutation weight of the path without element ``index`` (UNWOUND-SUM)."""
        depth = len(self.players) - 1
        one, zero = self.ones[index], self.zeros[index]
        hot = one != 0
        safe_one = np.where(hot, one, 1.0)
        following = self.weights[depth].copy()
        total = np.zeros_like(following)
        for i in range(depth - 1, -1, -1):
            on_hot = following * (depth + 1) / ((i + 1) * safe_one)
            on_cold = (self.weights[i] / zero) * (depth + 1) / (depth - i) if zero != 0 else 0.0
            total += np.where(hot, on_hot, on_cold)
            following = np.where(hot, self.weights[i] - on_hot * zero * (depth - i) / (depth + 1), following)
        return total


def tree_shap(tree: Tree, players: np.ndarray, go_left: dict[int, np.ndarray], n_rows: int,
              n_players: int) -> tuple[np.ndarray, float]:
    """SHAP values (n_rows, n_players) of one tree and its expected value. ``players[node]`` is
    the player a split tests; ``go_left[node]`` each row's direction there."""
    cover = np.asarray(tree.cover, dtype=np.float64)
    phi = np.zeros((n_rows, n_players), dtype=np.float64)
    expected = 0.0

    def recurse(node: int, path: _Path, zero: float, one: np.ndarray, player: int, reach: float) -> None:
        nonlocal expected
        path = path.extended(zero, one, player)
        if tree.is_leaf(node):
            value = tree.value[node]
            expected += reach * value
            for i in range(1, len(path.players)):
                weight = path.unwound_sum(i)
                phi[:, path.players[i]] += weight * (path.ones[i] - path.zeros[i]) * value
            return
        split_player = int(players[node])
        incoming_zero, incoming_one = 1.0, np.ones(n_rows)
        if split_player in path.players:  # split on this player before: undo it and redo it here
            k = path.players.index(split_player)
            incoming_zero, incoming_one = path.zeros[k], path.ones[k]
            path = path.unwound(k)
        left, right = tree.left[node], tree.right[node]
        to_left = go_left[node].astype(np.float64)
        recurse(left, path, cover[left] / cover[node] * incoming_zero, incoming_one * to_left, split_player,
                reach * cover[left] / cover[node])
        recurse(right, path, cover[right] / cover[node] * incoming_zero, incoming_one * (1.0 - to_left),
                split_player, reach * cover[right] / cover[node])

    recurse(0, _Path([], [], [], []), 1.0, np.ones(n_rows), -1, 1.0)
    return phi, expected


def ensemble_shap(ensemble: Ensemble, players: list[np.ndarray], directions: Directions, n_rows: int,
                  n_players: int) -> tuple[np.ndarray, np.ndarray]:
    """(n_rows, n_players, n_outputs) SHAP values and expected margin per output, base margin
    included."""
    values = np.zeros((n_rows, n_players, ensemble.n_outputs), dtype=np.float64)
    expected = np.asarray(ensemble.base_margin, dtype=np.float64).copy()
    for index, (tree, tree_players, go_left) in enumerate(zip(ensemble.trees, players, directions)):
        internal = [n for n in range(tree.n_nodes) if not tree.is_leaf(n)]
        if any(not tree.cover[n] > 0 for n in range(tree.n_nodes)):
            raise DataError(f"tree {index} has a node without cover (hessian sum): TreeSHAP needs every node's "
                            "cover, which this model does not hold")
        missing = [n for n in internal if n not in go_left]
        if missing:
            raise DataError(f"tree {index}: no directions for splits {missing}")
        phi, tree_expected = tree_shap(tree, tree_players, go_left, n_rows, n_players)
        values[:, :, tree.output] += phi
        expected[tree.output] += tree_expected
    return values, expected


def _party_names(model: "FederatedModel") -> dict[int, str]:
    return {0: "active", **{p.index: p.name for p in model.passives}}


def shap_players(model: "FederatedModel", party: int = 0) -> list[str]:
    """Player names for ``party``'s explanation: its own features, then ``party:NAME`` for
    every other party (active first, passives by index)."""
    names = _party_names(model)
    if party not in names:
        raise ConfigError(f"party={party!r} is not a party of this model (parties: {sorted(names)})")
    own = model.active.feature_names if party == 0 else next(p for p in model.passives if p.index == party).feature_names
    return [*own, *(f"party:{names[q]}" for q in sorted(names) if q != party)]


def shap_values(model: "FederatedModel", active_x: np.ndarray, passive_x: list[np.ndarray],
                party: int = 0) -> tuple[np.ndarray, np.ndarray | float]:
    """Party ``party``'s explanation of each row's margin (0: active, i: passive party i).

    Returns SHAP values of shape (n_rows, n_players) — (n_rows, n_players, n_outputs) for
    multiclass — with players as :func:`shap_players` names them, and the expected margin
    (a float; per output for multiclass). Per row and output, values sum to margin minus
    expected value. Strict models are refused: they publish no covers.
    """
    if model.strict:
        raise ConfigError("SHAP values need every node's cover (hessian sum), which a strict model does not publish "
                          "(they are statistics of partitions that strict mode keeps inside the enclaves)")
    player_names = shap_players(model, party)
    if len(passive_x) != len(model.passives):
        raise DataError(f"the model has {len(model.passives)} passive parties, got data for {len(passive_x)}")
    n_rows = active_x.shape[0]
    if any(x.shape[0] != n_rows for x in passive_x):
        raise DataError(f"every party must give the same {n_rows} rows to explain")
    ensemble = model.active.ensemble
    tables = {0: (model.active.owner, active_x)}
    tables.update({p.index: (p.owner, x) for p, x in zip(model.passives, passive_x)})
    directions: Directions = [{} for _ in ensemble.trees]
    for owner_party, (owner, raw) in tables.items():  # each party answers for its own splits
        for merged, found in zip(directions, party_directions(ensemble.trees, owner_party, owner, raw)):
            merged.update(found)
    own_owner = tables[party][0]
    n_own = len(player_names) - (len(tables) - 1)
    group = {q: n_own + i for i, q in enumerate(q for q in sorted(tables) if q != party)}
    players = [np.array([-1 if tree.is_leaf(n) else
                         own_owner.get(tree.record[n]).feature if tree.party[n] == party else group[tree.party[n]]
                         for n in range(tree.n_nodes)]) for tree in ensemble.trees]
    values, expected = ensemble_shap(ensemble, players, directions, n_rows, len(player_names))
    if ensemble.n_outputs == 1:
        return values[:, :, 0], float(expected[0])
    return values, expected
