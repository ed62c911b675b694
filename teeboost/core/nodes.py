"""Which training rows sit in which node of the tree being grown.

The active party's grower and every passive party keep one of these per tree, updated
from the same split announcements, so both sides agree on node instance sets without
re-sending them.
"""

from __future__ import annotations

import numpy as np

from ..errors import ProtocolError

__all__ = ["NodeRows"]


class NodeRows:
    """Node id -> sorted row indices, with parent/sibling links for histogram subtraction."""

    def __init__(self, n_rows: int) -> None:
        self.n_rows = n_rows
        self._rows: dict[int, np.ndarray] = {}
        self._parent: dict[int, int] = {}
        self._sibling: dict[int, int] = {}
        self._scratch = np.zeros(n_rows, dtype=bool)

    def set_root(self, rows: np.ndarray) -> None:
        self._rows = {0: np.asarray(rows, dtype=np.int64)}
        self._parent = {0: -1}
        self._sibling = {0: -1}

    def __contains__(self, node: int) -> bool:
        return node in self._rows

    def rows(self, node: int) -> np.ndarray:
        try:
            return self._rows[node]
        except KeyError:
            raise ProtocolError(f"node {node} is not a node of the current tree") from None

    def size(self, node: int) -> int:
        return int(self.rows(node).size)

    def parent(self, node: int) -> int:
        return self._parent[node]

    def sibling(self, node: int) -> int:
        return self._sibling[node]

    def depth(self, node: int) -> int:
        """Splits between the root and ``node`` (the root is at depth 0)."""
        depth = 0
        while self._parent.get(node, -1) != -1:
            node = self._parent[node]
            depth += 1
        return depth

    def split(self, node: int, left: int, right: int, left_rows: np.ndarray) -> np.ndarray:
        """Record children of ``node``; ``left_rows`` must be a subset of its rows.

        Returns the right child's rows. Rejects a left set that is not contained in the
        parent, so a confused or hostile split owner cannot invent instances.
        """
        parent_rows = self.rows(node)
        left_rows = np.asarray(left_rows, dtype=np.int64)
        if left in self._rows or right in self._rows:
            raise ProtocolError(f"children {left}/{right} of node {node} already exist")
        if left_rows.size and (left_rows.min() < 0 or left_rows.max() >= self.n_rows):
            raise ProtocolError(f"left instance set of node {node} has out-of-range rows")
        mark = self._scratch
        mark[left_rows] = True
        in_parent = mark[parent_rows]
        n_in = int(in_parent.sum())
        if n_in != left_rows.size:
            mark[left_rows] = False
            raise ProtocolError(
                f"left instance set of node {node} has {left_rows.size - n_in} rows "
                "that are not in the node (or duplicates)"
            )
        right_rows = parent_rows[~in_parent]
        mark[left_rows] = False
        self._rows[left] = parent_rows[in_parent]
        self._rows[right] = right_rows
        self._parent[left] = self._parent[right] = node
        self._sibling[left], self._sibling[right] = right, left
        return right_rows

    def forget(self, nodes: list[int]) -> None:
        """Drop rows of nodes that will not be split again (keeps memory at one level)."""
        for node in nodes:
            self._rows.pop(node, None)
