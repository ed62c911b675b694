"""N-TEE (seed paper): an enclave at every party; the active host never sees a passive score.

Setup: each party's host starts its enclave (all run the same measured program) and gives it
the run's parameters and every party's identity key once; the active enclave and every
passive enclave attest each other (quotes bind the run context) and derive an AES-GCM
channel, hosts relaying bytes and signing the handshake with their party identity key.
Per tree the active enclave builds and seals the compact exact gradients for each channel.
Per level it checks last level's partitions against the splits it chose and seals each
party's node list and left sets; each passive enclave returns its best score with an opaque
handle and the split's left sums; the active enclave computes its own party's gains from the
host's left sums, compares, and tells its host only the winner, the handle and the gain.
The winner's host asks its own enclave to resolve the handle, records the threshold and
returns the left instance set.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace

import numpy as np

from teeboost.core.split import N_CRITERIA, SplitCriteria, best_splits, left_sums, sampled_features
from teeboost.errors import ProtocolError
from teeboost.protocols.messages import Ack
from teeboost.policy import Policy
from teeboost.tee.channel import party_statement
from teeboost.transport import serde
from teeboost.transport.serde import array_field, message
from teeboost.protocols.enclave import messages as em
from teeboost.protocols.env import ProtocolEnv, check_party_keys, criteria_tuple, enclave_code, init_message, run_context_of
from teeboost.core.grower import AppliedSplit
from teeboost.protocols.enclave.intcodec import pack_ints
from teeboost.protocols.enclave.limits import limits_fields, own_directions, won_constraints
from teeboost.protocols.enclave.partition import SplitReply, SplitRequest, encode_row_sets
from teeboost.protocols.scoring.level_loop import ActiveSplitting, splits_from_winners

__all__ = ["NteeActive", "NteePassive", "attest_enclaves", "gradients_in", "EnclaveHello", "EnclaveHelloReply",
           "EnclaveFinish", "EnclaveFinished", "SealedMessage", "own_candidates"]

PROGRAM = "teeboost.protocols.ntee.enclave.program"


@message
@dataclass(frozen=True)
class EnclaveHello:
    """Relayed attestation handshake, step 1 (from the active party's enclave), with the run
    every enclave must be initialised for."""

    hello: bytes
    run_id: str
    criteria: list[float]  # the active party's SplitCriteria.as_tuple (N_CRITERIA values)
    party_keys: np.ndarray = array_field("uint8", 2)


@message
@dataclass(frozen=True)
class EnclaveHelloReply:
    """Step 2: the passive enclave's quote, key share and nonce; says which backend."""

    reply: bytes
    backend: str


@message
@dataclass(frozen=True)
class EnclaveFinish:
    """Step 3: the initiator's key share (and quote), its party's signature over the
    handshake, and (1-TEE) the first record on the new channel."""

    final: bytes
    signature: bytes
    record: bytes


@message
@dataclass(frozen=True)
class EnclaveFinished:
    """Step 4 (N-TEE): the passive party's signature over the handshake."""

    signature: bytes


@message
@dataclass(frozen=True)
class SealedMessage:
    """An attested-channel record between enclaves (or, in 1-TEE, a passive party and the
    enclave), relayed by the hosts; decoded as a view of the frame, so a host relays a large
    record to its enclave without copying it."""

    tree: int
    kind: str  # "gradients", "level", "candidates", "bins", "rows", "sums", "ack"
    record: np.ndarray = array_field("uint8", 1)  # bytes are accepted when building one


def gradients_in(tree_index: int, rows: np.ndarray, gradients) -> bytes:
    """The ecall payload that gives an active enclave this tree's sampled rows and their exact
    gradients, packed (``intcodec``): in N-TEE the very bytes it then seals to each passive enclave."""
    n_rows = gradients.g.size
    encoding, offsets, payload = encode_row_sets([rows], n_rows)
    width_g, g = pack_ints(gradients.g[rows])
    width_h, h = pack_ints(gradients.h[rows])
    return serde.encode(em.TreeGradients(tree_index, gradients.codec.frac_bits, n_rows, width_g, width_h, encoding,
                                         offsets, payload, g, h))


def own_candidates(columns, nodes, node_rows, codec, criteria, tree, **limits):
    """The active party's best split per node over its columns sampled for ``tree`` (within
    the constraints' ``limits``), and what it sends left: (bests, valid, left sums)."""
    hist = columns.level_histograms(nodes, node_rows)
    best = best_splits(hist, columns.bins.n_value_bins, codec, criteria, columns.bins.categorical_mask,
                       sampled_features(criteria, 0, tree, columns.n_features), **limits)
    left = np.zeros((len(nodes), 3), dtype=np.int64)
    for i, b in enumerate(best):
        if b.valid:
            left[i] = left_sums(hist[i, b.feature], b.bin, b.default_left, columns.bins.is_categorical(b.feature))
    return best, np.array([b.valid for b in best], dtype=bool), left


#: How long a party's hello waits, asking again, while a passive party serves another session.
BUSY_WAIT_SECONDS = 300.0


def _request_when_free(channel, party: int, msg):
    """A passive party in another enclave session answers ``Busy``: ask again, backing off to
    a quarter second (with a 1 s cap, 20 queued strict predictions spent 12 s of 56 waiting
    between sessions: tests/integration/test_deployed_party.py, 2026-11-27)."""
    deadline = time.monotonic() + BUSY_WAIT_SECONDS
    wait = 0.05
    while True:
        try:
            return channel.request(party, msg)
        except ProtocolError as exc:
            if ": Busy: " not in str(exc) or time.monotonic() + wait > deadline:
                raise
        time.sleep(wait)
        wait = min(2 * wait, 0.25)


def attest_enclaves(program: str, protocol: str, channel, criteria, max_bin: int, env: ProtocolEnv,
                    enclave=None):
    """Start the active party's enclave (or take ``enclave``, launched ahead with this program's
    code and not yet initialised) and attest it with every passive enclave (relayed 4-step
    handshake, each step signed by the party's pinned identity key)."""
    try:
        identity = env.require_identity(0)
    except BaseException:
        if enclave is not None:  # one launched ahead is not left running
            enclave.close()
        raise
    if enclave is None:
        enclave = env.backend().load(enclave_code(program, env.trusted_roots, env.options), label="active")
    try:
        enclave.ecall("init", init_message(protocol, "active", 0, criteria, max_bin, env, env.run_id))
        keys = env.keys_array()
        context = run_context_of(env, protocol, env.run_id, max_bin, criteria)
        for party in channel.parties:
            hello = enclave.ecall("hello", party.to_bytes(4, "big"))
            reply = _request_when_free(channel, party, EnclaveHello(hello, env.run_id, list(criteria_tuple(criteria)),
                                                                   keys))
            parts = em.unpack_records(enclave.ecall("finish_initiator", party.to_bytes(4, "big") + reply.reply))
            signature = identity.sign(party_statement("initiator", 0, context, parts[1]))
            finished = channel.request(party, EnclaveFinish(parts[0], signature, b""))
            if not isinstance(finished, EnclaveFinished):
                raise ProtocolError(f"party {party} did not sign the enclave handshake")
            enclave.ecall("confirm", party.to_bytes(4, "big") + finished.signature)
    except BaseException:
        enclave.close()
        raise
    return enclave


class NteeActive(ActiveSplitting):
    def __init__(self, channel, columns, criteria, passive_bins, passive_categorical, max_bin,
                 env: ProtocolEnv) -> None:
        super().__init__(channel, columns, criteria, passive_bins, passive_categorical, max_bin)
        self.timer: dict[str, float] = {}
        started = time.perf_counter()
        self.enclave = attest_enclaves(PROGRAM, "ntee", channel, criteria, max_bin, env)
        if criteria.constraints:  # which constrained names this party holds, checked in the enclave
            self.enclave.ecall("own_names", json.dumps(columns.names).encode())
        self._gradients_in: bytes | None = None  # this tree's, until the root's level request
        self._won: dict[int, tuple[int, int]] = {}  # node -> a passive winner's column's (direction, sets)
        self.timer["enclave setup"] = time.perf_counter() - started

    def _send_gradients(self, tree_index, rows, gradients):
        # sent with the root's level request, while this host sums its own root histograms
        self._gradients_in = gradients_in(tree_index, rows, gradients)

    def find_splits(self, nodes, node_rows, limits=None):
        self._node_rows = node_rows
        constrained = limits_fields(limits, nodes)
        level = serde.encode(em.LevelIn(self._tree, np.array(nodes, dtype=np.int32), **self.announcements.for_all(),
                                        **constrained))
        self.announcements.clear()
        pending = self._in_background(self._level_exchange, level)
        mine = self._limits(0, nodes, limits)
        own, valid, left = own_candidates(self.columns, nodes, node_rows, self.codec, self.criteria, self._tree,
                                          **mine)
        replies = pending.result()
        for party, reply in replies.items():
            if not isinstance(reply, SealedMessage) or reply.kind != "candidates" or reply.tree != self._tree:
                raise ProtocolError(f"party {party} did not answer the level request with candidates")
        chosen = serde.decode(self.enclave.ecall("choose", serde.encode(em.CandidatesIn(
            self._tree, np.array(nodes, dtype=np.int32), valid, left,
            np.frombuffer(em.pack_records({p: r.record for p, r in replies.items()}), dtype=np.uint8),
            own_directions(own, mine)))))
        self._won = won_constraints(nodes, chosen)
        return splits_from_winners(nodes, own, chosen.parties, chosen.gains, chosen.handles)

    def _applied(self, record, went_left, party, split, reply=None, k=0):
        if party == 0 or split.node_id not in self._won:
            return super()._applied(record, went_left, party, split, reply, k)
        return AppliedSplit(record, went_left, *self._won[split.node_id])

    def _level_exchange(self, level: bytes) -> dict:
        """The enclaves' side of a level: the tree's gradients first if it just began, then
        the checked partitions and each passive enclave's candidates."""
        gradients, self._gradients_in = self._gradients_in, None
        if gradients is not None:
            records = em.record_views(self.enclave.ecall("gradients", gradients))
            del gradients
            self.channel.request_all({p: SealedMessage(self._tree, "gradients", r) for p, r in records.items()})
            del records
        records = em.record_views(self.enclave.ecall("level", level))
        return self.channel.request_all({p: SealedMessage(self._tree, "level", r) for p, r in records.items()})

    def close(self) -> None:
        self._stop_background()
        self.enclave.close()


class NteePassive:
    """Passive host: relays records to and from its enclave, records its own won splits."""

    handles = (EnclaveHello, EnclaveFinish, SealedMessage, SplitRequest)
    protocol = "ntee"
    program = PROGRAM
    scores = True  # its enclave scores and partitions by the run's criteria

    def __init__(self, columns, params, env: ProtocolEnv, index: int, *, enclave=None) -> None:
        """``enclave``: one launched ahead with this program's code, not yet initialised."""
        self.columns = columns
        self.params = params
        self.env = env
        self.index = index
        self.timer: dict[str, float] = {}
        self.identity = env.require_identity(index)
        self.enclave = enclave if enclave is not None else env.backend().load(
            enclave_code(self.program, env.trusted_roots, env.options), label=f"passive-{index}")
        self._tree = -1
        self._run_id: str | None = None
        self._party, self._policy = f"passive-{index}", Policy.unrestricted()

    def bind_policy(self, party: str, policy: Policy, max_depth: int | None = None) -> None:
        """This party's enclave scores and partitions by the criteria the run binds: they must
        keep every child at least the policy's k rows, and sample its columns or weigh rows only
        if the policy allows."""
        self._party, self._policy = party, policy

    def _start(self, msg: EnclaveHello) -> None:
        check_party_keys(self.env, msg.party_keys, "the active party")
        try:
            criteria = SplitCriteria.from_tuple(msg.criteria)  # the active party's: its enclave binds them
        except ValueError:
            raise ProtocolError(f"the enclave hello must name {N_CRITERIA} split criteria in range") from None
        if self.scores:
            self._policy.check_criteria(self._party, criteria)
        self._run_id = msg.run_id
        constraints = self.params.constraints  # its enclave checks them against the digest the run binds
        self._criteria = replace(criteria, rules=constraints.encode() if constraints.any else b"")
        self.enclave.ecall("init", init_message(self.protocol, "passive", self.index, self._criteria,
                                                self.params.max_bin, self.env, msg.run_id))
        self._load_columns()

    def _load_columns(self) -> None:
        self.enclave.ecall("columns", serde.encode(em.EnclaveColumns(
            self.columns.bins.n_value_bins.astype(np.int64), self.columns.bins.categorical_mask,
            self.columns.binned_by_feature.astype(np.uint16), json.dumps(self.columns.names))))
        if self.scores:  # from here on its enclave sums and splits; this host needs no bins
            self.columns.drop_binned()

    def handle(self, msg):
        if isinstance(msg, EnclaveHello):
            self._start(msg)
            return EnclaveHelloReply(self.enclave.ecall("respond", msg.hello), self.enclave.backend)
        if isinstance(msg, EnclaveFinish):
            handshake_hash = self.enclave.ecall("finish_responder", em.pack_records({0: msg.final, 1: msg.signature}))
            if self._run_id is None:
                raise ProtocolError("enclave handshake finished before it started")
            context = run_context_of(self.env, self.protocol, self._run_id, self.params.max_bin, self._criteria)
            statement = party_statement("responder", self.index, context, handshake_hash)
            return EnclaveFinished(self.identity.sign(statement))
        if isinstance(msg, SealedMessage):
            if msg.kind == "gradients":
                self.enclave.ecall("gradients_record", msg.record)
                self._tree = msg.tree
                return Ack()
            if msg.kind == "level":
                return SealedMessage(msg.tree, "candidates", self.enclave.ecall("level_record", msg.record))
            raise ProtocolError(f"unexpected sealed message kind {msg.kind!r}")
        return self._split(msg)

    def _split(self, msg: SplitRequest) -> SplitReply:
        applied = serde.decode(self.enclave.ecall("apply", serde.encode(em.ApplyIn(
            msg.tree, msg.nodes, msg.lefts, msg.rights, msg.handles))))
        records = []
        for feature, bin_, default_left in zip(applied.features, applied.bins, applied.default_left):
            records.append(self.columns.owner.add(self.columns.bins.record(int(feature), int(bin_), bool(default_left),
                                                                           msg.tree)))
        return SplitReply(msg.tree, np.array(records, dtype=np.int64), applied.left_bits)

    def close(self) -> None:
        self.enclave.close()
