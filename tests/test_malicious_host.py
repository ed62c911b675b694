"""The host is the adversary of its own enclave, and every party of the others.

Each test mounts one attack with the attacker's real capabilities: the host process's own
objects (its ``Enclave`` handle, its protocol code, which it may patch), the raw pipe to its
enclave process, the bytes it relays, the files it stores. Every attack must fail with a
named error and leak nothing. docs/enclaves.md points here for each claim.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from teeboost.config import BoostParams, ProtocolOptions
from teeboost.core.gradients import EncodedGradients, GradientCodec
from teeboost.core.split import NodeBest, SplitCriteria
from teeboost.errors import AttestationError, ConfigError, EnclaveError, IntegrityError, ProtocolError
from teeboost.federation import train_local
from teeboost.protocols.enclave import messages as em
from teeboost.protocols.ntee import hosts as ntee
from teeboost.protocols.onetee import hosts as onetee
from teeboost.protocols.env import ProtocolEnv, criteria_tuple, enclave_code, init_message, run_context_of
from teeboost.protocols.enclave.partition import encode_row_sets
from teeboost.tee.channel import ChannelInitiator, party_statement
from teeboost.tee.code import EnclaveCode
from teeboost.tee.identity import PartyIdentity
from teeboost.tee.quote import QuoteVerifier
from teeboost.tee.runtime import OP_CALL
from teeboost.tee.simulated import SimulatedBackend, SimulatedPlatform
from teeboost.transport import inmemory, serde

from .helpers import SMALL, federated_descriptions

pytestmark = pytest.mark.malicious_host

PARAMS = BoostParams(n_trees=2, max_depth=3, subsample=0.8, max_bin=32)
DEEP = BoostParams(n_trees=2, max_depth=5, subsample=0.8, max_bin=32)
SIMULATED = ProtocolOptions(allow_simulated_tee=True)
BINS_ONCE = ProtocolOptions(allow_simulated_tee=True, onetee_bins_once=True)
INDEX_SETS = ProtocolOptions(allow_simulated_tee=True, onetee_bins_once=False)  # the seed paper's 1-TEE
TEST_PROGRAM = Path(__file__).parent / "tee" / "echo_enclave.py"


# ---------------------------------------------------------------- a run at the ecall level

class Federation:
    """Platforms, identities and a run id, as a real federation would set them up."""

    def __init__(self, n_parties: int = 2, run_id: str = "run-a") -> None:
        self.platforms = [SimulatedPlatform.create() for _ in range(n_parties)]
        self.identities = [PartyIdentity.generate() for _ in range(n_parties)]
        self.run_id = run_id

    def env(self, index: int, options: ProtocolOptions = SIMULATED) -> ProtocolEnv:
        return ProtocolEnv(options, self.platforms[index], tuple(p.attestation_root for p in self.platforms),
                           self.identities[index], tuple(i.public_key for i in self.identities), self.run_id)

    def onetee_enclave(self, run_id: str | None = None):
        env = self.env(0)
        enclave = env.backend().load(enclave_code("teeboost.protocols.onetee.enclave.program", env.trusted_roots, env.options), label="active")
        enclave.ecall("init", init_message("onetee", "active", 0, SplitCriteria(), 32, env, run_id or self.run_id))
        return enclave

    def channel_open(self, run_id: str | None = None, bins_once: bool = False) -> onetee.ChannelOpen:
        env = self.env(0)
        return onetee.ChannelOpen(bins_once, run_id or self.run_id, 32, 128, list(criteria_tuple(SplitCriteria())),
                                  env.keys_array())


def passive_side(federation: Federation, index: int, small_credit, run_id: str | None = None):
    """An honest 1-TEE passive party's real host code, told the run of this training (as the
    handshake tells it)."""
    from teeboost.core.binning import fit_bins
    from teeboost.core.columns import PartyColumns

    data = small_credit[1][0]
    bins = fit_bins(data.features, 32)
    party = onetee.OneTeePassive(PartyColumns(bins, bins.transform(data.features)), federation.env(index), index)
    party.bind_run(run_id or federation.run_id, served=False)
    return party


def connect_honest(enclave, party_host, index, open_msg):
    """The honest handshake of passive party ``index`` with the active enclave, relayed."""
    prefix = index.to_bytes(4, "big")
    hello = party_host.handle(open_msg)
    final = party_host.handle(onetee.ChannelAccept(enclave.ecall("respond", prefix + hello.hello)))
    enclave.ecall("finish_responder", prefix + em.pack_records({0: final.final, 1: final.signature, 2: final.record}))
    return final


# ---------------------------------------------------------------- 1. host-made quotes

def test_host_cannot_obtain_a_quote_seal_or_unseal_through_the_handle():
    federation = Federation()
    with federation.onetee_enclave() as enclave:
        for name in ("__quote__", "__seal__", "__unseal__", "quote", "seal", "unseal", "party_bins"):
            with pytest.raises(EnclaveError, match="no entry point"):
                enclave.ecall(name, os.urandom(32) + b"host's key")
        assert not any(hasattr(enclave, n) for n in ("quote", "seal", "unseal"))
        assert enclave.ecall("respond", (1).to_bytes(4, "big") + ChannelInitiator(
            verifier=QuoteVerifier([], [])).hello())  # still serving its own entry points


def test_raw_ipc_frames_cannot_reach_anything_but_entry_points():
    """The host writes its own frames to the enclave's pipe: unknown op codes, built-in names,
    a pickle that would run code if unpickled. None runs; the enclave keeps serving."""
    federation = Federation()
    with federation.onetee_enclave() as enclave:
        import pickle

        evil = pickle.dumps(("call", "__quote__", b"x"))
        for body in (bytes([9]) + b"junk", bytes([OP_CALL]) + (9).to_bytes(2, "big") + b"__quote__" + b"\0" * 64,
                     evil, bytes([OP_CALL]) + (5000).to_bytes(2, "big") + b"x"):
            os.write(enclave._write, len(body).to_bytes(8, "big") + body)
            reply = enclave._receive("attack", 10)
            assert reply[:1] == b"\x01" and b"EnclaveError" in reply  # an error frame, nothing else
        with pytest.raises(AttestationError):  # still the same enclave, initialised once
            enclave.ecall("init", init_message("onetee", "active", 0, SplitCriteria(), 32, federation.env(0), "x"))


def test_ntee_passive_host_cannot_stand_in_for_its_enclave(monkeypatch, small_credit):
    """The passive host swaps its enclave's key share for its own (to read the gradients): the
    quote binds the enclave's key, so the active enclave refuses."""
    original = ntee.NteePassive.handle

    def handle(self, msg):
        reply = original(self, msg)
        if isinstance(reply, ntee.EnclaveHelloReply):
            nonce_r, public, quote = em_unpack(reply.reply)
            from cryptography.hazmat.primitives import serialization
            from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

            own = X25519PrivateKey.generate().public_key().public_bytes(serialization.Encoding.Raw,
                                                                         serialization.PublicFormat.Raw)
            return replace(reply, reply=em_pack(nonce_r, own, quote))
        return reply

    monkeypatch.setattr(ntee.NteePassive, "handle", handle)
    active, passives = small_credit
    with pytest.raises(AttestationError):
        train_local(active, passives, PARAMS, "ntee", options=SIMULATED)


