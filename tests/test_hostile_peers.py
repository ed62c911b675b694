"""A malicious passive party: every lie below is caught and named, never turned into a model.

The passive party's replies are edited on their way to the active party (or, for what a
passive host seals to an enclave, before sealing: the host holds its own channel keys). The
active party's code and the enclave program under test are the real ones.
"""

from dataclasses import replace

import grpc
import numpy as np
import pytest

from teeboost.config import BoostParams, ProtocolOptions
from teeboost.core.binning import fit_bins
from teeboost.errors import IntegrityError, ProtocolError
from teeboost.federation import train_local
from teeboost.protocols.messages import HelloReply, RouteReply
from teeboost.parties.psi import PsiPassive, PsiReply, intersect_as_active
from teeboost.protocols.enclave import messages as em
from teeboost.protocols.ntee.hosts import SealedMessage
from teeboost.protocols.enclave.partition import SplitReply
from teeboost.protocols.scoring.plain import HistogramReply
from teeboost.transport import inmemory, serde
from teeboost.transport.grpc_transport import GrpcChannel, Peer
from teeboost.transport.inmemory import InMemoryChannel
from teeboost.transport.proto.envelope_pb2 import Envelope

PARAMS = BoostParams(n_trees=3, max_depth=3, subsample=0.8, max_bin=32)
INDEX_SETS = ProtocolOptions(onetee_bins_once=False, allow_simulated_tee=True)  # the seed paper's 1-TEE


def hostile(monkeypatch, edit):
    """Route every passive reply through ``edit(reply, state) -> reply`` (``state`` persists,
    so a party can keep earlier replies and replay them)."""
    original = inmemory.answer_frame
    state: dict = {"count": {}}

    def answer(handler, frame):
        reply = serde.decode(original(handler, frame))
        kind = type(reply).__name__
        state["count"][kind] = state["count"].get(kind, 0) + 1
        return serde.encode(edit(reply, state))

    monkeypatch.setattr(inmemory, "answer_frame", answer)


def train(small_credit, protocol="plain", **kwargs):
    active, passives = small_credit
    if protocol in ("ntee", "onetee") and kwargs.get("options") is None:
        kwargs["options"] = ProtocolOptions(allow_simulated_tee=True)
    return train_local(active, passives, PARAMS, protocol, **kwargs)


def few_bin_feature(small_credit):
    """A passive feature with fewer value bins than max_bin (so some bins are out of range)."""
    bins = fit_bins(small_credit[1][0].features, PARAMS.max_bin)
    return int(np.argmin(bins.n_value_bins)), bins.n_value_bins


# --- histograms (plain; SecureBoost decrypts to the same arrays and runs the same checks) ---

def test_histogram_mass_in_out_of_range_bins(monkeypatch, small_credit):
    feature, n_bins = few_bin_feature(small_credit)

    def edit(reply, state):
        if isinstance(reply, HistogramReply):
            sums = reply.sums.copy()
            sums[:, feature, n_bins[feature]] += sums[:, feature, 0]  # bin that does not exist
            sums[:, feature, 0] = 0
            return replace(reply, sums=sums)
        return reply

    hostile(monkeypatch, edit)
    with pytest.raises(ProtocolError, match="out-of-range bins"):
        train(small_credit)


def test_histogram_with_a_feature_missing(monkeypatch, small_credit):
    hostile(monkeypatch, lambda r, s: replace(r, sums=r.sums[:, :-1]) if isinstance(r, HistogramReply) else r)
    with pytest.raises(ProtocolError, match="histograms of shape"):
        train(small_credit)


def test_histogram_with_an_inflated_bin_sum(monkeypatch, small_credit):
    def edit(reply, state):
        if isinstance(reply, HistogramReply):
            sums = reply.sums.copy()
            sums[0, 0, 0, 0] += 1
            return replace(reply, sums=sums)
        return reply

    hostile(monkeypatch, edit)
    with pytest.raises(ProtocolError, match="do not add up"):
        train(small_credit)


def test_replay_of_an_earlier_trees_histograms(monkeypatch, small_credit):
    def edit(reply, state):
        if isinstance(reply, HistogramReply):
            state.setdefault("first", reply)
            if reply.tree == 1:
                return state["first"]
        return reply

    hostile(monkeypatch, edit)
    with pytest.raises(ProtocolError, match="answered for tree 0, not tree 1"):
        train(small_credit)


