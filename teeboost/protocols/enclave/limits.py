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

from teeboost.core.constraints import ALL_SETS, PartyConstraints, child_bounds, child_sets
from teeboost.core.split import NodeBest
from teeboost.errors import ProtocolError

__all__ = ["limits_fields", "own_directions", "won_constraints", "scoring_limits", "winner_constraints",
           "party_constraints_of", "PositionPaths", "CheckedLimits", "held_names", "check_holders"]


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
    if constraints is None:
        return {}
    n = len(own_paths)
    if bounds.size == 0 and sets.size == 0:
        raise ProtocolError("a level came without its nodes' bounds and interaction sets, and the run has constraints")
    if bounds.shape != (n, 2) or sets.shape != (n,) or np.any(np.isnan(bounds)) or np.any(bounds[:, 0] > bounds[:, 1]):
        raise ProtocolError("node bounds or interaction sets do not match the level's nodes")
    return {"directions": constraints.directions, "bounds": bounds, "allowed": constraints.allowed(sets, own_paths)}


def held_names(constraints, names_json: str) -> list[str]:
    """The constrained names among a party's column names (what its enclave tells the active one)."""
    try:
        names = json.loads(names_json)
    except ValueError:
        names = None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ProtocolError("a party's column names are not a list of names")
    return sorted(constraints.names() & set(names))


def check_holders(constraints, held: dict[int, list[str]]) -> None:
    """Inside the active enclave: every constrained name is a column of exactly one party, by
    the names the enclaves were given with the columns (a host that renames a column it loads
    into its enclave, or borrows another party's name, is refused here)."""
    owners: dict[str, int] = {}
    for party, names in sorted(held.items()):
        for name in names:
            if name in owners:
                raise ProtocolError(f"parties {owners[name]} and {party} both hold constrained column {name!r}")
            owners[name] = party
    missing = sorted(constraints.names() - set(owners))
    if missing:
        raise ProtocolError(f"no party's enclave holds constrained column(s) {', '.join(missing)}")


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


class CheckedLimits:
    """Inside the active enclave (N-TEE, 1-TEE): the node bounds and interaction sets the
    host's grower names for a level, held to what the tree the enclave chose implies. The root
    is unbounded with every set; a child of a split a passive party won has exactly its
    parent's sets narrowed by the winning column's and the bounds its parent's split gives
    (computed here from the children's totals); a child of the host's own split as a split on
    one of the host's own columns would leave it (``own_classes``: the (direction, sets) of its
    columns, from the names it gave; which of them it split on, it may choose)."""

    def __init__(self, criteria, n_sets: int) -> None:
        self.criteria = criteria
        self.constrained = criteria.constraints != 0
        self.n_sets = n_sets
        self._of: dict[int, tuple[float, float, int]] = {}
        self._parent: dict[int, int] = {}
        self._classes: dict[int, tuple[int, int | None]] = {}  # split node -> (direction, membership or None)
        self.own_classes: set[tuple[int, int]] = set()  # (direction, membership) of the host's own columns

    def split(self, node: int, left: int, right: int) -> None:
        self._parent[left] = self._parent[right] = node

    def note_classes(self, classes: dict[int, tuple[int, int | None]]) -> None:
        """Chosen nodes' winning columns: (direction, membership), None for the host's own."""
        self._classes.update(classes)

    def check_level(self, nodes: list[int], bounds: np.ndarray, sets: np.ndarray, totals, codec) -> None:
        n = len(nodes)
        if not self.constrained:
            if bounds.size or sets.size:
                raise ProtocolError("the active host sent node bounds or interaction sets for a run without constraints")
            return
        if bounds.shape != (n, 2) or sets.shape != (n,):
            raise ProtocolError("the active host sent a level without its nodes' bounds and interaction sets, or "
                                "with them for other nodes (the run has constraints)")
        for i, node in enumerate(nodes):
            given = (float(bounds[i, 0]), float(bounds[i, 1]), int(sets[i]))
            if given not in self._expected(int(node), totals, codec):
                raise ProtocolError(f"the active host named node {int(node)}'s bounds or interaction sets other than "
                                    "the tree implies")
            self._of[int(node)] = given

    def _expected(self, node: int, totals, codec) -> set[tuple[float, float, int]]:
        """The (lower, upper, sets) a node may carry: the root's are fixed; a child's follow
        from its parent's and the winning column's class (any of the host's own, for its splits)."""
        if node == 0:
            return {(-np.inf, np.inf, ALL_SETS)}
        parent = self._parent.get(node)
        if parent is None or parent not in self._of or parent not in self._classes:
            raise ProtocolError(f"node {node} has no split parent this enclave chose")
        lower, upper, parent_sets = self._of[parent]
        direction, membership = self._classes[parent]
        left, right = sorted(k for k, p in self._parent.items() if p == parent)
        weights = [float(self.criteria.weight(float(codec.decode(int(totals(c)[0]))),
                                              float(codec.decode(int(totals(c)[1]))), lower, upper))
                   for c in (left, right)]
        bounds = child_bounds(lower, upper, int(direction), *weights)[0 if node == left else 1]
        classes = {(direction, membership)} if membership is not None else \
            {(d, m) for d, m in self.own_classes if d == direction}
        return {(bounds[0], bounds[1], child_sets(parent_sets, m)) for _, m in classes}