def em_pack(*parts):
    from teeboost.tee.channel import _pack

    return _pack(*parts)


def em_unpack(data):
    from teeboost.tee.channel import _unpack

    return _unpack(data, 3)


# ---------------------------------------------------------------- 2. host sealing

def test_host_cannot_forge_a_sealed_checkpoint_with_other_code_on_the_same_platform(small_credit):
    """The host loads a program of its own (which can seal) on the genuine platform, seals
    forged bins for party 1 and feeds them to the 1-TEE enclave's restore: refused, because
    sealing keys are bound to the measurement."""
    federation = Federation()
    backend = SimulatedBackend(federation.platforms[0])
    helper = EnclaveCode.from_file(TEST_PROGRAM, config={"trusted_roots": []})
    forged = serde.encode(em.BinsOnce(np.full(5, 2, dtype=np.int64), np.zeros(5, dtype=bool), np.zeros((5, 3000), dtype=np.uint16)))
    with backend.load(helper, label="host's own") as own:
        context = b"teeboost-checkpoint/onetee/"
        blob = own.ecall("test_seal", len(context).to_bytes(4, "big") + context + em.pack_records({1: forged}))
    with federation.onetee_enclave() as enclave:
        connect_honest(enclave, passive_side(federation, 1, small_credit), 1, federation.channel_open(bins_once=True))
        with pytest.raises(IntegrityError):
            enclave.ecall("restore", blob)


def test_sealed_blob_from_another_run_does_not_open(tmp_path, small_credit):
    active, passives = small_credit
    first = tmp_path / "a"
    blobs = {}
    original = onetee.OneTeeActive.sealed_state

    def keep(self, run_id):
        blob = original(self, run_id)
        blobs[run_id] = blob
        return blob

    import teeboost.protocols.onetee.hosts as module
    module.OneTeeActive.sealed_state = keep
    try:
        train_local(active, passives, PARAMS, "onetee", options=BINS_ONCE, checkpoint_dir=first)
    finally:
        module.OneTeeActive.sealed_state = original
    (blob,) = set(blobs.values())
    federation = Federation(run_id="another run")
    with federation.onetee_enclave() as enclave:
        connect_honest(enclave, passive_side(federation, 1, small_credit), 1, federation.channel_open(bins_once=True))
        with pytest.raises(IntegrityError):
            enclave.ecall("restore", blob)


def test_checkpoint_context_is_not_the_hosts_to_choose(small_credit):
    """``checkpoint`` takes no context from the host; a blob of the same run opens only in an
    enclave initialised for that run (another run id: refused), and what it holds is checked
    against what the parties report in this run."""
    federation = Federation()
    honest = passive_side(federation, 1, small_credit)
    with federation.onetee_enclave() as enclave:
        connect_honest(enclave, honest, 1, federation.channel_open(bins_once=True))
        record = honest.handle(onetee.SealedMessage(-1, "bins", b"")).record
        enclave.ecall("bins_once", (1).to_bytes(4, "big") + record)
        blob = enclave.ecall("checkpoint", b"any context the host likes")
    with federation.onetee_enclave(run_id="run-b") as other_run:
        connect_honest(other_run, passive_side(federation, 1, small_credit, run_id="run-b"), 1,
                       federation.channel_open(run_id="run-b", bins_once=True))
        with pytest.raises(IntegrityError):
            other_run.ecall("restore", blob)
    fewer_rows = (small_credit[0].take(np.arange(2000)), [small_credit[1][0].take(np.arange(2000))])
    with federation.onetee_enclave() as same_run:  # same run, resumed by party 1, which now reports other rows
        changed = passive_side(federation, 1, fewer_rows)
        changed.resume_with(federation.run_id, honest.resume_token())
        connect_honest(same_run, changed, 1, federation.channel_open(bins_once=True))
        with pytest.raises(ProtocolError, match="other features or rows"):
            same_run.ecall("restore", blob)


# ---------------------------------------------------------------- 3. impersonation in 1-TEE

def test_active_host_cannot_pose_as_a_passive_party(small_credit):
    """The active host runs the passive side itself, signing with its own key for slot 1."""
    federation = Federation()
    impostor = Federation()  # the active host's own keys, not party 1's
    forged_env = dataclasses.replace(federation.env(1), identity=impostor.identities[0])
    with federation.onetee_enclave() as enclave:
        hello_side = ChannelInitiator(verifier=QuoteVerifier(forged_env.trusted_roots, [enclave.measurement],
                                                             allow_simulated=True),
                                      context=run_context_of(forged_env, "onetee", federation.run_id, 32,
                                                             SplitCriteria()))
        reply = enclave.ecall("respond", (1).to_bytes(4, "big") + hello_side.hello())
        final, channel = hello_side.finish(reply)
        signature = impostor.identities[0].sign(party_statement("initiator", 1, hello_side.context,
                                                                channel.handshake_hash))
        meta = channel.seal(serde.encode(em.PartyMeta(3000, os.urandom(32), 0, 0, np.full(5, 32, dtype=np.int64),
                                                      np.zeros(5, dtype=bool))))
        with pytest.raises(AttestationError):
            enclave.ecall("finish_responder", (1).to_bytes(4, "big") + em.pack_records({0: final, 1: signature,
                                                                                        2: meta}))


