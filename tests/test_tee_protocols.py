"""N-TEE and 1-TEE: the plain protocol's trees, and nothing of split finding in the clear."""

import numpy as np
import pytest

from teeboost.config import BoostParams, ProtocolOptions
from teeboost.errors import IntegrityError, ProtocolError
from teeboost.federation import train_local
from teeboost.protocols.messages import HistogramNote
from teeboost.protocols.ntee.hosts import SealedMessage
from teeboost.transport import inmemory, serde
from teeboost.transport.transcript import NOTE, RECEIVED, SENT, read_transcript

from .helpers import federated_descriptions

PARAMS = BoostParams(n_trees=3, max_depth=3, subsample=0.8, max_bin=32)
INDEX_SETS = ProtocolOptions(onetee_bins_once=False, allow_simulated_tee=True)  # the seed paper's 1-TEE
VARIANTS = [("ntee", ProtocolOptions(allow_simulated_tee=True)), ("onetee", ProtocolOptions(allow_simulated_tee=True)),
            ("onetee", INDEX_SETS), ("ntee", ProtocolOptions(aes_bits=256, allow_simulated_tee=True))]
IDS = ["ntee", "onetee", "onetee-index-sets", "ntee-aes256"]
SIMULATED = ProtocolOptions(allow_simulated_tee=True)


@pytest.fixture(scope="module")
def reference(small_credit):
    active, passives = small_credit
    return train_local(active, passives, PARAMS)[0]


@pytest.mark.parametrize("protocol, options", VARIANTS, ids=IDS)
def test_same_trees_and_predictions_as_plain(small_credit, reference, protocol, options):
    active, passives = small_credit
    model, run = train_local(active, passives, PARAMS, protocol, options=options)
    assert federated_descriptions(model) == federated_descriptions(reference)
    features = [p.features for p in passives]
    assert np.array_equal(model.predict(active.features, features), reference.predict(active.features, features))
    assert any(t.party[n] == 1 for t in model.active.ensemble.trees for n in range(t.n_nodes))
    assert "simulated" in run.enclaves


@pytest.mark.parametrize("protocol, options", VARIANTS[:3], ids=IDS[:3])
def test_levels_where_only_the_larger_child_is_searched(small_credit, protocol, options):
    """With a large leaf floor the smaller child of a split is too small to search: a party
    still builds it, only to derive its larger sibling from their parent."""
    active, passives = small_credit
    params = BoostParams(n_trees=3, max_depth=4, min_samples_leaf=60, subsample=0.8, max_bin=32)
    plain, _ = train_local(active, passives, params)
    model, _ = train_local(active, passives, params, protocol, options=options)
    assert federated_descriptions(model) == federated_descriptions(plain)


def test_three_parties(credit_parties):
    active, (passive,) = credit_parties
    rows = np.arange(2500)
    active = active.take(rows)
    from teeboost.data import PartyData

    halves = [PartyData(f"passive-{i}", "test", passive.features[rows][:, cols],
                        tuple(passive.feature_names[c] for c in cols), ids=active.ids)
              for i, cols in ((1, [0, 1]), (2, [2, 3, 4]))]
    plain = train_local(active, halves, PARAMS)[0]
    for protocol in ("ntee", "onetee"):
        model = train_local(active, halves, PARAMS, protocol, options=SIMULATED)[0]
        assert federated_descriptions(model) == federated_descriptions(plain)


@pytest.mark.parametrize("protocol, options", VARIANTS[:3], ids=IDS[:3])
def test_transcript_holds_no_passive_bin_sums_or_scores(tmp_path, small_credit, protocol, options):
    active, passives = small_credit
    path = tmp_path / "run.tbt"
    train_local(active, passives, PARAMS, protocol, options=options, transcript=path)
    records = list(read_transcript(path))
    kinds = {(r.kind, type(r.message).__name__) for r in records}
    assert not any(isinstance(r.message, HistogramNote) for r in records)
    received = {name for kind, name in kinds if kind == RECEIVED}
    # everything the passive parties send back: acknowledgements, attestation handshakes,
    # sealed records, left instance sets, routing answers
    assert received <= {"Ack", "HelloReply", "EnclaveHelloReply", "EnclaveHello", "EnclaveFinish", "EnclaveFinished",
                        "SealedMessage", "SplitReply", "RouteReply"}, received
    sealed = [r.message for r in records if isinstance(r.message, SealedMessage) and r.message.record.size]
    assert sealed
    for msg in sealed:  # opaque: not a decodable frame, no plaintext message inside
        with pytest.raises(Exception):
            serde.decode(msg.record)
        assert b"TBM1" not in bytes(msg.record)
    # the only scores the active host sees are its own and the winners' (in its trees)
    notes = {type(r.message).__name__ for r in records if r.kind == NOTE}
    assert notes == {"RunNote", "GradientsNote", "TreeNote", "NodeRowsNote"}
    sent_types = {name for kind, name in kinds if kind == SENT}
    assert "PlainBeginTree" not in sent_types  # no gradients in the clear


