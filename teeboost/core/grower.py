"""Level-wise tree growth that delegates split finding.

The grower decides *which* nodes may split and computes leaf weights from the active
party's own gradients; a ``SplitFinder`` decides *how* the best split is found (in the
clear, under Paillier, inside enclaves). The grower never sees a histogram, a ciphertext
or a socket, which is what lets every protocol be checked against the same reference.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from ..config import BoostParams
from .constraints import ALL_SETS, child_bounds, child_sets
from .gradients import EncodedGradients
from .nodes import NodeRows
from .split import SplitCriteria, SplitInfo
from .tree import Tree

__all__ = ["SplitFinder", "AppliedSplit", "NodeLimits", "TreeGrower", "GrownTree"]


@dataclass(frozen=True)
class AppliedSplit:
    """What the owner of a split returns: its record id and the left instance set, as a
    boolean over the node's rows in row order (True: left), which cannot name a row outside it.
    Under constraints, also the split column's public monotone direction and the mask of the
    interaction sets holding it (what the children's limits follow from)."""

    record: int
    went_left: np.ndarray
    direction: int = 0
    membership: int = 0


@dataclass
class NodeLimits:
    """Per node of the tree being grown, what constraints leave it (``teeboost.core.constraints``):
    bounds on its weight and its interaction state (the sets still holding its whole path)."""

    bounds: dict[int, tuple[float, float]] = field(default_factory=lambda: {0: (-np.inf, np.inf)})
    sets: dict[int, int] = field(default_factory=lambda: {0: ALL_SETS})

    def bounds_of(self, nodes) -> np.ndarray:
        """float (nodes, 2): lower and upper weight of each node."""
        return np.array([self.bounds[int(n)] for n in nodes], dtype=np.float64).reshape(len(nodes), 2)

    def sets_of(self, nodes) -> np.ndarray:
        return np.array([self.sets[int(n)] for n in nodes], dtype=np.int64)


class SplitFinder(ABC):
    """How a protocol finds and applies splits; one instance serves a whole training run."""

    @abstractmethod
    def begin_tree(self, tree_index: int, rows: np.ndarray, gradients: EncodedGradients) -> None:
        """A new tree over sampled ``rows`` with these gradients starts."""

    @abstractmethod
    def find_splits(self, nodes: list[int], node_rows: NodeRows, limits: NodeLimits | None = None
                    ) -> list[SplitInfo | None]:
        """Best split of each node (None: no split improves the objective), within the nodes'
        ``limits`` when the run has constraints."""

    @abstractmethod
    def apply_splits(self, splits: list[SplitInfo], children: list[tuple[int, int]], *,
                     next_min_rows: int = 0) -> list[AppliedSplit]:
        """Ask each winner's owner to record its split and partition the node. ``next_min_rows``:
        the next level will search every child holding at least that many rows (0: this is the
        last level), which a protocol may ask for in the same round trip."""

    def end_tree(self) -> None:
        """The tree is complete (protocols may release per-tree state)."""

    def constrain(self, by_party: dict) -> None:
        """The run's constraints, per party (0: active; ``PartyConstraints``). Every protocol's
        finder applies them where it scores candidates."""
        raise NotImplementedError(f"{type(self).__name__} does not apply monotone or interaction constraints")

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
        self.constrained = params.constraints.any

    def _weight(self, gradients: EncodedGradients, totals: tuple[int, int], bounds=(None, None)) -> float:
        g_sum, h_sum = totals
        g = float(gradients.codec.decode(g_sum))
        h = float(gradients.codec.decode(h_sum))
        return float(self.criteria.weight(g, h, *bounds))

    def _limit_children(self, limits: NodeLimits, gradients: EncodedGradients, nodes: NodeRows, parent: int,
                        left: int, right: int, applied: AppliedSplit) -> None:
        """The children's bounds and interaction state, as XGBoost's TreeEvaluator.AddSplit and
        FeatureInteractionConstraintHost.Split set them."""
        bounds = limits.bounds[parent]
        w_left = self._weight(gradients, nodes.totals(left, gradients), bounds)
        w_right = self._weight(gradients, nodes.totals(right, gradients), bounds)
        limits.bounds[left], limits.bounds[right] = child_bounds(*bounds, int(applied.direction), w_left, w_right)
        limits.sets[left] = limits.sets[right] = child_sets(limits.sets[parent], int(applied.membership))

    @staticmethod
    def _cover(gradients: EncodedGradients, nodes: NodeRows, node: int) -> float:
        return float(gradients.codec.decode(nodes.totals(node, gradients)[1]))

    def grow(
        self, tree_index: int, output: int, rows: np.ndarray, gradients: EncodedGradients
    ) -> GrownTree:
        params = self.params
        tree = Tree(output=output)
        nodes = NodeRows(self.n_rows)
        nodes.set_root(rows)
        tree.n_rows[0] = int(rows.size)
        tree.cover[0] = self._cover(gradients, nodes, 0)
        self.finder.begin_tree(tree_index, rows, gradients)
        limits = NodeLimits() if self.constrained else None
        frontier = [0]
        try:
            for _depth in range(params.max_depth):
                splittable = [n for n in frontier if nodes.size(n) >= 2 * params.min_samples_leaf]
                if not splittable:
                    break
                found = self.finder.find_splits(splittable, nodes, limits)
                chosen = [s for s in found if s is not None]
                if not chosen:
                    break
                children = [(tree.n_nodes + 2 * i, tree.n_nodes + 2 * i + 1) for i in range(len(chosen))]
                last = _depth + 1 >= params.max_depth
                applied = self.finder.apply_splits(chosen, children,
                                                   next_min_rows=0 if last else 2 * params.min_samples_leaf)
                next_frontier: list[int] = []
                for split, (left, right), result in zip(chosen, children, applied):
                    made = tree.add_split(split.node_id, split.party, result.record, split.gain)
                    assert made == (left, right)
                    nodes.split_mask(split.node_id, left, right, result.went_left)
                    tree.n_rows[left] = nodes.size(left)
                    tree.n_rows[right] = nodes.size(right)
                    tree.cover[left] = self._cover(gradients, nodes, left)
                    tree.cover[right] = self._cover(gradients, nodes, right)
                    if limits is not None:
                        self._limit_children(limits, gradients, nodes, split.node_id, left, right, result)
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
                bounds = limits.bounds[node] if limits is not None else (None, None)
                weight = self._weight(gradients, nodes.totals(node, gradients), bounds)
                tree.value[node] = weight * self.params.learning_rate
        return GrownTree(tree, leaf_rows)
