"""Routing samples through trees whose splits are held by different parties.

The active party walks every tree level by level. At a split it does not own, it asks the
owner "which of these rows go left at your record r?", and the owner answers only that.
All trees advance together, so a whole prediction costs ``max_depth`` round trips per
party, and each party learns only which of its own records are asked about for which rows.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from ..errors import ProtocolError
from .tree import Tree

__all__ = ["RoutingOracle", "Question", "leaf_assignments", "tree_outputs"]

Question = tuple[int, np.ndarray]  # (record id, rows)


class RoutingOracle(ABC):
    """Answers routing questions for every party (locally or over the network)."""

    @abstractmethod
    def route(self, questions: dict[int, list[Question]]) -> dict[int, list[np.ndarray]]:
        """party -> questions  =>  party -> one boolean go-left array per question."""


def leaf_assignments(trees: list[Tree], rows: np.ndarray, oracle: RoutingOracle) -> np.ndarray:
    """Leaf node id of each row in each tree: int array (len(trees), len(rows))."""
    rows = np.asarray(rows, dtype=np.int64)
    leaves = np.zeros((len(trees), rows.size), dtype=np.int64)
    # frontier entries: (tree index, node id, positions into ``rows``)
    frontier = [(t, 0, np.arange(rows.size)) for t in range(len(trees))]
    while frontier:
        questions: dict[int, list[Question]] = {}
        asked: dict[int, list[tuple[int, int, np.ndarray]]] = {}
        for t, node, positions in frontier:
            tree = trees[t]
            if tree.is_leaf(node) or positions.size == 0:
                leaves[t, positions] = node
                continue
            party = tree.party[node]
            questions.setdefault(party, []).append((tree.record[node], rows[positions]))
            asked.setdefault(party, []).append((t, node, positions))
        if not questions:
            break
        answers = oracle.route(questions)
        frontier = []
        for party, entries in asked.items():
            replies = answers.get(party)
            if replies is None or len(replies) != len(entries):
                raise ProtocolError(f"party {party} answered {0 if replies is None else len(replies)} "
                                    f"of {len(entries)} routing questions")
            for (t, node, positions), go_left in zip(entries, replies):
                go_left = np.asarray(go_left, dtype=bool)
                if go_left.shape != positions.shape:
                    raise ProtocolError(
                        f"party {party} answered {go_left.size} rows for a question of "
                        f"{positions.size} rows"
                    )
                tree = trees[t]
                frontier.append((t, tree.left[node], positions[go_left]))
                frontier.append((t, tree.right[node], positions[~go_left]))
    return leaves


def tree_outputs(trees: list[Tree], leaves: np.ndarray, n_outputs: int) -> np.ndarray:
    """Sum of leaf values per row and output: (n_rows, n_outputs)."""
    out = np.zeros((leaves.shape[1], n_outputs), dtype=np.float64)
    for t, tree in enumerate(trees):
        values = np.asarray(tree.value, dtype=np.float64)
        out[:, tree.output] += values[leaves[t]]
    return out