def test_onetee_sums_bins_once_in_its_enclave_by_default(tmp_path, small_credit):
    """Bins-once is 1-TEE's default: each passive party seals its bins once, then receives
    from the enclave (sealed) each tree's rows and each level's partitions and sends back
    nothing to sum, only a sealed acknowledgement of each (in the reply it already sent, so
    no round trip is added); no masked gradients and no node rows travel in the clear."""
    assert ProtocolOptions().onetee_bins_once
    active, passives = small_credit
    path = tmp_path / "run.tbt"
    train_local(active, passives, PARAMS, "onetee", options=SIMULATED, transcript=path)
    records = list(read_transcript(path))
    sent = [r.message for r in records if r.kind == SENT]
    received = [r.message for r in records if r.kind == RECEIVED]
    assert not any(type(m).__name__ in ("MaskedGradients", "HistogramRequest") for m in sent)
    assert {m.kind for m in sent if isinstance(m, SealedMessage)} == {"bins", "rows", "level"}
    to_enclave = [m for m in received if isinstance(m, SealedMessage)]
    assert [m.kind for m in to_enclave if m.kind != "ack"] == ["bins"]  # once per run
    from_enclave = [m for m in sent if isinstance(m, SealedMessage) and m.kind in ("rows", "level")]
    acks = [m for m in to_enclave if m.kind == "ack"]
    assert len(acks) == len(from_enclave) and all(len(m.record) < 400 for m in acks)  # one small ack per record
    levels = [m for m in from_enclave if m.kind == "level"]
    assert len(levels) == PARAMS.n_trees * PARAMS.max_depth


def _tamper_sealed(monkeypatch, kind):
    original = inmemory.answer_frame

    def answer(handler, frame):
        reply = original(handler, frame)
        msg = serde.decode(reply)
        if isinstance(msg, SealedMessage) and msg.kind == kind:
            record = bytearray(msg.record)
            record[-1] ^= 1
            return serde.encode(SealedMessage(msg.tree, msg.kind, bytes(record)))
        return reply

    monkeypatch.setattr(inmemory, "answer_frame", answer)


@pytest.mark.parametrize("protocol, kind, options", [("ntee", "candidates", SIMULATED), ("onetee", "sums", INDEX_SETS),
                                                     ("onetee", "bins", SIMULATED)])
def test_tampered_sealed_record_is_refused(monkeypatch, small_credit, protocol, kind, options):
    active, passives = small_credit
    _tamper_sealed(monkeypatch, kind)
    with pytest.raises(IntegrityError):
        train_local(active, passives, PARAMS, protocol, options=options)


def test_passive_party_refuses_an_enclave_with_unexpected_code(monkeypatch, small_credit):
    """1-TEE: a passive party attests the active enclave against the measurement it expects
    (here: some other code's), and sends nothing when it does not match."""
    from teeboost.protocols.onetee import hosts as onetee
    from teeboost.tee.quote import QuoteVerifier

    active, passives = small_credit
    expected_other_code = [bytes(32)]
    monkeypatch.setattr(onetee, "QuoteVerifier",
                        lambda roots, measurements, **kw: QuoteVerifier(roots, expected_other_code, **kw))
    with pytest.raises(ProtocolError, match="AttestationError: remote attestation failed"):
        train_local(active, passives, PARAMS, "onetee", options=SIMULATED)


@pytest.mark.parametrize("protocol", ["ntee", "onetee", "strict"])
def test_xgboosts_default_shape_grows_plains_trees(small_credit, protocol):
    """Depth 6 and 256 bins (XGBoost's defaults, the standard workload): hosts sum and search
    with compiled kernels (``core/histogram_kernel``, ``split_kernel``), enclaves with numpy;
    every tree must still be plain's."""
    active, passives = small_credit
    params = BoostParams(n_trees=6, max_depth=6, learning_rate=0.3, subsample=1.0, max_bin=256)
    plain, _ = train_local(active, passives, params)
    model, _ = train_local(active, passives, params, protocol, options=SIMULATED)
    statistics = protocol != "strict"  # strict publishes no row counts or covers
    assert federated_descriptions(model, statistics) == federated_descriptions(plain, statistics)
    assert max(t.n_nodes for t in plain.active.ensemble.trees) > 63  # deeper than 5 levels somewhere
