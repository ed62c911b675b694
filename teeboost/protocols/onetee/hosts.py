"""1-TEE (seed paper, with a real one-time pad): one enclave, at the active party.

Setup: each passive party's host attests the active party's enclave (quote, measurement,
freshness, key binding) and opens an AES-GCM channel to it; nothing else can read what it
seals. Then, by default (``onetee_bins_once``), each passive party seals its bin of every row
per feature to the enclave once; per tree the enclave seals each passive party the tree's rows,
per level the partitions it did not make, and sums every party's histograms itself (in
parallel with its host, which sums its own). With index sets instead (the seed paper's), per
tree the enclave masks every sampled row's fixed-point g and h with fresh uniform pads in
Z_2^64 (the paper's real-valued pad does not hide; a ring pad does), the host sends the masked
values to the passive parties, and per level each passive party sums masked values per node x
feature x bin with wrap-around arithmetic and seals the sums with the index sets behind them;
the enclave removes the pads and checks. Either way the enclave scores all splits and releases
only the winner. The active host sees sealed records, winners and left instance sets; the
winning passive party alone learns which of its splits won.

Passive parties keep control of what is computed over their bins: in bins-once runs each
acknowledges every record the enclave seals to it (in the reply it sends anyway), only within
its policy, and the enclave computes no level before it has every party's acknowledgement of
its last record. The channel opens only for the run the handshake named; each party's sealing
value (kept in its own checkpoint) lets the enclave's checkpoint open only in a run the party
resumed.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

import numpy as np

from teeboost.compute import RowShards, row_jobs, take_rows
from teeboost.core.grower import AppliedSplit
from teeboost.core.histogram import plan_level
from teeboost.core.histogram_jobs import ShardedHistogramBuilder
from teeboost.core.offload import job_rows, offloads
from teeboost.core.split import N_CRITERIA, SplitCriteria
from teeboost.errors import CheckpointError, ProtocolError
from teeboost.protocols.messages import Ack
from teeboost.policy import PolicyRefused
from teeboost.tee.channel import ChannelInitiator, SecureChannel, party_statement
from teeboost.tee.quote import QuoteVerifier
from teeboost.transport import serde
from teeboost.transport.serde import array_field, message
from teeboost.protocols.enclave import messages as em
from teeboost.protocols.env import ProtocolEnv, check_party_keys, criteria_tuple, enclave_code, init_message
from teeboost.protocols.ntee.hosts import EnclaveFinish, EnclaveHello, SealedMessage, gradients_in, own_candidates
from teeboost.protocols.enclave.limits import limits_fields, own_directions, won_constraints
from teeboost.protocols.enclave.partition import SplitRequest, check_rows, decode_row_sets, encode_row_sets
from teeboost.protocols.onetee.enclave.ring import ring_bincount
from teeboost.protocols.scoring.level_loop import ActiveSplitting, HistogramRequest, PassiveScoring, splits_from_winners

__all__ = ["OneTeeActive", "OneTeePassive", "ChannelOpen", "ChannelAccept", "MaskedGradients", "SealedSplitRequest"]

PROGRAM = "teeboost.protocols.onetee.enclave.program"


def _masked_sums_job(bins, bin_positions, gh, gh_positions, width: int, with_order: bool) -> tuple:
    """One job of a node's index-set sums: per feature the masked (g, h) ring sums by bin,
    and (``with_order``) the rows' counts by bin and their stable order by bin."""
    bins = take_rows(bins, bin_positions, 1)
    gh = take_rows(gh, gh_positions, 0)
    n_features, n_rows = bins.shape
    sums = np.zeros((n_features, width, 2), dtype=np.uint64)
    counts = np.zeros((n_features, width), dtype=np.int64)
    order = np.zeros((n_features, n_rows if with_order else 0), dtype=np.int64)
    for f in range(n_features):
        b = bins[f].astype(np.intp)
        sums[f, :, 0] = ring_bincount(b, gh[:, 0], width)
        sums[f, :, 1] = ring_bincount(b, gh[:, 1], width)
        if with_order:
            counts[f] = np.bincount(b, minlength=width)
            order[f] = np.argsort(b, kind="stable")
    return sums, counts, order


