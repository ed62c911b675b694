"""Trees as the active party holds them, and split records as their owners hold them.

The active party keeps only the structure: at each split, which party owns it and that
party's record id. Each party (the active one included) keeps its own lookup table
record id -> (feature, threshold, missing direction). Nobody else ever sees a threshold.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ModelFileError, ProtocolError

__all__ = ["Tree", "SplitRecord", "OwnerTable", "record_goes_left"]


@dataclass
class Tree:
    """One regression tree; node 0 is the root, children ids grow level by level."""

    output: int = 0  # which margin (class) this tree adds to
    left: list[int] = field(default_factory=lambda: [-1])
    right: list[int] = field(default_factory=lambda: [-1])
    party: list[int] = field(default_factory=lambda: [-1])
    record: list[int] = field(default_factory=lambda: [-1])
    value: list[float] = field(default_factory=lambda: [0.0])
    gain: list[float] = field(default_factory=lambda: [0.0])
    n_rows: list[int] = field(default_factory=lambda: [0])
    cover: list[float] = field(default_factory=lambda: [0.0])  # hessian sum of the node's rows (XGBoost's cover)

    def __post_init__(self) -> None:
        if self.cover == [0.0] and len(self.left) != 1:  # built without covers (e.g. by hand): none known
            self.cover = [0.0] * len(self.left)

    @property
    def n_nodes(self) -> int:
        return len(self.left)

    def is_leaf(self, node: int) -> bool:
        return self.left[node] < 0

    def add_split(self, node: int, party: int, record: int, gain: float) -> tuple[int, int]:
        """Turn leaf ``node`` into a split; returns the new (left, right) child ids."""
        left, right = self.n_nodes, self.n_nodes + 1
        for _ in range(2):
            self.left.append(-1)
            self.right.append(-1)
            self.party.append(-1)
            self.record.append(-1)
            self.value.append(0.0)
            self.gain.append(0.0)
            self.n_rows.append(0)
            self.cover.append(0.0)
        self.left[node], self.right[node] = left, right
        self.party[node], self.record[node], self.gain[node] = party, record, gain
        return left, right

    def to_dict(self) -> dict[str, Any]:
        return {
            "output": self.output,
            "left": self.left,
            "right": self.right,
            "party": self.party,
            "record": self.record,
            "value": self.value,
            "gain": self.gain,
            "n_rows": self.n_rows,
            "cover": self.cover,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Tree":
        try:
            tree = cls(
                output=int(data["output"]),
                left=[int(v) for v in data["left"]],
                right=[int(v) for v in data["right"]],
                party=[int(v) for v in data["party"]],
                record=[int(v) for v in data["record"]],
                value=[float(v) for v in data["value"]],
                gain=[float(v) for v in data["gain"]],
                n_rows=[int(v) for v in data["n_rows"]],
                cover=[float(v) for v in data.get("cover", [0.0] * len(data["left"]))],
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelFileError(f"malformed tree: {exc}") from None
        n = tree.n_nodes
        lengths = {len(tree.right), len(tree.party), len(tree.record), len(tree.value), len(tree.gain),
                   len(tree.n_rows), len(tree.cover)}
        if lengths != {n}:
            raise ModelFileError("malformed tree: node arrays differ in length")
        for node in range(n):
            l, r = tree.left[node], tree.right[node]
            if (l < 0) != (r < 0) or (l >= 0 and not (node < l < n and node < r < n)):
                raise ModelFileError(f"malformed tree: node {node} has children {l}, {r}")
        return tree


@dataclass(frozen=True)
class SplitRecord:
    """What the owner of a split keeps: raw threshold and where missing values go, or for a
    categorical feature the bit mask of the category codes that go left."""

    feature: int
    threshold: float
    missing_left: bool
    tree: int
    categories: int = 0  # non-zero: categorical split, bit c set = code c goes left

    @property
    def categorical(self) -> bool:
        return self.categories != 0


def record_goes_left(record: SplitRecord, values: np.ndarray) -> np.ndarray:
    """Does each raw value of ``record``'s feature go left? One function for every caller
    (the owner's table, routing jobs on a compute backend), so their answers agree."""
    missing = np.isnan(values)
    if record.categorical:
        codes = np.clip(np.where(missing, 0, values), 0, 63).astype(np.uint64)
        decision = ~missing & (((np.uint64(record.categories) >> codes) & np.uint64(1)) == 1)
    else:
        decision = values <= record.threshold
    if record.missing_left:
        decision |= missing
    return decision


class OwnerTable:
    """One party's split records, keyed by the record ids it handed out."""

    def __init__(self) -> None:
        self._records: dict[int, SplitRecord] = {}
        self._next_id = 0
        self._per_tree: Counter[int] = Counter()  # kept as records come: a policy checks it at every split

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, record_id: int) -> bool:
        return record_id in self._records

    def add(self, record: SplitRecord) -> int:
        record_id = self._next_id
        self._next_id += 1
        self._records[record_id] = record
        self._per_tree[record.tree] += 1
        return record_id

    def insert(self, record_id: int, record: SplitRecord) -> None:
        """A record under an id chosen elsewhere (strict mode's enclaves pick random ids)."""
        if record_id < 0 or record_id in self._records:
            raise ProtocolError(f"split record id {record_id} is negative or already in use")
        self._records[record_id] = record
        self._per_tree[record.tree] += 1
        self._next_id = max(self._next_id, record_id + 1)

    def replace(self, other: "OwnerTable") -> None:
        """Take over another table's records (in place: holders of this table see them)."""
        self._records = dict(other._records)
        self._next_id = other._next_id
        self._per_tree = Counter(other._per_tree)

    def get(self, record_id: int) -> SplitRecord:
        try:
            return self._records[record_id]
        except KeyError:
            raise ProtocolError(f"unknown split record id {record_id}") from None

    def go_left(self, raw: np.ndarray, record_id: int, rows: np.ndarray) -> np.ndarray:
        """For raw feature matrix ``raw``: does each of ``rows`` go left at this split?"""
        record = self.get(record_id)
        return record_goes_left(record, raw[rows, record.feature])

    def keep_trees_below(self, n_trees: int) -> None:
        """Drop records of trees that early stopping discarded."""
        self._records = {k: r for k, r in self._records.items() if r.tree < n_trees}
        self._per_tree = Counter({t: c for t, c in self._per_tree.items() if t < n_trees})

    def records_per_tree(self) -> dict[int, int]:
        """How many records each tree holds."""
        return dict(self._per_tree)

    def rewind(self, n_trees: int) -> None:
        """Back to the state after tree ``n_trees - 1`` (resuming from a checkpoint): later
        records go and ids are handed out again from where that tree left off."""
        self.keep_trees_below(n_trees)
        self._next_id = max(self._records, default=-1) + 1

    def items(self):
        return sorted(self._records.items())

    def to_list(self) -> list[dict[str, Any]]:
        return [
            {
                "id": record_id,
                "feature": r.feature,
                "threshold": r.threshold,
                "missing_left": r.missing_left,
                "tree": r.tree,
                **({"categories": r.categories} if r.categorical else {}),
            }
            for record_id, r in self.items()
        ]

    @classmethod
    def from_list(cls, rows: list[dict[str, Any]], n_features: int) -> "OwnerTable":
        table = cls()
        for entry in rows:
            try:
                record_id = int(entry["id"])
                record = SplitRecord(
                    feature=int(entry["feature"]),
                    threshold=float(entry["threshold"]),
                    missing_left=bool(entry["missing_left"]),
                    tree=int(entry["tree"]),
                    categories=int(entry.get("categories", 0)),
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise ModelFileError(f"malformed split record {entry!r}: {exc}") from None
            if not 0 <= record.categories < (1 << 62):
                raise ModelFileError(f"split record {record_id} has category mask {record.categories} out of range")
            if not 0 <= record.feature < n_features:
                raise ModelFileError(
                    f"split record {record_id} names feature {record.feature}, "
                    f"but the party has {n_features} features"
                )
            table._records[record_id] = record
            table._per_tree[record.tree] += 1
            table._next_id = max(table._next_id, record_id + 1)
        return table
