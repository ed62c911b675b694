"""Inside the active party's enclave: the tree being grown as the enclave knows it.

The active host decides which node to split only through the enclave's verdict, and the
enclave does not take the host's word for rows, partitions or gains:
- node rows are its own (root = the sampled rows it was given; children from announced
  partitions), never a row list from the host;
- a partition is accepted only for a node the enclave chose to split, only if the left set
  lies inside the node, only if its exact (g, h, count) sums equal those of the split that
  won, and, for a passive winner, only if its rows are exactly the rows that split sends left
  (the SHA-256 of its bits over the node's rows was promised with the score);
- the host's own candidates arrive as left sums; the enclave computes their gains itself from
  its own node totals with the one gain formula;
- this level's nodes must be children created by the last accepted partitions.
What the host can still choose is documented in docs/enclaves.md (its own labels, hence
gradients, and which of its own splits it claims).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from teeboost.core.gradients import GradientCodec
from teeboost.core.nodes import NodeRows
from teeboost.core.packed import PackedInts
from teeboost.core.split import NodeBest, SplitCriteria, pick_global_best, split_gains
from teeboost.errors import ProtocolError
from teeboost.protocols.enclave.messages import partition_digest
from teeboost.protocols.enclave.intcodec import unpack_ints
from teeboost.protocols.enclave.partition import bit_chunks, bits_to_masks, check_rows, decode_row_sets, row_set_size

__all__ = ["CheckedTree"]


def _spread(values: np.ndarray, rows: np.ndarray, n_rows: int) -> np.ndarray:
    """Values of ``rows`` as an int64 array over the dataset (zero elsewhere)."""
    out = np.zeros(n_rows, dtype=np.int64)
    out[rows] = values
    return out


class _NodeValues:
    """Each current node's g and h in row order, packed as they arrived: all a partition
    check needs when nothing else asks for row ids (N-TEE), at about 9 bytes per sampled row,
    widened only a block at a time to be summed."""

    def __init__(self, g: PackedInts, h: PackedInts) -> None:
        self._values = {0: (g, h)}
        self._lefts: dict[int, tuple] = {}  # node -> (mask, g, h) of its left child, from ``left_sums``

    def __contains__(self, node: int) -> bool:
        return node in self._values

    def size(self, node: int) -> int:
        return self._get(node)[0].size

    def root_totals(self) -> np.ndarray:
        g, h = self._values[0]
        return np.array([g.total(), h.total(), g.size], dtype=np.int64)

    def left_sums(self, node: int, went_left: np.ndarray) -> np.ndarray:
        """The left child's (G, H, count); its g and h are kept for ``split`` of the same mask
        (checked before any split, then split: gathered once, not twice)."""
        g, h = self._get(node)
        left = (went_left, g[went_left], h[went_left])
        self._lefts[node] = left
        return np.array([left[1].total(), left[2].total(), np.count_nonzero(went_left)], dtype=np.int64)

    def split(self, node: int, left: int, right: int, went_left: np.ndarray) -> None:
        g, h = self._values.pop(node)
        went_right = ~went_left
        mask, g_left, h_left = self._lefts.pop(node, (None, None, None))
        if mask is not went_left:
            g_left, h_left = g[went_left], h[went_left]
        self._values[left] = (g_left, h_left)
        self._values[right] = (g[went_right], h[went_right])

    def _get(self, node: int) -> tuple[PackedInts, PackedInts]:
        try:
            return self._values[node]
        except KeyError:
            raise ProtocolError(f"node {node} is not a node of the current tree") from None


class _NodeRows:
    """Each current node's row ids, with g and h by dataset row (1-TEE: the enclave sums bins
    of those rows itself)."""

    def __init__(self, rows: np.ndarray, g: np.ndarray, h: np.ndarray) -> None:
        self.g, self.h = g, h  # by dataset row, zero outside the tree's rows
        self.nodes = NodeRows(g.size)
        self.nodes.set_root(rows)

    def __contains__(self, node: int) -> bool:
        return node in self.nodes

    def size(self, node: int) -> int:
        return self.nodes.size(node)

    def root_totals(self) -> np.ndarray:
        return np.array([self.g.sum(), self.h.sum(), self.nodes.size(0)], dtype=np.int64)

    def left_sums(self, node: int, went_left: np.ndarray) -> np.ndarray:
        left = self.nodes.rows(node)[went_left]
        return np.array([self.g[left].sum(), self.h[left].sum(), left.size], dtype=np.int64)

    def split(self, node: int, left: int, right: int, went_left: np.ndarray) -> None:
        self.nodes.split_mask(node, left, right, went_left)


class CheckedTree:
    def __init__(self, tree: int, n_rows: int, rows: np.ndarray, g: np.ndarray, h: np.ndarray,
                 codec: GradientCodec, criteria: SplitCriteria) -> None:
        rows = check_rows(rows, n_rows, "gradient rows")
        if g.size != rows.size or h.size != rows.size:
            raise ProtocolError("gradient vectors do not match the rows")
        self._start(tree, _NodeRows(rows, _spread(g, rows, n_rows), _spread(h, rows, n_rows)), codec, criteria)

    @classmethod
    def from_message(cls, msg, criteria: SplitCriteria, *, with_rows: bool = True) -> "CheckedTree":
        """A tree from the host's ``TreeGradients`` (row set, packed g and h). Without rows the
        tree keeps only each node's g and h, packed (what N-TEE's checks need); with them, row
        ids and g and h by dataset row, each unpacked straight into its place (one at a time)."""
        if with_rows:
            (rows,) = decode_row_sets(msg.row_encoding, msg.row_offsets, msg.row_payload, msg.n_rows, "gradient rows")
            store = _NodeRows(rows, _spread(unpack_ints(msg.g, msg.width_g, rows.size), rows, msg.n_rows),
                              _spread(unpack_ints(msg.h, msg.width_h, rows.size), rows, msg.n_rows))
        else:  # kept packed, as views of the message
            count = row_set_size(msg.row_encoding, msg.row_offsets, msg.row_payload, msg.n_rows, "gradient rows")
            store = _NodeValues(PackedInts.from_buffer(msg.g, msg.width_g, count),
                                PackedInts.from_buffer(msg.h, msg.width_h, count))
        tree = cls.__new__(cls)
        tree._start(msg.tree, store, GradientCodec(msg.frac_bits), criteria)
        return tree

    def _start(self, tree: int, store, codec: GradientCodec, criteria: SplitCriteria) -> None:
        self.tree = tree
        self.codec = codec
        self.criteria = criteria
        self._store = store
        self._totals = {0: store.root_totals()}  # exact (G, H, count) per node
        self._used = {0}  # every node id of this tree so far (split nodes' rows are dropped)
        self._open = {0}  # nodes this level may ask about
        self._level: list[int] = []
        self._bounds: np.ndarray | None = None  # (level nodes, 2) weight bounds, under monotone constraints
        self.limits = None  # CheckedLimits: the host's node bounds and sets, held to this tree (constraints)
        # node -> (winner, left sums it promised, partition digest of its left set or None for the host's own,
        #          the (left, right) ids its children get)
        self._chosen: dict[int, tuple[int, np.ndarray, bytes | None, tuple[int, int]]] = {}

    @property
    def nodes(self) -> NodeRows:
        """Row ids of the current nodes (trees built with rows only)."""
        return self._store.nodes

    @property
    def g(self) -> np.ndarray:
        return self._store.g

    @property
    def h(self) -> np.ndarray:
        return self._store.h

    def size(self, node: int) -> int:
        return self._store.size(node)

    def totals(self, node: int) -> np.ndarray:
        """Exact (G, H, count) of a node, summed once when the node was created."""
        self._store.size(node)  # unknown nodes are refused here
        return self._totals[node]

    def begin_level(self, tree: int, nodes: np.ndarray, split_nodes: np.ndarray, split_lefts: np.ndarray,
                    split_rights: np.ndarray, split_bits: np.ndarray, bounds: np.ndarray | None = None,
                    sets: np.ndarray | None = None) -> list[int]:
        """Accept last level's partitions (checked) and this level's node list (with each
        node's weight bounds under monotone constraints: the host's grower keeps them, as it
        keeps the gradients they follow from)."""
        if tree != self.tree:
            raise ProtocolError(f"level of tree {tree}, but tree {self.tree} is open")
        n = split_nodes.size
        if split_lefts.size != n or split_rights.size != n:
            raise ProtocolError("split announcement arrays differ in length")
        if sorted(int(x) for x in split_nodes) != sorted(self._chosen):
            raise ProtocolError("the partitions announced are not those of the splits the enclave chose")
        sizes = [self._store.size(int(node)) for node in split_nodes]
        masks = bits_to_masks(sizes, split_bits, "split announcement")
        ids = [int(x) for x in split_lefts] + [int(x) for x in split_rights]
        if len(set(ids)) != len(ids) or any(i in self._used for i in ids):
            raise ProtocolError("the announced children reuse node ids")
        for node, left_id, right_id in zip(split_nodes, split_lefts, split_rights):
            if self._chosen[int(node)][3] != (int(left_id), int(right_id)):
                raise ProtocolError(f"the children announced for node {int(node)} are not the ids the enclave gave "
                                    "its split")
        sums = []
        for node, went_left, bits in zip(split_nodes, masks, bit_chunks(sizes, split_bits)):
            winner, promised, digest, _ = self._chosen[int(node)]  # every check before any change
            actual = self._store.left_sums(int(node), went_left)
            if not np.array_equal(actual, promised) or (digest is not None and partition_digest(bits) != digest):
                raise ProtocolError(f"the partition of node {int(node)} is not the split party {winner} won "
                                    "(its rows differ from the scored split)")
            sums.append(actual)
        for node, left_id, right_id, went_left, left_sums in zip(split_nodes, split_lefts, split_rights, masks, sums):
            self._store.split(int(node), int(left_id), int(right_id), went_left)
            if self.limits is not None:
                self.limits.split(int(node), int(left_id), int(right_id))
            self._totals[int(left_id)] = left_sums
            self._totals[int(right_id)] = self._totals[int(node)] - left_sums
        self._used.update(ids)
        self._chosen = {}
        if n:
            self._open = set(ids)
        level = [int(x) for x in nodes]
        if len(set(level)) != len(level) or not set(level) <= self._open:
            raise ProtocolError("this level's nodes are not leaves created by the last partitions")
        self._open = set()
        self._level = level
        self._bounds = None
        bounds = np.zeros((0, 2)) if bounds is None else np.asarray(bounds, dtype=np.float64)
        sets = np.zeros(0, dtype=np.int64) if sets is None else np.asarray(sets, dtype=np.int64)
        if self.limits is not None:
            self.limits.check_level(level, bounds, sets, self.totals, self.codec)
        elif bounds.size or sets.size:
            raise ProtocolError("node bounds or interaction sets for a run without constraints")
        if bounds.size:
            self._bounds = bounds
        return level

    def _limits(self, index: int, direction: int = 0) -> dict:
        """``split_gains`` keywords for node ``index`` of the level under monotone constraints."""
        if self._bounds is None and not direction:
            return {}
        out = {"direction": int(direction)} if direction else {}
        if self._bounds is not None:
            out.update(lower=float(self._bounds[index, 0]), upper=float(self._bounds[index, 1]))
        return out

    def own_candidates(self, valid: np.ndarray, left: np.ndarray, directions: np.ndarray | None = None
                       ) -> list[NodeBest]:
        """The host's own best per node, as left sums -> gains computed here (with its
        column's monotone direction, under monotone constraints)."""
        if valid.size != len(self._level) or left.shape != (len(self._level), 3):
            raise ProtocolError("own candidates do not match this level's nodes")
        if directions is not None and directions.size not in (0, valid.size):
            raise ProtocolError("own candidates' directions do not match this level's nodes")
        out = []
        for i, node in enumerate(self._level):
            if not valid[i]:
                out.append(NodeBest(-np.inf, -1, -1, False))
                continue
            direction = int(directions[i]) if directions is not None and directions.size else 0
            gain = float(split_gains(left[i], self.totals(node), self.codec, self.criteria,
                                     **self._limits(i, direction)))
            out.append(NodeBest(gain, -1, -1, False))
        return out

    def choose(self, candidates: list[list[tuple[int, NodeBest, np.ndarray, bytes | Callable[[], bytes] | None]]]
               ) -> tuple[np.ndarray, np.ndarray]:
        """Winner per node (-1: none) and its gain; remembers what each winner promised: left
        sums, and for passive winners the ``partition_digest`` of its left set (or a function
        that computes it, called for winners only). Each split's children get the next unused
        ids, two per split in level order, as the grower numbers them (``children``)."""
        n = len(self._level)
        parties = np.full(n, -1, dtype=np.int32)
        gains = np.zeros(n, dtype=np.float64)
        next_id = max(self._used) + 1
        for i, (node, options) in enumerate(zip(self._level, candidates)):
            promised = {party: (sums, digest) for party, _, sums, digest in options}
            winner = pick_global_best([(party, best) for party, best, _, _ in options])
            if winner is None:
                continue
            parties[i], gains[i] = winner[0], winner[1].gain
            sums, digest = promised[winner[0]]
            self._chosen[node] = (winner[0], np.asarray(sums, dtype=np.int64), digest() if callable(digest) else digest,
                                  (next_id, next_id + 1))
            next_id += 2
        return parties, gains

    def children(self, node: int) -> tuple[int, int]:
        """The ids the children of a node chosen at this level get (refused for any other node)."""
        try:
            return self._chosen[node][3]
        except KeyError:
            raise ProtocolError(f"node {node} was not chosen for a split at this level") from None

    def check_gain(self, party: int, index: int, claimed: float, left: np.ndarray, direction: int = 0) -> NodeBest:
        """A peer's score must be the gain of the left sums it promised, by the one formula
        (within the node's bounds, for a column of that monotone direction)."""
        gain = float(split_gains(np.asarray(left, dtype=np.int64), self.totals(self._level[index]), self.codec,
                                 self.criteria, **self._limits(index, direction)))
        if not (gain == claimed or (np.isneginf(gain) and np.isneginf(claimed))):
            raise ProtocolError(f"party {party} scored node {self._level[index]} with a gain its split does not have")
        return NodeBest(gain, -1, -1, False)

    @property
    def level(self) -> list[int]:
        return list(self._level)