def test_a_channel_is_set_up_once_per_run(small_credit):
    """After the real party 1 connected, a second handshake for slot 1 (the exploit that
    re-keyed a party mid-run) is refused, whoever signs it."""
    federation = Federation()
    with federation.onetee_enclave() as enclave:
        connect_honest(enclave, passive_side(federation, 1, small_credit), 1, federation.channel_open())
        again = passive_side(federation, 1, small_credit)
        with pytest.raises(AttestationError, match="already set up"):
            connect_honest(enclave, again, 1, federation.channel_open())
        with pytest.raises(EnclaveError, match="stopped after a failed ecall"):  # and it serves nothing more
            enclave.ecall("respond", (1).to_bytes(4, "big") + ChannelInitiator(verifier=QuoteVerifier([], [])).hello())


def test_one_passive_party_cannot_take_another_ones_slot(small_credit):
    """Party 2's host (its own identity key) answers the handshake meant for party 1."""
    federation = Federation(n_parties=3)
    with federation.onetee_enclave() as enclave:
        party2_host = passive_side(federation, 2, small_credit)
        party2_host.index = 1  # claims slot 1, but can only sign with party 2's key
        with pytest.raises(AttestationError):
            connect_honest(enclave, party2_host, 1, federation.channel_open())


def test_ntee_passive_party_cannot_take_another_ones_slot():
    federation = Federation(n_parties=3)
    env0, env2 = federation.env(0), federation.env(2)
    code = enclave_code("teeboost.protocols.ntee.enclave.program", env0.trusted_roots, env0.options)
    with env0.backend().load(code, label="active") as active, env2.backend().load(code, label="p2") as passive2:
        active.ecall("init", init_message("ntee", "active", 0, SplitCriteria(), 32, env0, federation.run_id))
        passive2.ecall("init", init_message("ntee", "passive", 2, SplitCriteria(), 32, env2, federation.run_id))
        hello = active.ecall("hello", (1).to_bytes(4, "big"))  # the channel meant for party 1
        parts = em.unpack_records(active.ecall("finish_initiator", (1).to_bytes(4, "big") +
                                               passive2.ecall("respond", hello)))
        context = run_context_of(env0, "ntee", federation.run_id, 32, SplitCriteria())
        signature0 = federation.identities[0].sign(party_statement("initiator", 0, context, parts[1]))
        handshake_hash = passive2.ecall("finish_responder", em.pack_records({0: parts[0], 1: signature0}))
        signature2 = federation.identities[2].sign(party_statement("responder", 1, context, handshake_hash))
        with pytest.raises(AttestationError):
            active.ecall("confirm", (1).to_bytes(4, "big") + signature2)
        with pytest.raises(EnclaveError, match="stopped after a failed ecall"):  # and it serves nothing more
            active.ecall("gradients", ntee.gradients_in(0, np.arange(4), EncodedGradients(
                np.ones(4, np.int64), np.ones(4, np.int64), GradientCodec(20))))


# ---------------------------------------------------------------- 4. host-chosen bin counts

def test_bin_counts_come_from_the_party_not_the_host(monkeypatch, small_credit):
    """The active host rewrites the bin counts it heard in the handshake (every feature but one
    to a single bin, the exploit that forced splits onto one feature). The enclave scores
    with the counts the party sealed itself, so the model is exactly plain's."""
    from teeboost.parties import active as active_party

    original = active_party.handshake

    def lying_handshake(channel, protocol, n_rows, max_bin, **run):
        replies = original(channel, protocol, n_rows, max_bin, **run)
        return {p: replace(r, n_value_bins=np.where(np.arange(r.n_value_bins.size) == 1, r.n_value_bins, 1)
                           .astype(np.int32)) for p, r in replies.items()}

    monkeypatch.setattr("teeboost.federation.handshake", lying_handshake)
    active, passives = small_credit
    model, _ = train_local(active, passives, PARAMS, "onetee", options=SIMULATED)
    monkeypatch.undo()
    reference, _ = train_local(active, passives, PARAMS)
    assert federated_descriptions(model) == federated_descriptions(reference)


# ---------------------------------------------------------------- 5. host-supplied partitions and gains

@pytest.mark.parametrize("protocol", ["ntee", "onetee"])
def test_partition_other_than_the_winning_split_is_refused(monkeypatch, small_credit, protocol):
    """The host announces a left set of its own choosing for a node a passive party won (to
    make every party score a row subset the host picked)."""
    from teeboost.protocols.enclave.partition import Announcements

    original = Announcements.add

    def add(self, owner, node, left, right, bits):
        went_left = np.unpackbits(bits).astype(bool)
        if owner != 0 and went_left.sum() > 1:
            went_left[np.flatnonzero(went_left)[0]] = False  # one row moved to the other child
        return original(self, owner, node, left, right, np.packbits(went_left))

    monkeypatch.setattr(Announcements, "add", add)
    active, passives = small_credit
    with pytest.raises(ProtocolError, match="not the split party 1 won"):  # deep enough for passive wins to be announced
        train_local(active, passives, DEEP, protocol, options=SIMULATED)


@pytest.mark.parametrize("protocol", ["ntee", "onetee"])
def test_host_cannot_ask_about_nodes_outside_the_tree(monkeypatch, small_credit, protocol):
    """At depth two the host asks again about the root (a node it already split)."""
    cls = ntee.NteeActive if protocol == "ntee" else onetee.OneTeeActive
    original = cls.find_splits

    def find_splits(self, nodes, node_rows, limits=None):
        if nodes != [0]:
            nodes = [0]
        return original(self, nodes, node_rows, limits)

    monkeypatch.setattr(cls, "find_splits", find_splits)
    active, passives = small_credit
    # the enclave refuses (N-TEE); in 1-TEE the passive parties, which hear the request in the clear, refuse first
    with pytest.raises(ProtocolError, match="not leaves created by the last partitions|not a node of the current tree"):
        train_local(active, passives, PARAMS, protocol, options=SIMULATED)


