"""Level-wise tree growth that delegates split finding.

The grower decides *which* nodes may split and computes leaf weights from the active
party's own gradients; a ``SplitFinder`` decides *how* the best split is found (in the
clear, under Paillier, inside enclaves). The grower never sees a histogram, a ciphertext
or a socket, which is what lets every protocol be checked against the same reference.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from ..config import BoostParams
from .gradients import EncodedGradients
from .nodes import NodeRows
from .split import SplitCriteria, SplitInfo
from .tree import Tree

__all__ = ["SplitFinder", "AppliedSplit", "TreeGrower", "GrownTree"]


@dataclass(frozen=True)
class AppliedSplit:
    """What the owner of a split returns: its record id and the left instance set, as a
    boolean over the node's rows in row order (True: left), which cannot name a row outside it."""

    record: int
    went_left: np.ndarray


class SplitFinder(ABC):
    """How a protocol finds and applies splits; one instance serves a whole training run."""

    @abstractmethod
    def begin_tree(self, tree_index: int, rows: np.ndarray, gradients: EncodedGradients) -> None:
        """A new tree over sampled ``rows`` with these gradients starts."""

    @abstractmethod
    def find_splits(self, nodes: list[int], node_rows: NodeRows) -> list[SplitInfo | None]:
        """Best split of each node (None: no split improves the objective)."""

    @abstractmethod
    def apply_splits(self, splits: list[SplitInfo], children: list[tuple[int, int]]) -> list[AppliedSplit]:
        """Ask each winner's owner to record its split and partition the node."""

    def end_tree(self) -> None:
        """The tree is complete (protocols may release per-tree state)."""

    def expect_trees(self, total: int) -> None:
        """The run grows at most ``total`` trees (tree indices below it), so work prepared
        ahead for a next tree is not wasted after the last."""

    def sealed_state(self, run_id: str) -> bytes | None:
        """State only an enclave holds that a resumed run needs, sealed by that enclave
        (opaque to the host); None if the protocol carries none across rounds."""
        return None

    def restore_sealed_state(self, run_id: str, blob: bytes) -> None:
        """Give a resumed run's enclave back what ``sealed_state`` saved."""

    def close(self) -> None:
        """Training is over: release processes and keys."""


@dataclass
class GrownTree:
    tree: Tree
    leaf_rows: dict[int, np.ndarray]  # leaf node -> sampled rows that landed there


class TreeGrower:
    """Grows one tree at a time, level by level, up to ``max_depth``."""

    def __init__(self, finder: SplitFinder, params: BoostParams, n_rows: int) -> None:
        self.finder = finder
        self.params = params
        self.n_rows = n_rows
        self.criteria = SplitCriteria.from_params(params)  # leaf weights by the gains' own weight function

    def _leaf_value(self, gradients: EncodedGradients, rows: np.ndarray) -> float:
        g_sum, h_sum = gradients.totals(rows)
        g = float(gradients.codec.decode(g_sum))
        h = float(gradients.codec.decode(h_sum))
        return float(self.criteria.weight(g, h)) * self.params.learning_rate

    @staticmethod
    def _cover(gradients: EncodedGradients, rows: np.ndarray) -> float:
        return float(gradients.codec.decode(int(gradients.h[rows].sum())))

    def grow(
        self, tree_index: int, output: int, rows: np.ndarray, gradients: EncodedGradients
    ) -> GrownTree:
        params = self.params
        tree = Tree(output=output)
        nodes = NodeRows(self.n_rows)
        nodes.set_root(rows)
        tree.n_rows[0] = int(rows.size)
        tree.cover[0] = self._cover(gradients, rows)
        self.finder.begin_tree(tree_index, rows, gradients)
        frontier = [0]
        try:
            for _depth in range(params.max_depth):
                splittable = [n for n in frontier if nodes.size(n) >= 2 * params.min_samples_leaf]
                if not splittable:
                    break
                found = self.finder.find_splits(splittable, nodes)
                chosen = [s for s in found if s is not None]
                if not chosen:
                    break
                children = [(tree.n_nodes + 2 * i, tree.n_nodes + 2 * i + 1) for i in range(len(chosen))]
                applied = self.finder.apply_splits(chosen, children)
                next_frontier: list[int] = []
                for split, (left, right), result in zip(chosen, children, applied):
                    made = tree.add_split(split.node_id, split.party, result.record, split.gain)
                    assert made == (left, right)
                    nodes.split_mask(split.node_id, left, right, result.went_left)
                    tree.n_rows[left] = nodes.size(left)
                    tree.n_rows[right] = nodes.size(right)
                    tree.cover[left] = self._cover(gradients, nodes.rows(left))
                    tree.cover[right] = self._cover(gradients, nodes.rows(right))
                    next_frontier += [left, right]
                nodes.forget([s.node_id for s in chosen])
                frontier = next_frontier
        finally:
            self.finder.end_tree()

        leaf_rows: dict[int, np.ndarray] = {}
        for node in range(tree.n_nodes):
            if tree.is_leaf(node):
                node_rows = nodes.rows(node)
                leaf_rows[node] = node_rows
                tree.value[node] = self._leaf_value(gradients, node_rows)
        return GrownTree(tree, leaf_rows)
