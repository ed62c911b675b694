"""Monotone and interaction constraints on the wire between hosts and enclaves (N-TEE, 1-TEE,
strict): each level's node bounds and interaction sets going to whoever scores candidates,
and the winning column's public direction and sets coming back to the grower.

The bounds and sets are the active host's grower's (they follow from its gradients, which it
chooses as the label owner); a passive enclave applies its own columns' directions and
membership, resolved inside from the run's bound constraints and its own column names, and
tracks its own columns on each path itself.
"""

from __future__ import annotations

import numpy as np

from teeboost.core.constraints import PartyConstraints, PathColumns
from teeboost.core.split import NodeBest
from teeboost.errors import ProtocolError

__all__ = ["limits_fields", "own_directions", "won_constraints", "scoring_limits", "winner_constraints"]


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


def scoring_limits(constraints: PartyConstraints | None, paths: PathColumns, nodes, bounds: np.ndarray,
                   sets: np.ndarray) -> dict:
    """``best_splits`` keywords for a party's own candidates inside an enclave."""
    if constraints is None or (bounds.size == 0 and sets.size == 0):
        return {}
    n = len(nodes)
    if bounds.shape != (n, 2) or sets.shape != (n,):
        raise ProtocolError("node bounds or interaction sets do not match the level's nodes")
    return {"directions": constraints.directions, "bounds": bounds,
            "allowed": constraints.allowed(sets, paths.of(nodes))}


def winner_constraints(constraints: PartyConstraints | None, bests: list[NodeBest]) -> dict:
    """``Candidates`` fields: each best column's direction and interaction sets."""
    if constraints is None:
        return {}
    return {"directions": np.array([constraints.directions[b.feature] if b.valid else 0 for b in bests], np.int8),
            "memberships": np.array([constraints.membership[b.feature] if b.valid else 0 for b in bests], np.int64)}