@message
@dataclass(frozen=True)
class ChannelOpen:
    """Active -> passive: attest my enclave and open a channel to it; the run parameters its
    enclave was initialised with (their hash is bound into its quote)."""

    send_bins: bool
    run_id: str
    max_bin: int
    aes_bits: int
    criteria: list[float]
    party_keys: np.ndarray = array_field("uint8", 2)


@message
@dataclass(frozen=True)
class ChannelAccept:
    """Active -> passive: the enclave's quote, key share and nonce."""

    reply: bytes


@message
@dataclass(frozen=True)
class MaskedGradients:
    """One tree's masked gradients of the sampled rows (uniform in Z_2^64: they hide g, h)."""

    tree: int
    n_rows: int
    row_encoding: np.ndarray = array_field("uint8", 1)
    row_offsets: np.ndarray = array_field("int64", 1)
    row_payload: np.ndarray = array_field("uint8", 1)
    g: np.ndarray = array_field("uint64", 1)
    h: np.ndarray = array_field("uint64", 1)


@message
@dataclass(frozen=True)
class SealedSplitRequest:
    """Active -> winning passive: partition these nodes; which split won is sealed by the enclave."""

    tree: int
    nodes: np.ndarray = array_field("int32", 1)
    lefts: np.ndarray = array_field("int32", 1)  # must be the ids sealed in the record
    rights: np.ndarray = array_field("int32", 1)
    record: bytes