def test_replay_of_an_earlier_level_within_the_tree(monkeypatch, small_credit):
    def edit(reply, state):
        if isinstance(reply, HistogramReply):
            state.setdefault("root", reply)
            if state["count"]["HistogramReply"] == 2:
                return state["root"]
        return reply

    hostile(monkeypatch, edit)
    with pytest.raises(ProtocolError, match="shape|add up"):
        train(small_credit)


# --- split replies: the winner partitions its node ---

def first_split_reply(edit_split):
    def edit(reply, state):
        if isinstance(reply, SplitReply):
            state.setdefault("first", reply)
            return edit_split(reply, state)
        return reply
    return edit


@pytest.mark.parametrize("protocol", ["plain", "secureboost"])
def test_partition_that_differs_from_the_scored_split(monkeypatch, small_credit, protocol):
    def lie(reply, state):
        bits = reply.left_bits.copy()
        bits[0] ^= 0x80  # move the node's first row to the other child
        return replace(reply, left_bits=bits)

    hostile(monkeypatch, first_split_reply(lie))
    options = ProtocolOptions(key_bits=512, insecure_key_bits=True) if protocol == "secureboost" else None
    with pytest.raises(ProtocolError, match="partitioned node .* differently"):
        train(small_credit, protocol, options=options)


@pytest.mark.parametrize("protocol", ["plain", "ntee", "onetee"])
def test_left_set_of_the_wrong_length(monkeypatch, small_credit, protocol):
    hostile(monkeypatch, first_split_reply(lambda r, s: replace(r, left_bits=r.left_bits[:-1])))
    with pytest.raises(ProtocolError, match="bytes of row masks"):
        train(small_credit, protocol)


@pytest.mark.parametrize("protocol", ["plain", "ntee"])
def test_reused_split_record_id(monkeypatch, small_credit, protocol):
    def reuse(reply, state):
        if reply is not state["first"]:
            records = reply.records.copy()
            records[0] = state["first"].records[0]
            return replace(reply, records=records)
        return reply

    hostile(monkeypatch, first_split_reply(reuse))
    with pytest.raises(ProtocolError, match="already in use"):
        train(small_credit, protocol)


def test_split_reply_missing_a_record(monkeypatch, small_credit):
    hostile(monkeypatch, first_split_reply(lambda r, s: replace(r, records=r.records[:-1])))
    with pytest.raises(ProtocolError, match="one record per split"):
        train(small_credit)


def test_ntee_empty_child(monkeypatch, small_credit):
    """N-TEE's host never sees the winner's histogram; an all-left partition is still refused."""
    hostile(monkeypatch, first_split_reply(lambda r, s: replace(r, left_bits=np.zeros_like(r.left_bits))))
    with pytest.raises(ProtocolError, match="empty child"):
        train(small_credit, "ntee")


# --- routing, handshake, PSI ---

def test_routing_answer_count_wrong(monkeypatch, small_credit):
    def edit(reply, state):
        if isinstance(reply, RouteReply):
            return RouteReply(reply.n_answers - 1, reply.bits)
        return reply

    hostile(monkeypatch, edit)
    with pytest.raises(ProtocolError, match="routing questions"):
        train(small_credit)


@pytest.mark.parametrize("bins, match", [(np.array([40, 3, 3, 3, 3], dtype=np.int32), "invalid bin counts"),
                                         (np.array([], dtype=np.int32), "invalid bin counts")])
def test_handshake_with_impossible_bin_counts(monkeypatch, small_credit, bins, match):
    hostile(monkeypatch, lambda r, s: replace(r, n_value_bins=bins) if isinstance(r, HelloReply) else r)
    with pytest.raises(ProtocolError, match=match):
        train(small_credit)


def test_handshake_with_another_row_count(monkeypatch, small_credit):
    hostile(monkeypatch, lambda r, s: replace(r, n_rows=r.n_rows + 1) if isinstance(r, HelloReply) else r)
    with pytest.raises(ProtocolError, match="rows, expected"):
        train(small_credit)


def test_psi_reply_of_the_wrong_length():
    class ShortPsi(PsiPassive):
        def handle(self, msg):
            reply = super().handle(msg)
            return PsiReply(reply.double_blinded[:-1], reply.theirs) if isinstance(reply, PsiReply) else reply

    channel = InMemoryChannel({1: ShortPsi(np.array(["a", "b", "c"])).handle})
    with pytest.raises(ProtocolError, match="PSI elements"):
        intersect_as_active(channel, np.array(["a", "b", "d"]))


