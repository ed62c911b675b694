"""Protocols in which the active party scores every candidate split (plain, SecureBoost).

Both share the level loop: announce last level's splits, ask every passive party for the
histograms of this level's nodes while summing its own, score all candidates with the one
gain function, and ask the winner's owner to partition the node. They differ only in how
gradients travel out and histograms travel back, which subclasses provide.

Every received histogram is checked against what the active party already knows: for each
node and feature, bin sums must add up to the node's total gradient, hessian and row count.
A truncated, tampered or inconsistent reply is refused instead of producing a wrong model.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from teeboost.core.columns import PartyColumns
from teeboost.core.constraints import PartyConstraints, PathColumns
from teeboost.core.gradients import EncodedGradients, GradientCodec
from teeboost.core.grower import AppliedSplit, SplitFinder
from teeboost.core.histogram import CHANNELS
from teeboost.core.nodes import NodeRows
from teeboost.core.split import NodeBest, SplitCriteria, SplitInfo, best_splits, left_sums, pick_global_best, sampled_features, valid_split_bin
from teeboost.errors import ProtocolError
from teeboost.policy import Policy, PolicyRefused
from teeboost.protocols.messages import HistogramNote
from teeboost.transport import serde
from teeboost.transport.base import Channel
from teeboost.protocols.enclave.partition import Announcements, HistogramRequest, SplitReply, SplitRequest, apply_announcements, bit_chunks, bits_to_masks, masks_to_bits

__all__ = ["HistogramRequest", "ActiveScoring", "PassiveScoring", "check_histograms"]


def check_histograms(hist: np.ndarray, nodes: list[int], node_rows: NodeRows,
                     gradients: EncodedGradients, party: int, n_value_bins: np.ndarray | None = None) -> None:
    """Every feature's bins must sum to the node's known (G, H, count), and bins the party
    said a feature does not have (handshake) must be empty."""
    if n_value_bins is not None:
        width = hist.shape[2]
        beyond = np.arange(width - 1)[None, :] >= n_value_bins[:, None]  # (features, value bins); last = missing
        if np.any(hist[:, :, :-1, :][:, beyond]):
            raise ProtocolError(f"histograms from party {party} fill bins beyond the bin counts it reported "
                                "(out-of-range bins)")
        if np.any(hist[..., 2] < 0):
            raise ProtocolError(f"histograms from party {party} have negative row counts")
    by_feature = hist.sum(axis=2)  # (nodes, features, 3)
    for i, node in enumerate(nodes):
        rows = node_rows.rows(node)
        if not (by_feature[i] == (*node_rows.totals(node, gradients), rows.size)).all():
            raise ProtocolError(
                f"histograms from party {party} for node {node} do not add up to the node's "
                "totals (tampered, truncated or inconsistent reply)"
            )


def splits_from_winners(nodes: list[int], own: list[NodeBest], parties: np.ndarray, gains: np.ndarray,
                        handles: np.ndarray | None = None) -> list[SplitInfo | None]:
    """An enclave's verdict per node (winning party, -1 for none; winning gain; opaque handle)
    -> what the grower needs. The active party's own wins carry its own (feature, bin)."""
    found: list[SplitInfo | None] = []
    for i, node in enumerate(nodes):
        party = int(parties[i])
        if party < 0:
            found.append(None)
        elif party == 0:
            best = own[i]
            found.append(SplitInfo(node, 0, best.gain, best.feature, best.bin, best.default_left))
        else:
            handle = int(handles[i]) if handles is not None else -1
            found.append(SplitInfo(node, party, float(gains[i]), -1, -1, False, handle=handle))
    return found


