"""N-TEE (seed paper): an enclave at every party; the active host never sees a passive score.

Setup: each party's host starts its enclave (all run the same measured program); the active
enclave and every passive enclave attest each other and derive an AES-GCM channel, hosts only
relaying bytes. Per tree the active enclave seals compact exact gradients into each channel.
Per level it seals the node list and last level's left sets; each passive enclave finds its
best split and returns a score with an opaque handle; the active enclave compares them with
its own party's best and tells its host only the winner, the handle and the winning gain.
The winner's host asks its own enclave to resolve the handle, records the threshold and
returns the left instance set. The active host's transcript thus holds no per-bin sums and
no per-feature scores of passive parties: only sealed records, winners and left sets.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..core.split import SplitCriteria
from ..core.tree import SplitRecord
from ..errors import ProtocolError
from ..parties.messages import Ack
from ..transport import serde
from ..transport.serde import message
from . import enclave_messages as em
from .enclaves import ProtocolEnv, enclave_code
from .intcodec import pack_ints
from .partition import HistogramRequest, SplitReply, SplitRequest, encode_row_sets
from .scoring import ActiveSplitting, splits_from_winners

__all__ = ["NteeActive", "NteePassive", "EnclaveHello", "EnclaveHelloReply", "EnclaveFinish", "SealedMessage",
           "init_message"]

PROGRAM = "ntee_enclave.py"


@message
@dataclass(frozen=True)
class EnclaveHello:
    """Relayed attestation handshake, step 1 (from the active party's enclave)."""

    hello: bytes


@message
@dataclass(frozen=True)
class EnclaveHelloReply:
    """Step 2: the passive enclave's quote, key share and nonce; says which backend."""

    reply: bytes
    backend: str


@message
@dataclass(frozen=True)
class EnclaveFinish:
    """Step 3: the active enclave's quote and key share."""

    final: bytes


@message
@dataclass(frozen=True)
class SealedMessage:
    """An attested-channel record between enclaves, relayed by the hosts."""

    tree: int
    kind: str  # "gradients", "level", "candidates"
    record: bytes


def init_message(role: str, party: int, criteria, max_bin: int) -> bytes:
    return serde.encode(em.EnclaveInit(role, party, criteria.reg_lambda, criteria.min_child_weight,
                                       criteria.min_samples_leaf, criteria.min_split_gain, max_bin))


class NteeActive(ActiveSplitting):
    def __init__(self, channel, columns, criteria, passive_bins, max_bin, env: ProtocolEnv) -> None:
        super().__init__(channel, columns, criteria, passive_bins, max_bin)
        self.timer: dict[str, float] = {}
        started = time.perf_counter()
        code = enclave_code(PROGRAM, env.trusted_roots, env.options.aes_bits)
        self.enclave = env.backend().load(code, label="active")
        self.enclave.ecall("init", init_message("active", 0, criteria, max_bin))
        for party in self.channel.parties:
            hello = self.enclave.ecall("hello", party.to_bytes(4, "big"))
            reply = self.channel.request(party, EnclaveHello(hello))
            final = self.enclave.ecall("finish_initiator", party.to_bytes(4, "big") + reply.reply)
            self.channel.request(party, EnclaveFinish(final))
        self.timer["enclave setup"] = time.perf_counter() - started

    def _seal_for_all(self, frame: bytes | dict[int, bytes]) -> dict[int, bytes]:
        frames = frame if isinstance(frame, dict) else {p: frame for p in self.channel.parties}
        return em.unpack_records(self.enclave.ecall("seal_for", em.pack_records(frames)))

    def _send_gradients(self, tree_index, rows, gradients):
        n_rows = gradients.g.size
        width_g, g = pack_ints(gradients.g[rows])
        width_h, h = pack_ints(gradients.h[rows])
        encoding, offsets, payload = encode_row_sets([rows], n_rows)
        frame = serde.encode(em.TreeGradients(tree_index, gradients.codec.frac_bits, n_rows, width_g, width_h,
                                              encoding, offsets, payload, g, h))
        records = self._seal_for_all(frame)
        self.channel.request_all({p: SealedMessage(tree_index, "gradients", r) for p, r in records.items()})

    def find_splits(self, nodes, node_rows):
        self._node_rows = node_rows
        frames = {}
        for party in self.channel.parties:
            announced = self.announcements.for_party(party)
            frames[party] = serde.encode(HistogramRequest(self._tree, np.array(nodes, dtype=np.int32), **announced))
        self.announcements.clear()
        records = self._seal_for_all(frames)
        pending = self.channel.submit_all({p: SealedMessage(self._tree, "level", r) for p, r in records.items()})
        own = self.columns.best(nodes, node_rows, self.codec, self.criteria)
        replies = pending.result()
        for party, reply in replies.items():
            if not isinstance(reply, SealedMessage) or reply.kind != "candidates" or reply.tree != self._tree:
                raise ProtocolError(f"party {party} did not answer the level request with candidates")
        chosen = serde.decode(self.enclave.ecall("choose", serde.encode(em.CandidatesIn(
            self._tree, np.array(nodes, dtype=np.int32), np.array([b.gain for b in own], dtype=np.float64),
            np.frombuffer(em.pack_records({p: r.record for p, r in replies.items()}), dtype=np.uint8)))))
        return splits_from_winners(nodes, own, chosen.parties, chosen.gains, chosen.handles)

    def close(self) -> None:
        self.enclave.close()


class NteePassive:
    """Passive host: relays records to and from its enclave, records its own won splits."""

    handles = (EnclaveHello, EnclaveFinish, SealedMessage, SplitRequest)

    def __init__(self, columns, params, env: ProtocolEnv, index: int) -> None:
        self.columns = columns
        self.timer: dict[str, float] = {}
        code = enclave_code(PROGRAM, env.trusted_roots, env.options.aes_bits)
        self.enclave = env.backend().load(code, label=f"passive-{index}")
        self.enclave.ecall("init", init_message("passive", index, SplitCriteria.from_params(params), params.max_bin))
        self.enclave.ecall("columns", serde.encode(em.EnclaveColumns(
            columns.bins.n_value_bins.astype(np.int64), columns.binned_by_feature.astype(np.uint16))))
        self._tree = -1

    def handle(self, msg):
        if isinstance(msg, EnclaveHello):
            return EnclaveHelloReply(self.enclave.ecall("respond", msg.hello), self.enclave.backend)
        if isinstance(msg, EnclaveFinish):
            self.enclave.ecall("finish_responder", msg.final)
            return Ack()
        if isinstance(msg, SealedMessage):
            if msg.kind == "gradients":
                self.enclave.ecall("gradients", msg.record)
                self._tree = msg.tree
                return Ack()
            if msg.kind == "level":
                return SealedMessage(msg.tree, "candidates", self.enclave.ecall("level", msg.record))
            raise ProtocolError(f"unexpected sealed message kind {msg.kind!r}")
        return self._split(msg)

    def _split(self, msg: SplitRequest) -> SplitReply:
        applied = serde.decode(self.enclave.ecall("apply", serde.encode(em.ApplyIn(
            msg.tree, msg.nodes, msg.lefts, msg.rights, msg.handles))))
        records = []
        for feature, bin_, default_left in zip(applied.features, applied.bins, applied.default_left):
            threshold = self.columns.bins.threshold(int(feature), int(bin_))
            records.append(self.columns.owner.add(SplitRecord(int(feature), threshold, bool(default_left), msg.tree)))
        return SplitReply(msg.tree, np.array(records, dtype=np.int64), applied.left_bits)

    def close(self) -> None:
        self.enclave.close()