@pytest.mark.parametrize("protocol", ["ntee", "onetee"])
def test_host_claimed_gains_are_recomputed(monkeypatch, small_credit, protocol):
    """The host no longer sends a gain for its own split, only what the split sends left; it
    claims a left set with inflated sums to win, and then must partition accordingly: the
    partition it announces does not carry those sums and is refused."""
    original = ntee.own_candidates

    def inflate(*args):
        best, valid, left = original(*args)
        left = left.copy()
        left[:, 0] += 10**9  # a much better-looking split than the data allows
        return best, valid, left

    monkeypatch.setattr(ntee, "own_candidates", inflate)
    monkeypatch.setattr(onetee, "own_candidates", inflate)
    active, passives = small_credit
    with pytest.raises(ProtocolError, match="not the split party 0 won"):
        train_local(active, passives, PARAMS, protocol, options=SIMULATED)


# ---------------------------------------------------------------- 6. measurement

def test_measurement_covers_every_module_the_enclave_runs():
    env = Federation().env(0)
    for program in ("teeboost.protocols.ntee.enclave.program", "teeboost.protocols.onetee.enclave.program"):
        code = enclave_code(program, env.trusted_roots, env.options)
        names = set(code.modules)
        assert {"teeboost", "teeboost.tee", "teeboost.tee.runtime", "teeboost.tee.sealing",
                "teeboost.tee.platform_file", "teeboost.errors"} <= names
        host_side = {n for n in names if n.startswith(("teeboost.parties", "teeboost.deploy", "teeboost.federation",
                                                       "teeboost.cli", "teeboost.config", "teeboost.estimator",
                                                       "teeboost.tee.simulated", "teeboost.tee.identity",
                                                       "teeboost.protocols.ntee.hosts", "teeboost.protocols.onetee.hosts",
                                                       "teeboost.protocols.env", "teeboost.protocols.messages"))
                     or (n.startswith("teeboost.transport.") and n != "teeboost.transport.serde")}
        assert not host_side, host_side
        with env.backend().load(code, label="measured") as enclave:
            assert enclave.measurement == code.measurement  # the loader measured exactly these bytes


def test_unmeasured_module_is_refused_inside_the_enclave(tmp_path):
    """A program that imports a teeboost module at run time that is not in its measured bundle
    stops with a named error instead of loading it from disk (or from a stale bytecode cache)."""
    program = (b"import importlib\n\ndef ecall_sneak(rt, payload):\n"
               b"    return str(importlib.import_module('teeboost.federation')).encode()\n")
    code = EnclaveCode.from_source("sneaky", program)
    assert "teeboost.federation" not in code.modules
    with SimulatedBackend(SimulatedPlatform.create()).load(code, label="sneaky") as enclave:
        with pytest.raises(EnclaveError, match="not part of the measured enclave code"):
            enclave.ecall("sneak")


def test_enclave_started_with_patched_code_is_refused(monkeypatch, small_credit):
    """The active host launches its enclave with one patched trusted module (it writes the
    launch bundle): the measurement changes, and passive parties refuse to talk to it."""
    original = onetee.enclave_code

    def patched(program, roots, options):
        code = original(program, roots, options)
        modules = dict(code.modules)
        modules["teeboost.tee.channel"] += b"\nLEAK = True\n"
        return EnclaveCode(code.name, code.program, modules, code.config)

    calls = {"n": 0}

    def active_only(program, roots, options):  # the passive party computes the genuine measurement
        calls["n"] += 1
        return patched(program, roots, options) if calls["n"] == 1 else original(program, roots, options)

    monkeypatch.setattr(onetee, "enclave_code", active_only)
    active, passives = small_credit
    with pytest.raises(ProtocolError, match="AttestationError: remote attestation failed"):
        train_local(active, passives, PARAMS, "onetee", options=SIMULATED)


# ---------------------------------------------------------------- 7. simulated quotes

def test_simulated_enclaves_need_an_explicit_switch(small_credit):
    active, passives = small_credit
    for protocol in ("ntee", "onetee"):
        with pytest.raises(ConfigError, match="--allow-simulated-tee"):
            train_local(active, passives, PARAMS, protocol)


def test_a_passive_party_that_refuses_simulated_quotes_refuses_them(small_credit):
    """1-TEE: the active party allows the simulated backend, the passive party does not."""
    federation = Federation()
    strict_env = federation.env(1, ProtocolOptions())
    from teeboost.core.binning import fit_bins
    from teeboost.core.columns import PartyColumns

    data = small_credit[1][0]
    bins = fit_bins(data.features, 32)
    strict = onetee.OneTeePassive(PartyColumns(bins, bins.transform(data.features)), strict_env, 1)
    strict.bind_run(federation.run_id, served=False)
    with federation.onetee_enclave() as enclave:
        with pytest.raises(AttestationError):
            connect_honest(enclave, strict, 1, federation.channel_open())


# ---------------------------------------------------------------- 8. replay, reorder, duplicate

def _tamper_records(monkeypatch, kind, edit):
    """The active host edits the sealed records it relays (SealedMessage of ``kind``)."""
    original = inmemory.answer_frame
    state: dict = {"seen": []}

    def answer(handler, frame):
        reply = serde.decode(original(handler, frame))
        if isinstance(reply, ntee.SealedMessage) and reply.kind == kind:
            state["seen"].append(reply)
            reply = edit(reply, state)
        return serde.encode(reply)

    monkeypatch.setattr(inmemory, "answer_frame", answer)