class OneTeeActive(ActiveSplitting):
    def __init__(self, channel, columns, criteria, passive_bins, passive_categorical, max_bin,
                 env: ProtocolEnv) -> None:
        super().__init__(channel, columns, criteria, passive_bins, passive_categorical, max_bin)
        self.timer: dict[str, float] = {}
        started = time.perf_counter()
        self.bins_once = env.options.onetee_bins_once
        self._won: dict[int, tuple[int, int]] = {}  # node -> a passive winner's column's (direction, sets)
        code = enclave_code(PROGRAM, env.trusted_roots, env.options)
        self.enclave = env.backend().load(code, label="active")
        self.enclave.ecall("init", init_message("onetee", "active", 0, criteria, max_bin, env, env.run_id))
        if criteria.constraints:  # which constrained names this party holds, checked in the enclave
            self.enclave.ecall("own_names", json.dumps(columns.names).encode())
        keys = env.keys_array()
        for party in self.channel.parties:
            prefix = party.to_bytes(4, "big")
            hello = self.channel.request(party, ChannelOpen(self.bins_once, env.run_id, max_bin, env.options.aes_bits,
                                                            list(criteria_tuple(criteria)), keys))
            final = self.channel.request(party, ChannelAccept(self.enclave.ecall("respond", prefix + hello.hello)))
            if not isinstance(final, EnclaveFinish):
                raise ProtocolError(f"party {party} did not finish the enclave handshake")
            self.enclave.ecall("finish_responder", prefix + em.pack_records(
                {0: final.final, 1: final.signature, 2: final.record}))
        self._bins_held: set[int] = set()  # parties whose bin assignments the enclave holds
        self._sealed: tuple[str, bytes] | None = None
        self._locators: dict[int, bytes] = {}
        self._gradients_in: bytes | None = None  # bins-once: this tree's, until the root's level
        self._acks: dict[int, np.ndarray] = {}  # bins-once: passive acknowledgements of the last level's records
        self.timer["enclave setup"] = time.perf_counter() - started

    def _collect_bins(self) -> None:
        """Bins-once: fetch bin assignments the enclave does not hold yet (all of them at the
        start of a run, none after a resume that restored the enclave's sealed state)."""
        for party in self.channel.parties:
            if party not in self._bins_held:
                bins = self.channel.request(party, SealedMessage(-1, "bins", b""))
                self.enclave.ecall("bins_once", party.to_bytes(4, "big") + memoryview(bins.record))
                self._bins_held.add(party)

    def sealed_state(self, run_id):
        if not self.bins_once:
            return None  # nothing but session keys, which a restarted enclave renegotiates
        if self._sealed is None or self._sealed[0] != run_id:  # the bins never change within a run
            self._sealed = (run_id, bytes(self.enclave.ecall("checkpoint", b"")))
        return self._sealed[1]

    def restore_sealed_state(self, run_id, blob):
        if not self.bins_once:
            return
        restored = np.frombuffer(self.enclave.ecall("restore", blob), dtype=np.int64)
        self._bins_held = {int(p) for p in restored} & set(self.channel.parties)

    def _send_gradients(self, tree_index, rows, gradients):
        if self.bins_once:  # sent with the root's level, while this host sums its own root histograms
            self._collect_bins()
            self._gradients_in = gradients_in(tree_index, rows, gradients)
            return
        masked = serde.decode(self.enclave.ecall("mask", gradients_in(tree_index, rows, gradients)))
        encoding, offsets, payload = encode_row_sets([rows], gradients.g.size)
        msg = MaskedGradients(tree_index, gradients.g.size, encoding, offsets, payload, masked.g, masked.h)
        self.channel.request_all({p: msg for p in self.channel.parties})

    def find_splits(self, nodes, node_rows, limits=None):
        self._node_rows = node_rows
        if self.bins_once:
            return self._find_summed_in_enclave(nodes, node_rows, limits)
        requests = {p: HistogramRequest(self._tree, np.array(nodes, dtype=np.int32), **self.announcements.for_party(p))
                    for p in self.channel.parties}
        announced = self.announcements.for_all()
        self.announcements.clear()
        pending = self.channel.submit_all(requests)
        mine = self._limits(0, nodes, limits)
        own, valid, left = own_candidates(self.columns, nodes, node_rows, self.codec, self.criteria, self._tree,
                                          **mine)
        replies = pending.result()
        records = {}
        for party, reply in replies.items():
            if not isinstance(reply, SealedMessage) or reply.kind != "sums" or reply.tree != self._tree:
                raise ProtocolError(f"party {party} did not answer the level request with sealed sums")
            records[party] = reply.record
        chosen = serde.decode(self.enclave.ecall("choose", serde.encode(em.OneTeeChooseIn(
            self._tree, np.array(nodes, dtype=np.int32), **announced, own_valid=valid, own_left=left,
            records=np.frombuffer(em.pack_records(records), dtype=np.uint8), own_directions=own_directions(own, mine),
            **limits_fields(limits, nodes)))))
        self._locators = em.unpack_records(chosen.records.tobytes())
        self._won = won_constraints(nodes, chosen)
        return splits_from_winners(nodes, own, chosen.parties, chosen.gains)

    def _applied(self, record, went_left, party, split, reply=None, k=0):
        if party == 0 or split.node_id not in self._won:
            return super()._applied(record, went_left, party, split, reply, k)
        return AppliedSplit(record, went_left, *self._won[split.node_id])

    def _find_summed_in_enclave(self, nodes, node_rows, limits=None):
        """Bins-once: the enclave checks last level's partitions, seals each passive party its
        level request and sums the passive parties' histograms while this host sums its own;
        then, given this host's best splits, it names the winners."""
        level = serde.encode(em.LevelIn(self._tree, np.array(nodes, dtype=np.int32), **self.announcements.for_all(),
                                        **limits_fields(limits, nodes)))
        self.announcements.clear()
        pending = self._in_background(self._level_exchange, level)
        mine = self._limits(0, nodes, limits)
        own, valid, left = own_candidates(self.columns, nodes, node_rows, self.codec, self.criteria, self._tree,
                                          **mine)
        pending.result()
        chosen = serde.decode(self.enclave.ecall("choose_own", serde.encode(em.OwnSplitsIn(
            self._tree, np.array(nodes, dtype=np.int32), valid, left, own_directions(own, mine)))))
        self._locators = em.unpack_records(chosen.records.tobytes())
        self._won = won_constraints(nodes, chosen)
        return splits_from_winners(nodes, own, chosen.parties, chosen.gains)

    def _level_exchange(self, level: bytes) -> None:
        """The enclave's side of a level: the tree's gradients first if it just began (each
        passive party gets the tree's rows), then the level (each gets its partitions). Each
        passive party answers each record with a sealed acknowledgement, without which the
        enclave computes nothing more: the last level's before a tree or level, the rows'
        before the tree's first level."""
        gradients, self._gradients_in = self._gradients_in, None
        if gradients is not None:
            self._pass_acks()
            records = em.record_views(self.enclave.ecall("gradients", gradients))
            del gradients
            self._acks = self._acknowledged("rows", self.channel.request_all(
                {p: SealedMessage(self._tree, "rows", r) for p, r in records.items()}))
        self._pass_acks()
        records = em.record_views(self.enclave.ecall("level", level))
        self._acks = self._acknowledged("level", self.channel.request_all(
            {p: SealedMessage(self._tree, "level", r) for p, r in records.items()}))

    def _acknowledged(self, kind: str, replies: dict) -> dict[int, np.ndarray]:
        for party, reply in replies.items():
            if not isinstance(reply, SealedMessage) or reply.kind != "ack" or reply.tree != self._tree:
                raise ProtocolError(f"party {party} did not acknowledge the enclave's {kind} record")
        return {p: r.record for p, r in replies.items()}

    def _pass_acks(self) -> None:
        if self._acks:
            acks, self._acks = self._acks, {}
            self.enclave.ecall("acks", em.pack_records({p: bytes(r) for p, r in acks.items()}))

    def _split_request(self, party, splits, children):
        record = self._locators.pop(party, None)
        if record is None:
            raise ProtocolError(f"the enclave released no split locator for party {party}")
        return SealedSplitRequest(self._tree, np.array([s.node_id for s in splits], dtype=np.int32),
                                  np.array([c[0] for c in children], dtype=np.int32),
                                  np.array([c[1] for c in children], dtype=np.int32), record)

    def close(self) -> None:
        self._stop_background()
        self.enclave.close()