class ActiveSplitting(SplitFinder, ABC):
    """What every protocol's active side shares: its own columns, per-tree state, and asking
    winners to partition nodes (and announcing the result to the other parties)."""

    #: whether the one passive party's split request also asks the next level's histograms
    #: (plain, SecureBoost): a level a passive party won costs one round trip, not two
    asks_next_level = False

    def __init__(self, channel: Channel, columns: PartyColumns, criteria: SplitCriteria,
                 passive_bins: dict[int, np.ndarray], passive_categorical: dict[int, np.ndarray], max_bin: int) -> None:
        self.channel = channel
        self.columns = columns
        self.criteria = criteria
        self.passive_bins = passive_bins  # party -> value bins per feature
        self.passive_categorical = passive_categorical  # party -> which features split into category subsets
        self.width = max_bin + 1
        self.announcements = Announcements()
        self._records_seen: dict[int, set[int]] = {}  # party -> record ids it handed out
        self._tree = -1
        self._gradients: EncodedGradients | None = None
        self._node_rows: NodeRows | None = None
        self._worker: ThreadPoolExecutor | None = None
        self.party_constraints: dict[int, PartyConstraints] = {}  # party -> its columns' constraints
        self._paths: dict[int, PathColumns] = {}  # parties whose split columns this host knows
        self._next_level: tuple[int, list[int], Any] | None = None  # (party, nodes, reply) asked ahead

    def constrain(self, by_party: dict[int, PartyConstraints]) -> None:
        """The run's constraints, per party (its own from the parameters, each passive party's
        from its hello). Only parties whose candidates this host scores get path tracking."""
        self.party_constraints = dict(by_party)
        self._paths = {party: PathColumns() for party in self._scored_parties()}

    def _scored_parties(self) -> list[int]:
        """Parties whose candidates this host scores (and so whose winning columns it knows)."""
        return [0]

    def _limits(self, party: int, nodes: list[int], limits) -> dict:
        """``best_splits`` keywords applying the constraints to ``party``'s candidates."""
        constraints = self.party_constraints.get(party)
        if limits is None or constraints is None:
            return {}
        allowed = constraints.allowed(limits.sets_of(nodes), self._paths[party].of(nodes))
        return {"directions": constraints.directions, "bounds": limits.bounds_of(nodes), "allowed": allowed}

    def _applied(self, record: int, went_left: np.ndarray, party: int, split: SplitInfo, reply: Any = None,
                 k: int = 0) -> AppliedSplit:
        """The applied split with its column's public constraints, where this host knows the
        column (subclasses that do not, read them from the owner's ``reply``)."""
        constraints = self.party_constraints.get(party)
        if constraints is None or split.feature < 0:
            return AppliedSplit(record, went_left)
        return AppliedSplit(record, went_left, int(constraints.directions[split.feature]),
                            int(constraints.membership[split.feature]))

    def _track_paths(self, splits: list[SplitInfo], children: list[tuple[int, int]]) -> None:
        for split, (left, right) in zip(splits, children):
            for party, paths in self._paths.items():
                paths.split(split.node_id, left, right, split.feature if party == split.party else -1)

    def _in_background(self, work, *args) -> Future:
        """Run ``work`` (enclave calls, exchanges with passive parties) while this host sums its
        own histograms; one job at a time, in order."""
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="teeboost-protocol")
        return self._worker.submit(work, *args)

    def _stop_background(self) -> None:
        if self._worker is not None:
            self._worker.shutdown(wait=True)
            self._worker = None

    @property
    def codec(self) -> GradientCodec:
        return self._gradients.codec

    @abstractmethod
    def _send_gradients(self, tree_index: int, rows: np.ndarray, gradients: EncodedGradients) -> None:
        """Give every passive party what it needs for this tree's gradients."""

    def begin_tree(self, tree_index, rows, gradients):
        self._tree = tree_index
        self._gradients = gradients
        self.announcements.clear()
        for paths in self._paths.values():
            paths.reset()
        self.columns.begin_tree(gradients)
        self._send_gradients(tree_index, rows, gradients)

    def end_tree(self):
        """The tree's gradients and rows go before the next tree's are encoded."""
        self._next_level = None
        self._gradients = None
        self._node_rows = None
        self.columns.end_tree()

    def apply_splits(self, splits, children, *, next_min_rows=0):
        results: dict[int, AppliedSplit] = {}
        bits: dict[int, np.ndarray] = {}
        by_party: dict[int, list[int]] = {}
        for i, split in enumerate(splits):
            by_party.setdefault(split.party, []).append(i)
        for i in by_party.pop(0, []):
            split = splits[i]
            record, went_left = self.columns.apply(self._node_rows.rows(split.node_id), split.feature,
                                                   split.bin, split.default_left, self._tree)
            results[i] = self._applied(record, went_left, 0, split)
            left_totals = self.columns.left_totals(split.node_id, split.feature, split.bin, split.default_left)
            if left_totals is not None:  # its own histogram's, not summed again over the rows
                self._node_rows.remember_totals(children[i][0], self._gradients, left_totals)
            bits[i] = np.packbits(went_left)
        requests = {party: self._split_request(party, [splits[i] for i in idx], [children[i] for i in idx])
                    for party, idx in by_party.items()}
        ahead = self.asks_next_level and next_min_rows > 0 and len(self.channel.parties) == 1 and len(requests) == 1
        if ahead:  # the level's own splits announced with it, and the next level asked at once
            (party,) = requests
            for i in range(len(splits)):
                if splits[i].party == 0:
                    self.announcements.add(0, splits[i].node_id, children[i][0], children[i][1], bits[i])
            requests[party] = dataclasses.replace(requests[party], next_min_rows=int(next_min_rows),
                                                  **self.announcements.for_party(party))
            self.announcements.clear()
        replies = self.channel.request_all(requests) if requests else {}
        for party, idx in by_party.items():
            reply = replies[party]
            if not isinstance(reply, SplitReply) or reply.tree != self._tree or reply.records.size != len(idx):
                raise ProtocolError(f"party {party} did not return one record per split")
            parents = [self._node_rows.rows(splits[i].node_id) for i in idx]
            sizes = [parent.size for parent in parents]
            masks = bits_to_masks(sizes, reply.left_bits, f"split reply of party {party}")
            chunks = bit_chunks(sizes, reply.left_bits)
            seen = self._records_seen.setdefault(party, set())
            for k, (i, record, parent, went_left, chunk) in enumerate(zip(idx, reply.records, parents, masks, chunks)):
                record = int(record)
                if record < 0 or record in seen:
                    raise ProtocolError(f"party {party} returned split record id {record}, which is "
                                        f"{'negative' if record < 0 else 'already in use'}")
                n_left = int(np.count_nonzero(went_left))
                if not 0 < n_left < parent.size:
                    raise ProtocolError(f"party {party} split node {splits[i].node_id} into an empty child")
                self._check_left(party, splits[i], parent, went_left, children[i][0])
                seen.add(record)
                results[i] = self._applied(record, went_left, party, splits[i], reply, k)
                bits[i] = chunk
        ordered = [results[i] for i in range(len(splits))]
        self._track_paths(splits, children)
        if ahead:
            reply = replies[party]
            nodes = [int(n) for n in reply.next_nodes]
            self._next_level = (party, nodes, serde.decode(bytes(reply.next_level)) if nodes else None)
            return ordered
        for i, (split, (left_id, right_id)) in enumerate(zip(splits, children)):
            self.announcements.add(split.party, split.node_id, left_id, right_id, bits[i])
        return ordered

    def _check_left(self, party: int, split: SplitInfo, parent: np.ndarray, went_left: np.ndarray,
                    left_id: int) -> None:
        """Protocols that saw the winner's histogram check its partition against it."""

    def _split_request(self, party: int, splits: list[SplitInfo], children: list[tuple[int, int]]) -> Any:
        """How this protocol names the splits a passive party won."""
        return SplitRequest(
            self._tree,
            np.array([s.node_id for s in splits], dtype=np.int32),
            np.array([c[0] for c in children], dtype=np.int32),
            np.array([c[1] for c in children], dtype=np.int32),
            np.array([s.feature for s in splits], dtype=np.int32),
            np.array([s.bin for s in splits], dtype=np.int64),
            np.array([s.default_left for s in splits], dtype=bool),
            np.array([max(s.handle, 0) for s in splits], dtype=np.uint64),
        )