@pytest.mark.parametrize("protocol, kind, options", [("ntee", "candidates", SIMULATED), ("onetee", "sums", INDEX_SETS)])
def test_replayed_sealed_record_is_refused(monkeypatch, small_credit, protocol, kind, options):
    _tamper_records(monkeypatch, kind, lambda r, s: replace(r, record=s["seen"][0].record) if len(s["seen"]) > 1 else r)
    active, passives = small_credit
    with pytest.raises(IntegrityError):
        train_local(active, passives, PARAMS, protocol, options=options)


def _relay_records_to_passives(monkeypatch, edit):
    """The 1-TEE active host edits the records its enclave sealed to passive parties (each
    tree's rows, each level's partitions) on their way: ``edit(msg, state) -> msg``."""
    original = inmemory.answer_frame
    state: dict = {"seen": []}

    def answer(handler, frame):
        msg = serde.decode(frame)
        if isinstance(msg, ntee.SealedMessage) and msg.kind in ("rows", "level"):
            state["seen"].append(msg)
            frame = serde.encode(edit(msg, state))
        return original(handler, frame)

    monkeypatch.setattr(inmemory, "answer_frame", answer)


def _flip_last_bit(msg, state):
    record = bytearray(msg.record)
    record[-1] ^= 1
    return replace(msg, record=bytes(record))


def _replay_first_level(msg, state):
    levels = [m for m in state["seen"] if m.kind == "level"]
    return replace(msg, record=levels[0].record) if msg.kind == "level" and len(levels) > 1 else msg


@pytest.mark.parametrize("edit", [_flip_last_bit, _replay_first_level], ids=["tampered", "replayed"])
def test_onetee_records_to_passive_parties_cannot_be_altered_or_replayed(monkeypatch, small_credit, edit):
    """Bins-once: the rows and partitions a passive party works on come from the enclave,
    sealed; the host cannot show it others (an altered or replayed record fails to open)."""
    _relay_records_to_passives(monkeypatch, edit)
    active, passives = small_credit
    with pytest.raises(ProtocolError, match="IntegrityError"):
        train_local(active, passives, PARAMS, "onetee", options=BINS_ONCE)


def test_bins_once_passive_party_takes_rows_and_partitions_only_from_the_enclave(small_credit):
    """In a bins-once run the host cannot hand a passive party rows, partitions or masked
    gradients in the clear (to make it partition rows of the host's choosing): only records
    its enclave sealed count."""
    from teeboost.protocols.enclave.partition import HistogramRequest

    federation = Federation()
    honest = passive_side(federation, 1, small_credit)
    with federation.onetee_enclave() as enclave:
        connect_honest(enclave, honest, 1, federation.channel_open(bins_once=True))
        empty = np.empty(0, dtype=np.int32)
        with pytest.raises(ProtocolError, match="only from the enclave"):
            honest.handle(HistogramRequest(0, np.zeros(1, dtype=np.int32), empty, empty, empty,
                                           np.empty(0, dtype=np.uint8)))
        encodings, offsets, payload = encode_row_sets([np.arange(10)], 3000)
        with pytest.raises(ProtocolError, match="sends no masked ones"):
            honest.handle(onetee.MaskedGradients(0, 3000, encodings, offsets, payload, np.zeros(10, np.uint64),
                                                 np.zeros(10, np.uint64)))
        with pytest.raises(IntegrityError):  # a record the host made up does not open
            honest.handle(ntee.SealedMessage(0, "rows", b"\0" * 64))


def _two_passive_parties(credit_parties):
    """The first 2,000 rows, with the passive columns shared by two parties (2 and 3 columns)."""
    from teeboost.data import PartyData

    active, (passive,) = credit_parties
    rows = np.arange(2000)
    halves = [PartyData(f"passive-{i}", "test", passive.features[rows][:, cols],
                        tuple(passive.feature_names[c] for c in cols), ids=active.take(rows).ids)
              for i, cols in ((1, [0, 1]), (2, [2, 3, 4]))]
    return active.take(rows), halves


def test_onetee_records_to_passive_parties_cannot_be_swapped(monkeypatch, credit_parties):
    """Three parties, bins-once: the host sends party 1 the level record sealed to party 2."""
    active, halves = _two_passive_parties(credit_parties)
    original = onetee.OneTeeActive._find_summed_in_enclave

    def swap(self, nodes, node_rows, limits=None):
        real_request_all = self.channel.request_all

        def swapped(requests):
            if sorted(requests) == [1, 2] and all(m.kind == "level" for m in requests.values()):
                requests = {1: requests[2], 2: requests[1]}
            return real_request_all(requests)

        self.channel.request_all = swapped
        try:
            return original(self, nodes, node_rows, limits)
        finally:
            self.channel.request_all = real_request_all

    monkeypatch.setattr(onetee.OneTeeActive, "_find_summed_in_enclave", swap)
    with pytest.raises(ProtocolError, match="IntegrityError"):
        train_local(active, halves, PARAMS, "onetee", options=BINS_ONCE)


def test_reordered_and_swapped_sealed_records_are_refused(monkeypatch, credit_parties):
    """Three parties: the host swaps party 1's and party 2's records of one level."""
    active, halves = _two_passive_parties(credit_parties)
    original = onetee.OneTeeActive.find_splits

    def swap(self, nodes, node_rows, limits=None):
        real_unpack = em.pack_records

        def swapped(records):
            if sorted(records) == [1, 2]:
                records = {1: records[2], 2: records[1]}
            return real_unpack(records)

        monkeypatch.setattr(onetee.em, "pack_records", swapped)
        try:
            return original(self, nodes, node_rows, limits)
        finally:
            monkeypatch.setattr(onetee.em, "pack_records", real_unpack)

    monkeypatch.setattr(onetee.OneTeeActive, "find_splits", swap)
    with pytest.raises(IntegrityError):
        train_local(active, halves, PARAMS, "onetee", options=INDEX_SETS)


# ---------------------------------------------------------------- 9. quotes from elsewhere