# --- 1-TEE: what a passive host seals to the enclave is checked inside it ---

def sealed_lie(monkeypatch, name, edit):
    """Edit a message a passive host builds before sealing it to the enclave."""
    from teeboost.protocols.onetee import hosts as onetee

    original = getattr(em, name)

    def build(*args):
        return edit(original(*args))

    monkeypatch.setattr(onetee.em, name, build)


def test_onetee_index_sets_naming_rows_outside_the_node(monkeypatch, small_credit):
    def edit(msg):
        if msg.built.size < 2:  # a level where two nodes were built: lend node 0 a row of node 1
            return msg
        n_features = msg.index_counts.shape[1]
        node0 = int(msg.index_counts[0][0].sum()) * n_features  # node 0's index sets, all features
        rows = msg.index_rows.copy()
        rows[0] = msg.index_rows[node0]
        return replace(msg, index_rows=rows)

    sealed_lie(monkeypatch, "MaskedSums", edit)
    with pytest.raises(ProtocolError, match="not the node's rows"):
        train(small_credit, "onetee", options=INDEX_SETS)


def test_onetee_index_sets_naming_rows_beyond_the_data(monkeypatch, small_credit):
    def edit(msg):
        rows = msg.index_rows.copy()
        rows[0] = 10**6
        return replace(msg, index_rows=rows)

    sealed_lie(monkeypatch, "MaskedSums", edit)
    with pytest.raises(ProtocolError, match="not the node's rows"):
        train(small_credit, "onetee", options=INDEX_SETS)


@pytest.mark.parametrize("edit, match", [
    (lambda m: replace(m, binned=np.where(m.binned == 0, 31, m.binned).astype(np.uint16)), "out-of-range bins"),
    (lambda m: replace(m, binned=m.binned[:, :-5]), "bin assignments for"),
    (lambda m: replace(m, binned=m.binned[:-1], n_value_bins=m.n_value_bins[:-1]), "other features"),
], ids=["out-of-range-bins", "too-few-rows", "feature-missing"])
def test_onetee_bins_once_lies(monkeypatch, small_credit, edit, match):
    feature, n_bins = few_bin_feature(small_credit)
    assert n_bins[feature] < 31  # so bin 31 is out of range for it
    sealed_lie(monkeypatch, "BinsOnce", edit)
    with pytest.raises(ProtocolError, match=match):
        train(small_credit, "onetee", options=ProtocolOptions(onetee_bins_once=True, allow_simulated_tee=True))


@pytest.mark.parametrize("protocol", ["ntee", "onetee"])
def test_replayed_sealed_record_from_an_earlier_level(monkeypatch, small_credit, protocol):
    """The host replays what its enclave (N-TEE) or it (1-TEE with index sets; a bins-once
    passive party seals nothing per level) sealed one level earlier."""
    def edit(reply, state):
        if isinstance(reply, SealedMessage) and reply.kind != "bins":
            state.setdefault("sealed", []).append(reply)
            if len(state["sealed"]) == 3:
                return state["sealed"][1]
        return reply

    hostile(monkeypatch, edit)
    with pytest.raises((IntegrityError, ProtocolError)):
        train(small_credit, protocol, options=INDEX_SETS if protocol == "onetee" else None)


# --- transport: a reply that does not belong to the request ---

def test_grpc_reply_for_another_request_is_refused():
    """A rogue server answers with another sequence number (a replayed earlier reply)."""
    from concurrent.futures import ThreadPoolExecutor

    def exchange(request, context):
        return Envelope(version=1, sender="passive-1", sequence=request.sequence + 1, frame=b"",
                        session=request.session)

    server = grpc.server(ThreadPoolExecutor(max_workers=1))
    handler = grpc.unary_unary_rpc_method_handler(exchange, request_deserializer=Envelope.FromString,
                                                  response_serializer=Envelope.SerializeToString)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("teeboost.v1.Party",
                                                                          {"Exchange": handler}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = GrpcChannel([Peer(1, "passive-1", f"127.0.0.1:{port}")], sender="active", tls=None, insecure=True,
                          timeout=10)
    try:
        with pytest.raises(ProtocolError, match="does not match the request"):
            channel.request(1, RouteReply(0, np.zeros(0, dtype=np.uint8)))
    finally:
        channel.close()
        server.stop(None)