class OneTeePassive(PassiveScoring):
    handles = PassiveScoring.handles + (ChannelOpen, ChannelAccept, SealedMessage, MaskedGradients, SealedSplitRequest)

    def __init__(self, columns, env: ProtocolEnv, index: int) -> None:
        super().__init__(columns)
        self.timer: dict[str, float] = {}
        code = enclave_code(PROGRAM, env.trusted_roots, env.options)
        # the measurement this party expects of the active party's enclave (published code)
        # hardware deployments check Intel-signed quotes against their [attestation] policy
        self._verifier = env.hardware_verifier or QuoteVerifier(list(env.trusted_roots), [code.measurement],
                                                                allow_simulated=env.options.allow_simulated_tee)
        self.env = env
        self.index = index
        self.identity = env.require_identity(index)
        self._context: bytes | None = None
        self._initiator: ChannelInitiator | None = None
        self._channel: SecureChannel | None = None
        self._aes_bits = env.options.aes_bits
        self._bins_once = False
        self._masked: tuple[np.ndarray, np.ndarray] | None = None
        self._cached: set[int] = set()
        self.width = columns.bins.max_bin + 1
        self._run_id: str | None = None  # this training's (Hello), which the enclave's must be
        self._run_served = False  # that id was served before: only a resume may use it again
        self._resumed = False
        # chosen here for this run, sealed to the enclave, bound into its checkpoints' sealing context:
        # kept in this party's checkpoint and given again only when this party resumes the run
        self._seal_salt = os.urandom(32)
        # the party's own compute backend: index-set ring sums run there if it takes numpy loops
        self._compute = env.compute if offloads(env.compute) else None
        self._masked_shards: RowShards | None = None  # this tree's masked (g, h), (n_rows, 2)
        self._bin_shards: RowShards | None = None
        self._compute_pool = None

    def bind_run(self, run_id: str, served: bool) -> None:
        """The run id of this training, from the handshake (``served``: used before)."""
        self._run_id, self._run_served, self._resumed = run_id, served, False

    def resume_with(self, run_id: str, token: bytes) -> None:
        """This party accepted to resume ``run_id`` from its own checkpoint: the enclave may
        open what it sealed in that run (it is given the same sealing value again)."""
        if self._channel is not None or self._initiator is not None:
            raise ProtocolError("a run is resumed before the enclave channel opens, not after")
        if len(token) != 32 or run_id != self._run_id:
            raise CheckpointError("the checkpoint's sealing value does not belong to this run")
        self._seal_salt, self._resumed = bytes(token), True

    def resume_token(self) -> bytes:
        return self._seal_salt

    def _limits(self) -> tuple[int, int]:
        """(trees, levels per tree) this party allows, 0 for no limit: what the enclave enforces."""
        depths = [d for d in (self._max_depth, self._policy.max_depth) if d is not None]
        return self._policy.max_trees or 0, min(depths) if depths else 0

    def _check_new_tree(self, tree: int) -> None:
        """Trees are grown once each, in increasing order, and no more than the policy allows."""
        trees = self._limits()[0]
        if tree <= self._tree:
            raise ProtocolError(f"tree {tree} after tree {self._tree}: trees are grown once each, in order")
        if trees and tree >= trees:
            raise PolicyRefused(self._party, "max_trees", f"tree {tree} (trees count from 0) is beyond {trees} trees")

    def _begin_tree(self, msg):
        if isinstance(msg, ChannelOpen):
            if self._channel is not None or self._initiator is not None:
                raise ProtocolError("the enclave channel of this run is already open")
            if not self._run_id or msg.run_id != self._run_id:
                raise ProtocolError(f"the active party's enclave was set up for run {msg.run_id!r}; this training "
                                    f"is run {self._run_id!r} (named in the handshake)")
            if self._run_served and not self._resumed:
                raise ProtocolError(f"run {msg.run_id!r} was served before: its id is used again only to resume it "
                                    "from this party's checkpoint")
            check_party_keys(self.env, msg.party_keys, "the active party's enclave")
            if msg.max_bin != self.columns.bins.max_bin or msg.aes_bits != self._aes_bits:
                raise ProtocolError(f"the active party's enclave was set up for max_bin={msg.max_bin}, "
                                    f"aes_bits={msg.aes_bits}; this party uses {self.columns.bins.max_bin}, "
                                    f"{self._aes_bits}")
            self._bins_once = msg.send_bins
            try:
                criteria = SplitCriteria.from_tuple(msg.criteria)
            except ValueError:
                raise ProtocolError(f"the channel open must name {N_CRITERIA} split criteria in range") from None
            self._policy.check_criteria(self._party, criteria)
            self._context = em.run_context("onetee", msg.run_id, msg.max_bin, msg.aes_bits, msg.party_keys,
                                           criteria.as_tuple())
            self._initiator = ChannelInitiator(verifier=self._verifier, aes_bits=self._aes_bits, context=self._context)
            return EnclaveHello(self._initiator.hello(), msg.run_id, list(msg.criteria), msg.party_keys)
        if isinstance(msg, ChannelAccept):
            if self._initiator is None:
                raise ProtocolError("channel accept without a channel open")
            final, channel = self._initiator.finish(msg.reply)  # AttestationError if not genuine
            self._initiator = None
            self._channel = channel
            signature = self.identity.sign(party_statement("initiator", self.index, self._context,
                                                           channel.handshake_hash))
            meta = serde.encode(em.PartyMeta(self.columns.n_rows, self._seal_salt, *self._limits(),
                                             self.columns.bins.n_value_bins.astype(np.int64),
                                             self.columns.bins.categorical_mask, json.dumps(self.columns.names)))
            return EnclaveFinish(final, signature, channel.seal(meta))
        if self._channel is None:
            raise ProtocolError("the active party's enclave has not been attested yet")
        if isinstance(msg, SealedMessage):
            return self._from_enclave(msg)
        if isinstance(msg, MaskedGradients):
            if self._bins_once:
                raise ProtocolError("in a bins-once run the enclave sums the gradients; it sends no masked ones")
            n_rows = self.columns.n_rows
            if msg.n_rows != n_rows:
                raise ProtocolError(f"masked gradients for {msg.n_rows} rows; this party holds {n_rows}")
            (rows,) = decode_row_sets(msg.row_encoding, msg.row_offsets, msg.row_payload, n_rows, "gradient rows")
            if msg.g.size != rows.size or msg.h.size != rows.size:
                raise ProtocolError("masked gradient vectors do not match the rows")
            g = np.zeros(n_rows, dtype=np.uint64)
            h = np.zeros(n_rows, dtype=np.uint64)
            g[rows], h[rows] = msg.g, msg.h
            self._check_new_tree(msg.tree)
            self._masked = (g, h)
            if self._compute is not None:
                self._masked_shards = RowShards.split(self._compute, np.stack([g, h], axis=1),
                                                      self._compute.shard_rows)
            self._received = em.masked_digest(msg.tree, rows, msg.g, msg.h)
            self._cached = set()
            self._open_tree(msg.tree, check_rows(rows, n_rows, "gradient rows"))
            return Ack()
        if isinstance(msg, SealedSplitRequest):
            return self._sealed_split(msg)
        raise ProtocolError(f"1-TEE does not serve {type(msg).__name__}")

    def handle(self, msg):
        if self._bins_once and isinstance(msg, HistogramRequest):
            raise ProtocolError("in a bins-once run node rows come only from the enclave, sealed")
        return super().handle(msg)

    def _from_enclave(self, msg: SealedMessage):
        """Bins-once: the party's bins, once; then from the enclave, sealed, each tree's rows
        and each level's partitions (nothing to sum: the enclave holds the bins), each
        acknowledged, sealed, only once this party's policy allows it: without that the
        enclave computes nothing more over this party's bins."""
        if not self._bins_once:
            raise ProtocolError("bin assignments were not agreed for this run")
        if msg.kind == "bins":
            frame = serde.encode(em.BinsOnce(self.columns.bins.n_value_bins.astype(np.int64),
                                             self.columns.bins.categorical_mask,
                                             self.columns.binned_by_feature.astype(np.uint16)))
            return SealedMessage(-1, "bins", self._channel.seal(frame))
        frame = self._channel.open(msg.record)
        opened = serde.decode(frame)
        if msg.kind == "rows" and isinstance(opened, em.TreeRows) and opened.tree == msg.tree:
            n_rows = self.columns.n_rows
            if opened.n_rows != n_rows:
                raise ProtocolError(f"the enclave's tree has {opened.n_rows} rows; this party holds {n_rows}")
            self._check_new_tree(opened.tree)
            (rows,) = decode_row_sets(opened.row_encoding, opened.row_offsets, opened.row_payload, n_rows, "tree rows")
            self._open_tree(opened.tree, rows)
            return self._acknowledge(frame)
        if msg.kind == "level" and isinstance(opened, HistogramRequest) and opened.tree == msg.tree:
            nodes = self._enter_level(opened)
            self._check_level(opened, nodes)
            return self._acknowledge(frame)
        raise ProtocolError(f"unexpected sealed {msg.kind!r} record from the enclave")

    def _check_level(self, request: HistogramRequest, nodes: list[int]) -> None:
        """Within this party's policy: every partition it is shown at least k rows a side,
        every node of the level above the depth it allows."""
        for left, right in zip(request.split_lefts.tolist(), request.split_rights.tolist()):
            n_left, n_right = self._node_rows.size(left), self._node_rows.size(right)
            self._policy.check_partition(self._party, n_left + n_right, n_left)
        depth = self._limits()[1]
        if depth:
            for node in nodes:
                if self._node_rows.depth(node) >= depth:
                    raise PolicyRefused(self._party, "max_depth", f"node {node} of tree {self._tree} is at depth "
                                        f"{self._node_rows.depth(node)}; trees of this run have at most {depth} levels")

    def _acknowledge(self, frame) -> SealedMessage:
        ack = em.RecordAck(self._tree, em.record_digest(frame))
        return SealedMessage(self._tree, "ack", self._channel.seal(serde.encode(ack)))

    def _level(self, nodes, node_rows):
        plan = plan_level(nodes, node_rows, self._cached)
        g, h = self._masked
        binned = self.columns.binned_by_feature
        n_features = binned.shape[0]
        sums = np.zeros((len(plan.build), n_features, self.width, 2), dtype=np.uint64)
        counts = np.zeros((0 if self._bins_once else len(plan.build), n_features, self.width), dtype=np.int64)
        index_rows = []
        on_backend = self._masked_sums_on_backend(plan.build, node_rows)
        for i, node in enumerate(plan.build):
            rows = node_rows.rows(node)
            if node in on_backend:
                sums[i], node_counts, node_index_rows = on_backend[node]
                if not self._bins_once:
                    counts[i] = node_counts
                    index_rows.extend(node_index_rows)
                continue
            for f in range(n_features):
                bins = binned[f, rows].astype(np.intp)
                sums[i, f, :, 0] = ring_bincount(bins, g[rows], self.width)
                sums[i, f, :, 1] = ring_bincount(bins, h[rows], self.width)
                if not self._bins_once:
                    counts[i, f] = np.bincount(bins, minlength=self.width)
                    index_rows.append(rows[np.argsort(bins, kind="stable")].astype(np.uint32))
        derived = np.array(plan.derive, dtype=np.int32).reshape(-1, 3)
        self._cached = set(plan.build) | {d[0] for d in plan.derive}
        rows_blob = np.concatenate(index_rows) if index_rows else np.empty(0, dtype=np.uint32)
        frame = serde.encode(em.MaskedSums(self._tree, np.array(plan.build, dtype=np.int32), derived, sums,
                                           counts, rows_blob, self._received))
        return SealedMessage(self._tree, "sums", self._channel.seal(frame))

    def close(self) -> None:
        """Stop the pool of index-set sums on this party's compute backend, if one started."""
        if self._compute_pool is not None:
            self._compute_pool.close()
            self._compute_pool = None

    def _masked_sums_on_backend(self, build, node_rows) -> dict[int, tuple]:
        """Per node large enough for jobs: (ring sums, counts, index rows per feature), from
        one job per (shard, rows of the node in it). Ring sums add modulo 2^64 in any order and
        each job orders its rows by bin stably, so merging the jobs' orders by bin (jobs in row
        order) gives exactly the sums, counts and index sets summed here."""
        if self._compute is None or self._masked_shards is None:
            return {}
        minimum = job_rows(self._compute)
        nodes = [node for node in build if node_rows.size(node) >= minimum
                 and bool(np.all(np.diff(node_rows.rows(node)) >= 0))]  # sorted rows: job order is row order
        if not nodes:
            return {}
        if self._bin_shards is None:
            histograms = self.columns.histograms
            self._bin_shards = histograms.bin_shards if isinstance(histograms, ShardedHistogramBuilder) \
                and histograms.backend is self._compute else RowShards.split(
                    self._compute, self.columns.binned_by_feature, self._compute.shard_rows, axis=1)
        if self._compute_pool is None:
            self._compute_pool = self._compute.pool()
        pieces: dict[int, list[np.ndarray]] = {}  # node -> its jobs' rows, in row order
        args = []
        for node in nodes:
            for shard, positions in row_jobs(self._bin_shards, node_rows.rows(node),
                                             self._compute_pool.workers * 2, minimum):
                pieces.setdefault(node, []).append(positions + self._bin_shards.edges[shard])
                args.append((*self._bin_shards.job_data(shard, positions),
                             *self._masked_shards.job_data(shard, positions), self.width, not self._bins_once))
        results = iter(self._compute_pool.map(_masked_sums_job, *zip(*args)))
        out = {}
        for node in nodes:
            mine = [(rows, next(results)) for rows in pieces[node]]
            sums = mine[0][1][0].copy()
            counts = mine[0][1][1].copy()
            for _, (part_sums, part_counts, _) in mine[1:]:
                sums += part_sums  # uint64: wraps modulo 2^64, as the ring sum does
                counts += part_counts
            index_rows = []
            if not self._bins_once:
                for f in range(sums.shape[0]):
                    merged = np.empty(int(counts[f].sum()), dtype=np.uint32)
                    placed = np.cumsum(counts[f]) - counts[f]  # where each bin starts in the merged order
                    for rows, (_, part_counts, order) in mine:
                        held = part_counts[f]
                        first = np.cumsum(held) - held  # where each bin starts in this job's order
                        merged[np.repeat(placed - first, held) + np.arange(rows.size)] = rows[order[f]]
                        placed += held
                    index_rows.append(merged)
            out[node] = (sums, counts, index_rows)
        return out

    def _sealed_split(self, msg: SealedSplitRequest):
        if msg.tree != self._tree:
            raise ProtocolError("split request for a tree that is not open")
        locators = serde.decode(self._channel.open(msg.record))
        if not isinstance(locators, em.SplitLocators) or locators.tree != self._tree \
                or not np.array_equal(locators.nodes, msg.nodes) or not np.array_equal(locators.lefts, msg.lefts) \
                or not np.array_equal(locators.rights, msg.rights):
            raise ProtocolError("the sealed split locators (nodes and the ids of their children) do not match the "
                                "split request")
        n = msg.nodes.size
        return self._split(SplitRequest(msg.tree, locators.nodes, locators.lefts, locators.rights, locators.features,
                                        locators.bins, locators.default_left, np.zeros(n, dtype=np.uint64)))