class ActiveScoring(ActiveSplitting, ABC):
    """The active party scores every split from histograms (plain, SecureBoost)."""

    asks_next_level = True

    @abstractmethod
    def _histograms(self, party: int, reply: Any, nodes: list[int]) -> np.ndarray:
        """A passive party's reply -> int64 (nodes, features, width, 3) exact sums."""

    def expected_shape(self, party: int, n_nodes: int) -> tuple[int, ...]:
        return (n_nodes, self.passive_bins[party].size, self.width, CHANNELS)

    def _check_left(self, party: int, split: SplitInfo, parent: np.ndarray, went_left: np.ndarray,
                    left_id: int) -> None:
        """The left rows a winner reports must have the (G, H, count) its own histogram
        promised for that split: a party cannot partition differently from what it scored.
        The totals summed here are the left child's (``NodeRows.remember_totals``)."""
        nodes, hist = self._level_histograms[party]
        column = hist[nodes.index(split.node_id), split.feature]  # (width, 3)
        expected = left_sums(column, split.bin, split.default_left, bool(self.passive_categorical[party][split.feature]))
        g, h = self._gradients.totals_where(parent, went_left)
        if (int(expected[0]), int(expected[1]), int(expected[2])) != (int(g), int(h), int(np.count_nonzero(went_left))):
            raise ProtocolError(f"party {party} partitioned node {split.node_id} differently from the split its "
                                "histogram scored")
        self._node_rows.remember_totals(left_id, self._gradients, (g, h))

    def _scored_parties(self) -> list[int]:
        return [0, *self.channel.parties]

    def find_splits(self, nodes, node_rows, limits=None):
        self._node_rows = node_rows
        self._level_histograms: dict[int, tuple[list[int], np.ndarray]] = {}
        ahead, self._next_level = self._next_level, None
        if ahead is not None and ahead[1] != list(nodes):  # its reply to the split request named the level
            raise ProtocolError(f"party {ahead[0]} answered the next level for nodes {ahead[1]}, but the level "
                                f"searches nodes {list(nodes)}")
        requests = {
            party: HistogramRequest(self._tree, np.array(nodes, dtype=np.int32),
                                    **self.announcements.for_party(party))
            for party in self.channel.parties if ahead is None or party != ahead[0]
        }
        self.announcements.clear()
        pending = self.channel.submit_all(requests) if requests else None
        own = self.columns.best(nodes, node_rows, self.codec, self.criteria,
                                sampled_features(self.criteria, 0, self._tree, self.columns.n_features),
                                **self._limits(0, nodes, limits))
        replies = pending.result() if pending is not None else {}
        if ahead is not None:
            replies[ahead[0]] = ahead[2]
        candidates: list[list[tuple[int, NodeBest]]] = [[(0, best)] for best in own]
        for party, reply in sorted(replies.items()):
            if getattr(reply, "tree", None) != self._tree:
                raise ProtocolError(f"party {party} answered for tree {getattr(reply, 'tree', None)}, "
                                    f"not tree {self._tree}")
            hist = self._histograms(party, reply, nodes)
            if hist.shape != self.expected_shape(party, len(nodes)):
                raise ProtocolError(f"party {party} sent histograms of shape {hist.shape}, "
                                    f"expected {self.expected_shape(party, len(nodes))}")
            check_histograms(hist, nodes, node_rows, self._gradients, party, self.passive_bins[party])
            self._level_histograms[party] = (nodes, hist)
            if self.channel.transcript is not None:
                self.channel.transcript.note(HistogramNote(self._tree, party, np.array(nodes, dtype=np.int32), hist))
            sampled = sampled_features(self.criteria, party, self._tree, self.passive_bins[party].size)
            for i, best in enumerate(best_splits(hist, self.passive_bins[party], self.codec, self.criteria,
                                                 self.passive_categorical[party], sampled,
                                                 **self._limits(party, nodes, limits))):
                candidates[i].append((party, best))
        found: list[SplitInfo | None] = []
        for node, node_candidates in zip(nodes, candidates):
            winner = pick_global_best(node_candidates)
            if winner is None:
                found.append(None)
            else:
                party, best = winner
                found.append(SplitInfo(node, party, best.gain, best.feature, best.bin, best.default_left))
        return found


