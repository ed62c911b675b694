"""Which training rows sit in which node of the tree being grown.

The active party's grower and every passive party keep one of these per tree, updated
from the same split announcements, so both sides agree on node instance sets without
re-sending them.
"""

from __future__ import annotations

import numpy as np

from ..errors import ProtocolError
from .compiled import ON_HOST
from .packed import PackedInts, select

__all__ = ["NodeRows"]


if ON_HOST:  # compiled kernels (``compiled``); an enclave keeps numpy
    from .row_kernels import split_rows
else:
    split_rows = None


def _int64(value: int) -> int:
    """``value`` wrapped into int64, as numpy's sums wrap."""
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def _split_copying(array, went_left: np.ndarray, went_right: np.ndarray) -> tuple:
    """(left part, right part) as new arrays; the parent's goes once both exist."""
    if split_rows is not None and isinstance(array, np.ndarray) and array.ndim == 1:
        return split_rows(array, went_left)
    return array[went_left], array[went_right]


class NodeRows:
    """Node id -> sorted row indices, with parent/sibling links for histogram subtraction.

    A split is given either as the left rows (checked to lie in the node) or as a boolean
    over the node's rows, which cannot name a row outside it. The children take over the
    node's rows, so only the newest level's rows are held. Arrays aligned with the rows (a
    party's gradients of them) may travel with them: each node then holds its own."""

    def __init__(self, n_rows: int, *, in_place: bool = False) -> None:
        """``in_place``: this object owns the root's rows and values (writable, shared with
        nothing else), so a split reorders each in place, left rows first, and the children
        are views: a tree's arrays are never copied, only a node's worth of scratch at a time."""
        self.n_rows = n_rows
        self.in_place = in_place
        self._rows: dict[int, np.ndarray] = {}
        self._parent: dict[int, int] = {}
        self._sibling: dict[int, int] = {}
        self._values: dict[int, tuple[np.ndarray, ...]] = {}
        self._used: set[int] = set()  # every node id of this tree so far, split nodes' included
        self._scratch: np.ndarray | None = None  # a flag per row, for checking left row lists
        self._totals: dict[int, tuple[int, int]] = {}  # node -> (G, H) under ``_totals_of``
        self._totals_of = None

    def set_root(self, rows: np.ndarray, values: tuple[np.ndarray, ...] = ()) -> None:
        """``values``: arrays aligned with ``rows`` that split with them (``values(node)``)."""
        self._rows = {0: np.asarray(rows, dtype=np.int64)}
        self._totals, self._totals_of = {}, None
        self._parent = {0: -1}
        self._sibling = {0: -1}
        self._used = {0}
        if any(np.shape(v) != self._rows[0].shape for v in values):
            raise ProtocolError("values must be aligned with the root's rows")
        self._values = {0: tuple(values)} if values else {}

    def __contains__(self, node: int) -> bool:
        return node in self._rows

    def rows(self, node: int) -> np.ndarray:
        try:
            return self._rows[node]
        except KeyError:
            raise ProtocolError(f"node {node} is not a node of the current tree") from None

    def size(self, node: int) -> int:
        return int(self.rows(node).size)

    def values(self, node: int) -> tuple[np.ndarray, ...]:
        """The arrays that travel with the node's rows (empty if none were given)."""
        self.rows(node)
        return self._values.get(node, ())

    def totals(self, node: int, gradients) -> tuple[int, int]:
        """Exact (G, H) of the node's rows under ``gradients`` (``EncodedGradients``), each node
        summed at most once: a node whose sibling and parent are known is their difference, as
        int64 sums wrap (a tree asks for every node's totals several times: 4.8 s of plain's
        16 s at 1e6 rows before this, cProfile, docs/benchmarks.md)."""
        if gradients is not self._totals_of:
            self._totals, self._totals_of = {}, gradients
        memo = self._totals
        if node not in memo:
            parent, sibling = self._parent.get(node, -1), self._sibling.get(node, -1)
            if parent in memo and sibling in memo:
                memo[node] = (_int64(memo[parent][0] - memo[sibling][0]), _int64(memo[parent][1] - memo[sibling][1]))
            else:
                memo[node] = gradients.totals(self.rows(node))
        return memo[node]

    def remember_totals(self, node: int, gradients, totals: tuple[int, int]) -> None:
        """(G, H) of a node about to be made, summed by whoever checked its rows (the split's
        left rows, before the grower records the split)."""
        if gradients is not self._totals_of:
            self._totals, self._totals_of = {}, gradients
        self._totals[node] = (int(totals[0]), int(totals[1]))

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
        self._check_children(node, left, right)
        if left_rows.size and (left_rows.min() < 0 or left_rows.max() >= self.n_rows):
            raise ProtocolError(f"left instance set of node {node} has out-of-range rows")
        if self._scratch is None:
            self._scratch = np.zeros(self.n_rows, dtype=bool)
        mark = self._scratch
        mark[left_rows] = True
        in_parent = mark[parent_rows]
        mark[left_rows] = False
        n_in = int(np.count_nonzero(in_parent))
        if n_in != left_rows.size:
            raise ProtocolError(
                f"left instance set of node {node} has {left_rows.size - n_in} rows "
                "that are not in the node (or duplicates)"
            )
        return self._record(node, left, right, in_parent)

    def split_mask(self, node: int, left: int, right: int, went_left: np.ndarray) -> np.ndarray:
        """Record children of ``node`` from a boolean over its rows (True: left child);
        returns the right child's rows."""
        went_left = np.asarray(went_left)
        if went_left.dtype != bool or went_left.shape != self.rows(node).shape:
            raise ProtocolError(f"the partition of node {node} is not one boolean per row of the node")
        self._check_children(node, left, right)
        return self._record(node, left, right, went_left)

    def _check_children(self, node: int, left: int, right: int) -> None:
        """Children are new node ids: never one in use or already split (a reused id would
        make a parent cycle, and ``depth`` would never return), never negative."""
        if left in self._used or right in self._used or left == right or left < 0 or right < 0:
            raise ProtocolError(f"children {left}/{right} of node {node} already exist in this tree "
                                "(node ids are never reused)")

    def _record(self, node: int, left: int, right: int, went_left: np.ndarray) -> np.ndarray:
        went_right = ~went_left
        split = self._split_in_place if self.in_place else _split_copying
        self._rows[left], self._rows[right] = split(self._rows.pop(node), went_left, went_right)
        if node in self._values:
            parents, lefts, rights = list(self._values.pop(node)), [], []
            for i in range(len(parents)):  # one array at a time: a copied parent goes once split
                part_left, part_right = split(parents[i], went_left, went_right)
                parents[i] = None
                lefts.append(part_left)
                rights.append(part_right)
            self._values[left], self._values[right] = tuple(lefts), tuple(rights)
        self._used.update((left, right))
        self._parent[left] = self._parent[right] = node
        self._sibling[left], self._sibling[right] = right, left
        return self._rows[right]

    @staticmethod
    def _split_in_place(array, went_left: np.ndarray, went_right: np.ndarray) -> tuple:
        """(left part, right part) as views of ``array``, reordered left part first."""
        items = array.items if isinstance(array, PackedInts) else array
        n_left = int(np.count_nonzero(went_left))
        if items.dtype.kind == "V":  # packed items: gathered as rows of bytes
            left, right = select(items, went_left), select(items, went_right)
        else:
            left, right = items[went_left], items[went_right]
        items[:n_left], items[n_left:] = left, right
        del left, right
        return array[:n_left], array[n_left:]

    def forget(self, nodes: list[int]) -> None:
        """Drop rows of nodes that will not be split again (keeps memory at one level)."""
        for node in nodes:
            self._rows.pop(node, None)
            self._values.pop(node, None)