def test_quote_for_another_measurement_is_refused(small_credit):
    """The active host answers a passive party's channel open from a program of its own on the
    genuine platform (real quote, real platform key, other measurement)."""
    federation = Federation()
    backend = SimulatedBackend(federation.platforms[0])
    helper = EnclaveCode.from_file(TEST_PROGRAM, config={"trusted_roots": []})
    honest = passive_side(federation, 1, small_credit)
    with backend.load(helper, label="host's own") as own:
        hello = honest.handle(federation.channel_open())
        reply = own.ecall("respond", b"P" + hello.hello)  # a genuine quote of other code
        with pytest.raises(AttestationError):
            honest.handle(onetee.ChannelAccept(reply))


def test_quote_replayed_from_another_run_is_refused(small_credit):
    federation = Federation()
    first = passive_side(federation, 1, small_credit)
    with federation.onetee_enclave() as enclave:
        hello = first.handle(federation.channel_open())
        recorded = enclave.ecall("respond", (1).to_bytes(4, "big") + hello.hello)
    later = passive_side(federation, 1, small_credit, run_id="run-b")  # a later run: fresh nonce, new run id
    later.handle(federation.channel_open(run_id="run-b"))
    with pytest.raises(AttestationError):
        later.handle(onetee.ChannelAccept(recorded))


def test_a_run_with_other_pinned_identities_is_refused(small_credit):
    """The active host initialises its enclave with its own key in party 1's slot and tells
    party 1 the true keys: the quote binds the keys the enclave really holds."""
    federation = Federation()
    honest = passive_side(federation, 1, small_credit)
    rogue = Federation()
    rogue_env = dataclasses.replace(federation.env(0), party_keys=(federation.identities[0].public_key,
                                                                   rogue.identities[0].public_key))
    enclave = rogue_env.backend().load(enclave_code("teeboost.protocols.onetee.enclave.program", rogue_env.trusted_roots, rogue_env.options))
    with enclave:
        enclave.ecall("init", init_message("onetee", "active", 0, SplitCriteria(), 32, rogue_env, federation.run_id))
        hello = honest.handle(federation.channel_open())  # the true keys
        with pytest.raises(AttestationError):
            honest.handle(onetee.ChannelAccept(enclave.ecall("respond", (1).to_bytes(4, "big") + hello.hello)))
    with pytest.raises(AttestationError, match="identity keys"):  # told the rogue keys, the party refuses at once
        passive_side(federation, 1, small_credit).handle(onetee.ChannelOpen(
            False, federation.run_id, 32, 128, list(criteria_tuple(SplitCriteria())), rogue_env.keys_array()))


def test_honest_runs_still_grow_plains_trees(small_credit):
    active, passives = small_credit
    reference = federated_descriptions(train_local(active, passives, PARAMS)[0])
    for protocol, options in (("ntee", SIMULATED), ("onetee", SIMULATED), ("onetee", BINS_ONCE)):
        assert federated_descriptions(train_local(active, passives, PARAMS, protocol, options=options)[0]) == reference


# ---------------------------------------------------------------- found by the red team

def test_ntee_passive_enclave_with_other_split_criteria_is_refused(monkeypatch, small_credit):
    """A passive host initialises its own enclave with a negative lambda and no minimum child
    weight (so that isolating single rows wins every node and reveals the largest gradients).
    The criteria are part of the run context every quote binds: attestation fails."""
    original = ntee.init_message

    def rogue(protocol, role, party, criteria, max_bin, env, run_id):
        if role == "passive":
            criteria = SplitCriteria(reg_lambda=0.001, min_child_weight=0.0)
        return original(protocol, role, party, criteria, max_bin, env, run_id)

    monkeypatch.setattr(ntee, "init_message", rogue)
    active, passives = small_credit
    with pytest.raises(AttestationError):
        train_local(active, passives, PARAMS, "ntee", options=SIMULATED)


def test_enclave_refuses_out_of_range_split_criteria():
    federation = Federation()
    env = federation.env(0)
    with env.backend().load(enclave_code("teeboost.protocols.onetee.enclave.program", env.trusted_roots, env.options)) as enclave:
        with pytest.raises(ProtocolError, match="out of range"):
            enclave.ecall("init", init_message("onetee", "active", 0, SplitCriteria(reg_lambda=-0.999), 32, env, "r"))


def test_a_peer_score_must_be_the_gain_of_its_promised_split():
    from teeboost.protocols.enclave.tree import CheckedTree

    rows = np.arange(6)
    tree = CheckedTree(0, 6, rows, np.array([4, -4, 4, -4, 4, -4]) * 1024, np.full(6, 1024), GradientCodec(10),
                       SplitCriteria(min_child_weight=0.0))
    tree.begin_level(0, np.array([0]), *(np.empty(0, np.int32),) * 3, np.empty(0, np.uint8))
    honest = np.array([3 * 4 * 1024, 3 * 1024, 3], dtype=np.int64)  # rows 0, 2, 4 left
    from teeboost.core.split import split_gains

    true_gain = float(split_gains(honest, tree.totals(0), tree.codec, tree.criteria))
    assert tree.check_gain(1, 0, true_gain, honest).gain == true_gain
    with pytest.raises(ProtocolError, match="gain its split does not have"):
        tree.check_gain(1, 0, true_gain * 1000, honest)


def test_masked_gradients_altered_in_relay_are_detected_and_the_enclave_stops(monkeypatch, small_credit):
    """The 1-TEE active host adds +1/-1 to two rows' masked gradients on the way to a passive
    party (an equality oracle on bins, if the enclave's check answered per try): the party's
    digest of what it received differs, the enclave refuses and then serves nothing more."""
    original = onetee.OneTeeActive._send_gradients
    captured = {}

    def relay(self, tree_index, rows, gradients):
        captured["enclave"] = self.enclave
        real_request_all = self.channel.request_all

        def tamper(requests):
            def shift(g):
                d = np.zeros(g.size, dtype=np.int64)
                d[:2] = (1, -1)
                return g + d.view(np.uint64)

            requests = {p: replace(m, g=shift(m.g))
                        if isinstance(m, onetee.MaskedGradients) else m for p, m in requests.items()}
            return real_request_all(requests)

        self.channel.request_all = tamper
        try:
            original(self, tree_index, rows, gradients)
        finally:
            self.channel.request_all = real_request_all

    monkeypatch.setattr(onetee.OneTeeActive, "_send_gradients", relay)
    monkeypatch.setattr(onetee.OneTeeActive, "close", lambda self: None)  # keep it to probe it afterwards
    active, passives = small_credit
    with pytest.raises(ProtocolError, match="altered on the way"):
        train_local(active, passives, PARAMS, "onetee", options=INDEX_SETS)
    with pytest.raises(EnclaveError, match="stopped after a failed ecall"):
        captured["enclave"].ecall("mask", b"")
    captured["enclave"].close()


