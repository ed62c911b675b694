"""Monotone and interaction constraints on the wire between hosts and enclaves (N-TEE, 1-TEE,
strict): each level's node bounds and interaction sets going to whoever scores candidates,
and the winning column's public direction and sets coming back to the grower.

The bounds and sets are the active host's grower's (they follow from its gradients, which it
chooses as the label owner); a passive enclave applies its own columns' directions and
membership, resolved inside from the run's bound constraints and its own column names, and
tracks its own columns on each path itself.
"""

from __future__ import annotations

import json

import numpy as np

from teeboost.core.constraints import PartyConstraints
from teeboost.core.split import NodeBest
from teeboost.errors import ProtocolError

__all__ = ["limits_fields", "own_directions", "won_constraints", "scoring_limits", "winner_constraints",
           "party_constraints_of", "PositionPaths"]


def limits_fields(limits, nodes) -> dict:
    """Message fields (``bounds``, ``sets``) of a level's nodes; {} without constraints."""
    if limits is None:
        return {}
    return {"bounds": limits.bounds_of(nodes), "sets": limits.sets_of(nodes)}


def own_directions(own: list[NodeBest], limits: dict) -> np.ndarray:
    """The monotone direction of each node's own best column (empty without monotone constraints)."""
    directions = limits.get("directions")
    if directions is None:
        return np.zeros(0, dtype=np.int8)
    return np.array([directions[b.feature] if b.valid else 0 for b in own], dtype=np.int8)


def won_constraints(nodes, chosen) -> dict[int, tuple[int, int]]:
    """node -> (direction, membership) of a passive winner's column, as its enclave reported them."""
    if chosen.directions.size == 0:
        return {}
    if chosen.directions.size != len(nodes) or chosen.memberships.size != len(nodes):
        raise ProtocolError("the enclave's verdict names constraints for another level")
    return {int(n): (int(chosen.directions[i]), int(chosen.memberships[i])) for i, n in enumerate(nodes)}


def scoring_limits(constraints: PartyConstraints | None, own_paths: list, bounds: np.ndarray,
                   sets: np.ndarray) -> dict:
    """``best_splits`` keywords for a party's own candidates inside an enclave: per node (or
    strict position) its bounds, interaction sets and this party's own columns on its path."""
    if constraints is None or (bounds.size == 0 and sets.size == 0):
        return {}
    n = len(own_paths)
    if bounds.shape != (n, 2) or sets.shape != (n,) or np.any(np.isnan(bounds)) or np.any(bounds[:, 0] > bounds[:, 1]):
        raise ProtocolError("node bounds or interaction sets do not match the level's nodes")
    return {"directions": constraints.directions, "bounds": bounds, "allowed": constraints.allowed(sets, own_paths)}


def party_constraints_of(constraints, names_json: str, n_features: int) -> PartyConstraints | None:
    """A party's columns under the run's bound constraints, from the names its host gave with
    its columns (None without constraints)."""
    try:
        names = json.loads(names_json)
    except ValueError:
        names = None
    if not isinstance(names, list) or len(names) != n_features or not all(isinstance(n, str) for n in names):
        raise ProtocolError("the columns' names do not match the columns")
    return constraints.for_party(names) if constraints.any else None


class PositionPaths:
    """Strict mode: this party's own columns on the path of every position of the level
    being grown (positions are heap indices: position k's children are 2k and 2k + 1)."""

    def __init__(self) -> None:
        self.paths: list[frozenset[int]] = [frozenset()]

    def reset(self) -> None:
        self.paths = [frozenset()]

    def descend(self, won: np.ndarray, features: np.ndarray) -> None:
        """The next level's paths: a position this party split adds its column."""
        following = []
        for k, path in enumerate(self.paths):
            if won[k]:
                path = path | {int(features[k])}
            following += [path, path]
        self.paths = following


def winner_constraints(constraints: PartyConstraints | None, bests: list[NodeBest]) -> dict:
    """``Candidates`` fields: each best column's direction and interaction sets."""
    if constraints is None:
        return {}
    return {"directions": np.array([constraints.directions[b.feature] if b.valid else 0 for b in bests], np.int8),
            "memberships": np.array([constraints.membership[b.feature] if b.valid else 0 for b in bests], np.int64)}