class PassiveScoring(ABC):
    """Passive side: tracks node rows, answers histogram requests, applies its own splits."""

    handles: tuple[type, ...] = (HistogramRequest, SplitRequest)

    def __init__(self, columns: PartyColumns) -> None:
        self.columns = columns
        self._tree = -1
        self._node_rows: NodeRows | None = None
        self._party, self._policy, self._max_depth = "this party", Policy.unrestricted(), None

    def bind_policy(self, party: str, policy: Policy, max_depth: int | None = None) -> None:
        """Partitions this party computes are checked against its policy before they leave:
        at least k rows a side, and no split of a node at the run's depth or below."""
        self._party, self._policy, self._max_depth = party, policy, max_depth

    @abstractmethod
    def _begin_tree(self, msg: Any) -> Any:
        """Handle the protocol's per-tree gradient message; call ``_open_tree``."""

    @abstractmethod
    def _level(self, nodes: list[int], node_rows: NodeRows) -> Any:
        """This level's histogram reply for ``nodes``."""

    def _open_tree(self, tree: int, rows: np.ndarray) -> None:
        self._node_rows = NodeRows(self.columns.n_rows)
        self._node_rows.set_root(rows)
        self._tree = tree

    def handle(self, msg: Any) -> Any:
        if not isinstance(msg, (HistogramRequest, SplitRequest)):
            return self._begin_tree(msg)
        if isinstance(msg, HistogramRequest):
            return self._level(self._enter_level(msg), self._node_rows)
        self._check_tree(msg)
        if not msg.next_min_rows:
            return self._split(msg)
        return self._split_then_level(msg)

    #: answers a split request with the next level's histograms (plain, SecureBoost)
    answers_next_level = False

    def _split_then_level(self, msg: SplitRequest) -> SplitReply:
        """The level's other splits applied, this party's own, then the next level's histograms
        for every child holding at least ``next_min_rows`` rows, in id order: the nodes the
        active party's grower searches next, which it checks against these."""
        if not self.answers_next_level:
            raise ProtocolError("this protocol does not answer the next level with a split request")
        if msg.next_min_rows < 1:
            raise ProtocolError(f"a split request asks the next level's nodes of at least {msg.next_min_rows} rows")
        apply_announcements(self._node_rows, msg)
        reply = self._split(msg)
        children = [int(c) for pair in zip(msg.split_lefts, msg.split_rights) for c in pair]
        children += [int(c) for pair in zip(msg.lefts, msg.rights) for c in pair]
        nodes = sorted(c for c in children if self._node_rows.size(c) >= msg.next_min_rows)
        level = self._level(nodes, self._node_rows) if nodes else None
        return dataclasses.replace(reply, next_nodes=np.array(nodes, dtype=np.int32),
                                   next_level=serde.encode(level) if level is not None else b"")

    def _check_tree(self, msg: Any) -> None:
        if msg.tree != self._tree or self._node_rows is None:
            raise ProtocolError(f"{type(msg).__name__} for tree {msg.tree}, but tree {self._tree} is open")

    def _enter_level(self, msg: HistogramRequest) -> list[int]:
        """Apply last level's announced partitions; this level's nodes (known ones only)."""
        self._check_tree(msg)
        apply_announcements(self._node_rows, msg)
        nodes = [int(n) for n in msg.nodes]
        for node in nodes:
            self._node_rows.rows(node)  # unknown node ids are refused here
        return nodes

    def _split(self, msg: SplitRequest) -> SplitReply:
        n = msg.nodes.size
        if not all(a.size == n for a in (msg.lefts, msg.rights, msg.features, msg.bins, msg.default_left,
                                         msg.handles)):
            raise ProtocolError("split request arrays differ in length")
        n_bins = self.columns.bins.n_value_bins
        records, masks = [], []
        for node, left_id, right_id, feature, bin_, default_left in zip(
            msg.nodes, msg.lefts, msg.rights, msg.features, msg.bins, msg.default_left
        ):
            if not 0 <= feature < self.columns.n_features:
                raise ProtocolError(f"split request names feature {feature}; this party has {self.columns.n_features}")
            if not valid_split_bin(int(bin_), int(n_bins[feature]), self.columns.bins.is_categorical(int(feature))):
                raise ProtocolError(f"split request names bin {bin_}, not a split point of feature {feature}")
            rows = self._node_rows.rows(int(node))
            depth = self._node_rows.depth(int(node))
            if self._max_depth is not None and depth >= self._max_depth:
                raise PolicyRefused(self._party, "max_depth", f"a split of node {int(node)} at depth {depth} would "
                                    f"grow the tree beyond depth {self._max_depth}")
            record, went_left = self.columns.apply(rows, int(feature), int(bin_), bool(default_left), self._tree)
            self._policy.check_partition(self._party, rows.size, int(np.count_nonzero(went_left)))
            self._node_rows.split_mask(int(node), int(left_id), int(right_id), went_left)
            records.append(record)
            masks.append(went_left)
        return SplitReply(self._tree, np.array(records, dtype=np.int64), masks_to_bits(masks))