# ---------------------------------------------------------------- found by the red team: 1-TEE bins-once

def _passive_policy(monkeypatch, policy):
    """Every passive party of ``train_local`` serves under ``policy`` (its own [policy])."""
    import teeboost.federation as federation_module

    original = federation_module.build_passive

    def build(*args, **kwargs):
        return original(*args, **{**kwargs, "policy": policy})

    monkeypatch.setattr(federation_module, "build_passive", build)


class _Stop(Exception):
    """The attacking host is done."""


def test_onetee_enclave_computes_nothing_the_passive_parties_did_not_acknowledge(monkeypatch, small_credit):
    """Red team (MEDIUM, unlimited oracle): the active host calls its enclave's entry points
    itself and relays nothing to party 1: per query a "tree" of chosen gradients (+2^12 on
    one row's g), its root level and the winning gain, which shows which side of party 1's
    best split the row falls. It made 201 such queries under party 1's policy of 2 trees of
    depth 3, party 1 handling no message. Now no level is computed before every passive party
    has acknowledged (sealed, over its own channel) the enclave's last record to it: the first
    query is refused and the enclave serves nothing more."""
    from teeboost.policy import Policy

    _passive_policy(monkeypatch, Policy(max_trees=2, max_depth=3))
    seen: dict = {"answers": 0, "frames": 0}
    original_answer = inmemory.answer_frame

    def count(handler, frame):
        seen["frames"] += 1
        return original_answer(handler, frame)

    monkeypatch.setattr(inmemory, "answer_frame", count)

    def attack(self, nodes, node_rows, limits=None):
        seen["enclave"], frames = self.enclave, seen["frames"]
        rows = np.flatnonzero(self._gradients.h)
        empty = np.empty(0, dtype=np.int32)
        for query in range(201):
            g = self._gradients.g.copy()
            g[rows[query % rows.size]] += 2 ** 12
            try:
                self.enclave.ecall("gradients", ntee.gradients_in(query, rows, EncodedGradients(
                    g, self._gradients.h, self._gradients.codec)))
                self.enclave.ecall("level", serde.encode(em.LevelIn(query, np.zeros(1, np.int32), empty, empty, empty,
                                                                    np.empty(0, np.uint8))))
                chosen = serde.decode(self.enclave.ecall("choose_own", serde.encode(em.OwnSplitsIn(
                    query, np.zeros(1, np.int32), np.zeros(1, bool), np.zeros((1, 3), np.int64)))))
            except ProtocolError as exc:
                seen["refusal"] = str(exc)
                break
            seen["answers"] += int(chosen.parties[0] == 1)
        seen["party_frames"] = seen["frames"] - frames
        raise _Stop

    monkeypatch.setattr(onetee.OneTeeActive, "find_splits", attack)
    monkeypatch.setattr(onetee.OneTeeActive, "close", lambda self: None)  # keep the enclave to probe it
    active, passives = small_credit
    with pytest.raises(_Stop):
        train_local(active, passives, PARAMS, "onetee", options=BINS_ONCE)
    try:
        assert seen["party_frames"] == 0  # party 1 heard nothing of it
        assert seen["answers"] == 0 and "have not acknowledged the enclave's last record" in seen["refusal"]
        with pytest.raises(EnclaveError, match="stopped after a failed ecall"):
            seen["enclave"].ecall("choose_own", b"")
    finally:
        seen["enclave"].close()


@pytest.mark.parametrize("params, refusal", [
    (BoostParams(n_trees=4, max_depth=3, subsample=0.8, max_bin=32), "trees are grown once each, in increasing order, below 2"),
    (BoostParams(n_trees=2, max_depth=5, subsample=0.8, max_bin=32), "a tree of at most 3 levels"),
], ids=["more-trees", "deeper"])
def test_onetee_enclave_keeps_to_the_passive_parties_limits(monkeypatch, small_credit, params, refusal):
    """The active host relays every record but grows more trees, or deeper ones, than party
    1's policy allows (2 trees of depth 3; set up within it, then grown beyond): the enclave
    holds to the limits party 1 sealed to it, so it computes at most 2 x 3 levels."""
    from teeboost.policy import Policy
    from teeboost.tee.simulated import SimulatedEnclave

    _passive_policy(monkeypatch, Policy(max_trees=2, max_depth=3))
    levels = []
    original = SimulatedEnclave.ecall

    def ecall(self, name, payload=b"", **kwargs):
        reply = original(self, name, payload, **kwargs)
        if name == "level":
            levels.append(serde.decode(bytes(payload)).tree)
        return reply

    monkeypatch.setattr(SimulatedEnclave, "ecall", ecall)
    active, passives = small_credit
    with pytest.raises(ProtocolError, match=refusal):
        train_local(active, passives, params, "onetee", options=BINS_ONCE)
    assert len(levels) <= 2 * 3 and set(levels) <= {0, 1} and max(np.bincount(levels)) <= 3


@pytest.mark.parametrize("edit", ["replayed", "forged"])
def test_onetee_acknowledgements_cannot_be_forged_or_replayed(monkeypatch, small_credit, edit):
    """The active host cannot acknowledge a record in a passive party's name: it replays the
    party's earlier acknowledgement, or makes one up; neither opens."""
    def change(reply, state):
        if edit == "forged":
            return replace(reply, record=os.urandom(len(reply.record)))
        return replace(reply, record=state["seen"][0].record) if len(state["seen"]) > 1 else reply

    _tamper_records(monkeypatch, "ack", change)
    active, passives = small_credit
    with pytest.raises(IntegrityError):
        train_local(active, passives, PARAMS, "onetee", options=BINS_ONCE)


