"""Monotone and interaction constraints, XGBoost's ``monotone_constraints`` and
``interaction_constraints``, as public parameters of a run.

A run's constraints name columns (``RunConstraints``, canonical and JSON-able, so they travel
in the run's parameters and every enclave binds their digest with the other split criteria).
Each party resolves the names it holds into ``PartyConstraints``: a direction and the mask of
interaction sets holding each of its columns. Every site that scores a party's candidates
applies them the same way (``teeboost.core.split``), so every protocol grows plain's trees.

Monotone, as XGBoost's TreeEvaluator: a node carries bounds on its weight, unbounded at the
root; a candidate's child weights are clipped to the node's bounds; a split on a constrained
column is a candidate only if its child weights go the declared way; with any column
constrained every gain is computed from the clipped weights (XGBoost's switch to
``CalcGainGivenWeight``); and the children of a split on a constrained column are bounded at
the mean of their two weights (``child_bounds``).

Interaction, as XGBoost's FeatureInteractionConstraintHost: at the root every column is
allowed; below it, every column of each set that holds all the columns on the path, and the
path's own columns. A node's state is the mask of sets that still hold its whole path
(``ALL_SETS`` at the root); when no set does, only the path's own columns are allowed, and
each party knows which of its own columns those are (``PathColumns``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import numpy as np

__all__ = ["RunConstraints", "PartyConstraints", "PathColumns", "ALL_SETS", "MAX_INTERACTION_SETS",
           "child_bounds", "child_sets", "parse_monotone", "parse_interactions"]

#: The interaction state of a root: no column on the path yet, so every column is allowed.
ALL_SETS = -1

#: Interaction sets travel as bits of an int64 mask.
MAX_INTERACTION_SETS = 62


def parse_monotone(value, feature_names: list[str] | None = None, where: str = "monotone_constraints") -> dict[str, int]:
    """XGBoost's forms -> {column: -1 or 1}: a dict by name, a tuple or list in column order
    (``feature_names``: every party's columns, active party's first), or a string
    ``"(1,0,-1)"`` / ``"age:1,MonthlyIncome:-1"``. Zeros are dropped."""
    if value is None:
        return {}
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("(") or text.startswith("["):
            value = [int(v) for v in text.strip("()[]").split(",") if v.strip()]
        elif text:
            pairs = {}
            for item in text.split(","):
                name, sep, direction = item.rpartition(":")
                if not sep or not name.strip():
                    raise ValueError(f"{where}: {item.strip()!r} must be column:direction (e.g. age:1)")
                pairs[name.strip()] = direction.strip()
            value = pairs
        else:
            return {}
    if isinstance(value, dict):
        items = list(value.items())
    else:
        values = list(value)
        if feature_names is None:
            raise ValueError(f"{where} in column order needs the columns' names; give a dict of column: direction")
        if len(values) != len(feature_names):
            raise ValueError(f"{where} gives {len(values)} directions for {len(feature_names)} columns "
                             f"({', '.join(feature_names)})")
        items = list(zip(feature_names, values))
    out = {}
    for name, direction in items:
        try:
            number = int(direction)
        except (TypeError, ValueError):
            number = None
        if number not in (-1, 0, 1) or isinstance(direction, bool) or (isinstance(direction, float)
                                                                         and direction != number):
            raise ValueError(f"{where}: column {name!r} has direction {direction!r}; it must be -1, 0 or 1")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}: {name!r} is not a column name")
        if number:
            out[name] = number
    return dict(sorted(out.items()))


def parse_interactions(value, feature_names: list[str] | None = None,
                       where: str = "interaction_constraints") -> tuple[tuple[str, ...], ...]:
    """XGBoost's forms -> sets of column names: a list of lists of names (or of column
    indices, with ``feature_names``), or that list as a JSON string. Each set is sorted; the
    sets keep their order."""
    if value is None:
        return ()
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return ()
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise ValueError(f"{where} = {value!r} must be a list of lists of column names, e.g. "
                             '[["age", "MonthlyIncome"], ["DebtRatio"]]') from None
    if not isinstance(value, (list, tuple)) or not all(isinstance(s, (list, tuple)) for s in value):
        raise ValueError(f"{where} must be a list of lists of column names, not {value!r}")
    if len(value) > MAX_INTERACTION_SETS:
        raise ValueError(f"{where} has {len(value)} sets; at most {MAX_INTERACTION_SETS} are supported")
    sets = []
    for members in value:
        names = []
        for member in members:
            if isinstance(member, (int, np.integer)) and not isinstance(member, bool):
                if feature_names is None or not 0 <= int(member) < len(feature_names):
                    raise ValueError(f"{where}: column index {member} is not one of the "
                                     f"{0 if feature_names is None else len(feature_names)} columns")
                member = feature_names[int(member)]
            if not isinstance(member, str) or not member:
                raise ValueError(f"{where}: {member!r} is not a column name")
            names.append(member)
        if not names:
            raise ValueError(f"{where}: an interaction set is empty")
        sets.append(tuple(sorted(set(names))))
    return tuple(sets)


@dataclass(frozen=True)
class RunConstraints:
    """A run's constraints by column name (names are distinct across parties)."""

    monotone: dict[str, int] = field(default_factory=dict)
    interaction: tuple[tuple[str, ...], ...] = ()

    @classmethod
    def of(cls, monotone=None, interaction=None, feature_names: list[str] | None = None) -> "RunConstraints":
        return cls(parse_monotone(monotone, feature_names), parse_interactions(interaction, feature_names))

    @property
    def has_monotone(self) -> bool:
        return bool(self.monotone)

    @property
    def any(self) -> bool:
        return bool(self.monotone or self.interaction)

    def names(self) -> set[str]:
        return set(self.monotone) | {n for s in self.interaction for n in s}

    def encode(self) -> bytes:
        """Canonical bytes: what the digest covers and enclaves are given."""
        return json.dumps({"monotone": self.monotone, "interaction": [list(s) for s in self.interaction]},
                          sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> "RunConstraints":
        if not data:
            return cls()
        try:
            raw = json.loads(bytes(data).decode())
            return cls(parse_monotone(raw["monotone"]), parse_interactions(raw["interaction"]))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise ValueError(f"unreadable constraints: {exc}") from None

    def digest(self) -> int:
        """63 bits of the SHA-256 of ``encode()`` (0: no constraint), bound with the split criteria."""
        if not self.any:
            return 0
        return int.from_bytes(hashlib.sha256(self.encode()).digest()[:8], "big") >> 1 or 1

    def for_party(self, feature_names: list[str]) -> "PartyConstraints":
        names = list(feature_names)
        directions = np.array([self.monotone.get(n, 0) for n in names], dtype=np.int8)
        membership = np.zeros(len(names), dtype=np.int64)
        for index, members in enumerate(self.interaction):
            for j, name in enumerate(names):
                if name in members:
                    membership[j] |= np.int64(1) << np.int64(index)
        return PartyConstraints(directions, membership, self.has_monotone, bool(self.interaction))

    def check_held(self, held: set[str], where: str = "the run") -> None:
        """Every constrained name must be a column some party holds."""
        unknown = sorted(self.names() - set(held))
        if unknown:
            raise ValueError(f"constraints of {where} name column(s) no party holds: {', '.join(unknown)}")


@dataclass(frozen=True)
class PartyConstraints:
    """One party's columns under a run's constraints."""

    directions: np.ndarray  # int8 per column: -1, 0, 1
    membership: np.ndarray  # int64 per column: mask of the interaction sets holding it
    monotone: bool = False  # any column of any party constrained: every gain from clipped weights
    interaction: bool = False

    def allowed(self, sets: np.ndarray, own_paths: list[frozenset[int]]) -> np.ndarray | None:
        """bool (nodes, columns): the columns each node may split on, from its interaction
        state (``sets`` per node) and this party's columns on its path; None: all."""
        if not self.interaction:
            return None
        sets = np.asarray(sets, dtype=np.int64)
        out = (self.membership[None, :] & sets[:, None]) != 0
        for i, path in enumerate(own_paths):
            if sets[i] == ALL_SETS:
                out[i] = True
            elif path:
                out[i, sorted(path)] = True
        return out


def child_sets(sets: int, membership: int) -> int:
    """A child's interaction state after its parent split on a column held by the sets in
    ``membership``: the parent's sets that also hold that column."""
    return int(sets) & int(membership)


def child_bounds(lower: float, upper: float, direction: int, w_left: float, w_right: float
                 ) -> tuple[tuple[float, float], tuple[float, float]]:
    """((lower, upper) of the left child, of the right child): the parent's, cut at the mean
    of the children's weights on the declared side when the split column is constrained."""
    if direction == 0:
        return (lower, upper), (lower, upper)
    mid = (w_left + w_right) / 2.0
    if direction > 0:
        return (lower, mid), (mid, upper)
    return (mid, upper), (lower, mid)


class PathColumns:
    """This party's own columns on each node's path (what interaction constraints allow when
    no set holds the whole path). Other parties' splits add nothing here."""

    def __init__(self) -> None:
        self._of: dict[int, frozenset[int]] = {}

    def reset(self) -> None:
        self._of.clear()

    def split(self, node: int, left: int, right: int, feature: int = -1) -> None:
        path = self._of.get(int(node), frozenset())
        if feature >= 0:
            path = path | {int(feature)}
        self._of[int(left)] = self._of[int(right)] = path

    def of(self, nodes) -> list[frozenset[int]]:
        return [self._of.get(int(n), frozenset()) for n in nodes]
