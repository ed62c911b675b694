"""How the owner of a winning split partitions a node, and how everyone learns the result.

Shared by every protocol: the winner records its threshold under a fresh record id and
returns the left instance set (as in SecureBoost); the active party then announces each
split's left set to the passive parties that did not own it, so every party tracks node
instance sets without them being re-sent level after level.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.nodes import NodeRows
from ..errors import ProtocolError
from ..transport.serde import array_field, message

__all__ = [
    "SplitRequest", "SplitReply", "Announcements", "pack_rows", "unpack_rows",
    "apply_announcements", "check_rows",
]


@message
@dataclass(frozen=True)
class SplitRequest:
    """Active -> owner: record these splits (``locators`` are protocol-defined: (feature,
    bin) pairs in the clear, or enclave handles) and partition the nodes."""

    tree: int
    nodes: np.ndarray = array_field("int32", 1)
    lefts: np.ndarray = array_field("int32", 1)
    rights: np.ndarray = array_field("int32", 1)
    features: np.ndarray = array_field("int32", 1)
    bins: np.ndarray = array_field("int32", 1)
    default_left: np.ndarray = array_field("bool", 1)


@message
@dataclass(frozen=True)
class SplitReply:
    """Owner -> active: one record id and one left instance set per split."""

    tree: int
    records: np.ndarray = array_field("int64", 1)
    left_offsets: np.ndarray = array_field("int64", 1)
    left_rows: np.ndarray = array_field("uint32", 1)


def pack_rows(groups: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """List of row arrays -> (offsets, concatenated uint32 rows)."""
    offsets = np.zeros(len(groups) + 1, dtype=np.int64)
    if groups:
        offsets[1:] = np.cumsum([g.size for g in groups])
        rows = np.concatenate(groups).astype(np.uint32) if offsets[-1] else np.empty(0, np.uint32)
    else:
        rows = np.empty(0, dtype=np.uint32)
    return offsets, rows


def check_rows(rows: np.ndarray, n_rows: int, what: str) -> np.ndarray:
    """Rows must be in range, strictly increasing (sorted, no duplicates)."""
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size and (rows[0] < 0 or rows[-1] >= n_rows or np.any(np.diff(rows) <= 0)):
        raise ProtocolError(f"{what}: rows must be sorted, distinct and below {n_rows}")
    return rows


def unpack_rows(offsets: np.ndarray, rows: np.ndarray, n_groups: int, n_rows: int, what: str) -> list[np.ndarray]:
    """Inverse of ``pack_rows`` with every bound checked."""
    if offsets.size != n_groups + 1 or (offsets.size and (offsets[0] != 0 or offsets[-1] != rows.size)) \
            or np.any(np.diff(offsets) < 0):
        raise ProtocolError(f"{what}: offsets do not describe {n_groups} row groups")
    return [check_rows(rows[offsets[i]:offsets[i + 1]], n_rows, what) for i in range(n_groups)]


@dataclass
class Announcements:
    """Splits of the last level each passive party still has to hear about."""

    entries: list[tuple[int, int, int, int, np.ndarray]]  # (owner, node, left, right, left rows)

    def __init__(self) -> None:
        self.entries = []

    def add(self, owner: int, node: int, left: int, right: int, left_rows: np.ndarray) -> None:
        self.entries.append((owner, node, left, right, left_rows))

    def for_party(self, party: int) -> dict[str, np.ndarray]:
        mine = [e for e in self.entries if e[0] != party]
        offsets, rows = pack_rows([e[4] for e in mine])
        return {
            "split_nodes": np.array([e[1] for e in mine], dtype=np.int32),
            "split_lefts": np.array([e[2] for e in mine], dtype=np.int32),
            "split_rights": np.array([e[3] for e in mine], dtype=np.int32),
            "split_offsets": offsets,
            "split_rows": rows,
        }

    def clear(self) -> None:
        self.entries = []


def apply_announcements(node_rows: NodeRows, msg) -> None:
    """Passive side: update node instance sets from the announced splits in ``msg``."""
    n = msg.split_nodes.size
    if msg.split_lefts.size != n or msg.split_rights.size != n:
        raise ProtocolError("split announcement arrays differ in length")
    groups = unpack_rows(msg.split_offsets, msg.split_rows, n, node_rows.n_rows, "split announcement")
    for node, left, right, rows in zip(msg.split_nodes, msg.split_lefts, msg.split_rights, groups):
        node_rows.split(int(node), int(left), int(right), rows)