def _children_edit(edit):
    """The host's split requests, with the children ids it names changed by ``edit``."""
    def request(original):
        def split_request(self, party, splits, children):
            return original(self, party, splits, edit(splits, list(children)))
        return split_request
    return request


def _swap_sides(splits, children):
    return [(right, left) for left, right in children]


def _reuse_the_root(splits, children):
    return [(0, right) if split.node_id != 0 else (left, right) for split, (left, right) in zip(splits, children)]


@pytest.mark.parametrize("protocol, edit, refusal", [
    ("onetee", _swap_sides, "sealed split locators"),
    ("onetee", _reuse_the_root, "sealed split locators"),
    ("plain", _reuse_the_root, "already exist in this tree"),
], ids=["onetee-swapped", "onetee-reused", "plain-reused"])
def test_split_requests_cannot_rename_children(monkeypatch, small_credit, protocol, edit, refusal):
    """Red team (LOW): the ids of a won split's children travelled in the clear, unchecked: the
    host could swap them (the passive party then files node 1's rows under node 2) or name a
    node already split (the root: a parent cycle, and the passive party's depth walk never
    returns). 1-TEE seals the children's ids with the split, and every party refuses an id
    its tree already used."""
    from teeboost.protocols.scoring import level_loop as scoring

    if protocol == "onetee":
        monkeypatch.setattr(onetee.OneTeeActive, "_split_request",
                            _children_edit(edit)(onetee.OneTeeActive._split_request))
    else:
        monkeypatch.setattr(scoring.ActiveSplitting, "_split_request",
                            _children_edit(edit)(scoring.ActiveSplitting._split_request))
    active, passives = small_credit
    with pytest.raises(ProtocolError, match=refusal):
        train_local(active, passives, BoostParams(n_trees=3, max_depth=2, subsample=0.8, max_bin=32), protocol,
                    options=BINS_ONCE if protocol == "onetee" else None)


def test_onetee_enclave_numbers_the_children_itself(small_credit):
    """The host announces, for a split the enclave chose, children of other ids than the ones
    it sealed to the winner: refused."""
    from teeboost.protocols.enclave.tree import CheckedTree

    rows = np.arange(6)
    tree = CheckedTree(0, 6, rows, np.array([4, -4, 4, -4, 4, -4]) * 1024, np.full(6, 1024), GradientCodec(10),
                       SplitCriteria(min_child_weight=0.0))
    none = np.empty(0, np.int32)
    tree.begin_level(0, np.array([0]), none, none, none, np.empty(0, np.uint8))
    left = np.array([3 * 4 * 1024, 3 * 1024, 3], dtype=np.int64)
    tree.choose([[(1, NodeBest(1.0, -1, -1, False), left, None)]])
    assert tree.children(0) == (1, 2)
    bits = np.packbits(np.array([1, 0, 1, 0, 1, 0], dtype=bool))
    with pytest.raises(ProtocolError, match="not the ids the enclave gave"):
        tree.begin_level(0, np.array([2, 1]), np.zeros(1, np.int32), np.array([2], np.int32), np.array([1], np.int32),
                         bits)


def test_onetee_channel_is_only_for_this_training_run(small_credit):
    """Red team (LOW-MEDIUM, cross-run unsealing): the passive party accepted any run id in the
    channel open. Now the enclave's run must be the one the handshake named, and a run id this
    party served before is used again only to resume it from the party's own checkpoint."""
    from teeboost.federation import build_passive
    from teeboost.protocols.messages import Hello

    federation = Federation()
    data = small_credit[1][0]
    served: set[str] = set()

    def party():
        return build_passive(1, data, BoostParams(**SMALL), "onetee", federation.env(1, BINS_ONCE), served_runs=served)

    first = party()
    first.handle(Hello("onetee", 1, data.n_rows, 32, "run-a"))
    first.handle(federation.channel_open(bins_once=True))  # this training's run: accepted
    other = party()
    other.handle(Hello("onetee", 1, data.n_rows, 32, "run-b"))
    with pytest.raises(ProtocolError, match="set up for run 'run-a'; this training is run 'run-b'"):
        other.handle(federation.channel_open(bins_once=True))
    again = party()  # a later session reusing run-a, without resuming it
    again.handle(Hello("onetee", 1, data.n_rows, 32, "run-a"))
    with pytest.raises(ProtocolError, match="served before"):
        again.handle(federation.channel_open(bins_once=True))


def test_a_sealed_checkpoint_opens_only_if_the_passive_party_resumes_it(monkeypatch, tmp_path, small_credit):
    """Red team (LOW-MEDIUM): after an interrupted run, party 1's data changed; the active host
    resumes its own checkpoint but does not ask party 1 to resume (party 1 would refuse: its
    data changed) and restores its enclave's sealed bins of the old data, so party 1 is never
    asked for bins. The sealing context binds a value party 1 chose for the run and gives
    again only when it resumes it: the old blob does not open."""
    from teeboost.data import PartyData
    from teeboost.protocols.messages import Ack, ResumeFrom
    from teeboost.transport.inmemory import InMemoryChannel

    active, passives = small_credit
    with pytest.raises(_Stop):
        train_local(active, passives, PARAMS, "onetee", options=BINS_ONCE, checkpoint_dir=tmp_path,
                    on_tree=lambda progress: (_ for _ in ()).throw(_Stop) if progress.tree_index == 1 else None)
    old = passives[0]
    shuffled = np.random.default_rng(3).permutation(old.n_rows)
    changed = PartyData(old.name, old.source, old.features[shuffled], old.feature_names, ids=old.ids)
    original = InMemoryChannel.request_all

    def without_resume(self, requests):
        if all(isinstance(m, ResumeFrom) for m in requests.values()):
            return {p: Ack() for p in requests}
        return original(self, requests)

    monkeypatch.setattr(InMemoryChannel, "request_all", without_resume)
    with pytest.raises(IntegrityError):
        train_local(active, [changed], PARAMS, "onetee", options=BINS_ONCE, checkpoint_dir=tmp_path, resume=True)
