"""Inside the active party's enclave: the tree being grown as the enclave knows it.

The active host decides which node to split only through the enclave's verdict, and the
enclave does not take the host's word for rows, partitions or gains:
- node rows are its own (root = the sampled rows it was given; children from announced
  partitions), never a row list from the host;
- a partition is accepted only for a node the enclave chose to split, only if the left set
  lies inside the node, only if its exact (g, h, count) sums equal those of the split that
  won, and, for a passive winner, only if its rows are exactly the rows that split sends left
  (their SHA-256 was promised with the score);
- the host's own candidates arrive as left sums; the enclave computes their gains itself from
  its own node totals with the one gain formula;
- this level's nodes must be children created by the last accepted partitions.
What the host can still choose is documented in docs/enclaves.md (its own labels, hence
gradients, and which of its own splits it claims).
"""

from __future__ import annotations

import numpy as np

from teeboost.core.gradients import GradientCodec
from teeboost.core.nodes import NodeRows
from teeboost.core.split import NodeBest, SplitCriteria, pick_global_best, split_gains
from teeboost.errors import ProtocolError
from teeboost.protocols.enclave_messages import row_set_digest
from teeboost.protocols.partition import bits_to_subsets, check_rows

__all__ = ["CheckedTree"]


class CheckedTree:
    def __init__(self, tree: int, n_rows: int, rows: np.ndarray, g: np.ndarray, h: np.ndarray,
                 codec: GradientCodec, criteria: SplitCriteria) -> None:
        rows = check_rows(rows, n_rows, "gradient rows")
        if g.size != rows.size or h.size != rows.size:
            raise ProtocolError("gradient vectors do not match the rows")
        self.tree = tree
        self.codec = codec
        self.criteria = criteria
        self.g = np.zeros(n_rows, dtype=np.int64)
        self.h = np.zeros(n_rows, dtype=np.int64)
        self.g[rows], self.h[rows] = g, h
        self.nodes = NodeRows(n_rows)
        self.nodes.set_root(rows)
        self._open = {0}  # nodes this level may ask about
        self._level: list[int] = []
        # node -> (winner, left sums it promised, SHA-256 of its left rows or None for the host's own)
        self._chosen: dict[int, tuple[int, np.ndarray, bytes | None]] = {}

    def totals(self, node: int) -> np.ndarray:
        rows = self.nodes.rows(node)
        return np.array([self.g[rows].sum(), self.h[rows].sum(), rows.size], dtype=np.int64)

    def begin_level(self, tree: int, nodes: np.ndarray, split_nodes: np.ndarray, split_lefts: np.ndarray,
                    split_rights: np.ndarray, split_bits: np.ndarray) -> list[int]:
        """Accept last level's partitions (checked) and this level's node list."""
        if tree != self.tree:
            raise ProtocolError(f"level of tree {tree}, but tree {self.tree} is open")
        n = split_nodes.size
        if split_lefts.size != n or split_rights.size != n:
            raise ProtocolError("split announcement arrays differ in length")
        if sorted(int(x) for x in split_nodes) != sorted(self._chosen):
            raise ProtocolError("the partitions announced are not those of the splits the enclave chose")
        parents = [self.nodes.rows(int(node)) for node in split_nodes]
        lefts = bits_to_subsets(parents, split_bits, "split announcement")
        ids = [int(x) for x in split_lefts] + [int(x) for x in split_rights]
        if len(set(ids)) != len(ids) or any(i in self.nodes for i in ids):
            raise ProtocolError("the announced children reuse node ids")
        for node, left in zip(split_nodes, lefts):  # every check before any change
            winner, promised, digest = self._chosen[int(node)]
            actual = np.array([self.g[left].sum(), self.h[left].sum(), left.size], dtype=np.int64)
            if not np.array_equal(actual, promised) or (digest is not None and row_set_digest(left) != digest):
                raise ProtocolError(f"the partition of node {int(node)} is not the split party {winner} won "
                                    "(its rows differ from the scored split)")
        for node, left_id, right_id, left in zip(split_nodes, split_lefts, split_rights, lefts):
            self.nodes.split(int(node), int(left_id), int(right_id), left)
        self._chosen = {}
        if n:
            self._open = set(ids)
        level = [int(x) for x in nodes]
        if len(set(level)) != len(level) or not set(level) <= self._open:
            raise ProtocolError("this level's nodes are not leaves created by the last partitions")
        self._open = set()
        self._level = level
        return level

    def own_candidates(self, valid: np.ndarray, left: np.ndarray) -> list[NodeBest]:
        """The host's own best per node, as left sums -> gains computed here."""
        if valid.size != len(self._level) or left.shape != (len(self._level), 3):
            raise ProtocolError("own candidates do not match this level's nodes")
        out = []
        for i, node in enumerate(self._level):
            if not valid[i]:
                out.append(NodeBest(-np.inf, -1, -1, False))
                continue
            gain = float(split_gains(left[i], self.totals(node), self.codec, self.criteria))
            out.append(NodeBest(gain, -1, -1, False))
        return out

    def choose(self, candidates: list[list[tuple[int, NodeBest, np.ndarray, bytes | None]]]
               ) -> tuple[np.ndarray, np.ndarray]:
        """Winner per node (-1: none) and its gain; remembers what each winner promised: left
        sums, and for passive winners the digest of the exact left rows."""
        n = len(self._level)
        parties = np.full(n, -1, dtype=np.int32)
        gains = np.zeros(n, dtype=np.float64)
        for i, (node, options) in enumerate(zip(self._level, candidates)):
            promised = {party: (sums, digest) for party, _, sums, digest in options}
            winner = pick_global_best([(party, best) for party, best, _, _ in options])
            if winner is None:
                continue
            parties[i], gains[i] = winner[0], winner[1].gain
            sums, digest = promised[winner[0]]
            self._chosen[node] = (winner[0], np.asarray(sums, dtype=np.int64), digest)
        return parties, gains

    def check_gain(self, party: int, index: int, claimed: float, left: np.ndarray) -> NodeBest:
        """A peer's score must be the gain of the left sums it promised, by the one formula."""
        gain = float(split_gains(np.asarray(left, dtype=np.int64), self.totals(self._level[index]), self.codec,
                                 self.criteria))
        if not (gain == claimed or (np.isneginf(gain) and np.isneginf(claimed))):
            raise ProtocolError(f"party {party} scored node {self._level[index]} with a gain its split does not have")
        return NodeBest(gain, -1, -1, False)

    @property
    def level(self) -> list[int]:
        return list(self._level)
