"""SecureBoost grows the plain protocol's trees exactly, with every optimisation on or off."""

import numpy as np
import pytest

from teeboost.config import BoostParams, ProtocolOptions
from teeboost.errors import ProtocolError
from teeboost.federation import train_local
from teeboost.protocols.messages import HistogramNote
from teeboost.protocols.enclave.partition import SplitReply
from teeboost.protocols.scoring.plain import HistogramReply
from teeboost.protocols.scoring.secureboost import EncryptedHistograms
from teeboost.transport import inmemory
from teeboost.transport.transcript import RECEIVED, read_transcript

from .helpers import federated_descriptions

PARAMS = BoostParams(n_trees=3, max_depth=3, subsample=0.8, max_bin=32)
SMALL_KEY = dict(key_bits=768, insecure_key_bits=True, crypto_workers=1)


@pytest.fixture(scope="module")
def bundled_reference(credit_parties):
    active, passives = credit_parties
    model, _ = train_local(active, passives, PARAMS)
    return model


def predictions(model, active, passives):
    return model.predict(active.features, [p.features for p in passives])


def test_secureboost_equals_plain_on_the_bundled_data(credit_parties, bundled_reference):
    active, passives = credit_parties
    model, run = train_local(active, passives, PARAMS, "secureboost", options=ProtocolOptions(**SMALL_KEY))
    assert federated_descriptions(model) == federated_descriptions(bundled_reference)
    assert np.array_equal(predictions(model, active, passives), predictions(bundled_reference, active, passives))
    assert {"encrypt", "decrypt", "homomorphic sums"} <= set(run.phases)


@pytest.mark.parametrize("options", [
    dict(pack_gradients=False, pack_bins=False),
    dict(pack_gradients=True, pack_bins=False),
    dict(pack_gradients=False, pack_bins=True),
    dict(scheme="ou"),
    dict(scheme="ou", short_randomizer=False),
    dict(short_randomizer=True),
    dict(precompute_randomizers=False),
    dict(crypto_workers=2),  # the process pool path
    dict(crypto_workers=2, scheme="ou", randomizer_reserve_mb=0),
], ids=["no-packing", "gradients-only", "bins-only", "okamoto-uchiyama", "ou-full-randomizer",
        "paillier-short-randomizer", "no-precompute", "process-pool", "process-pool-no-reserve"])
def test_every_optimisation_switch_gives_the_same_model(small_credit, options):
    active, passives = small_credit
    reference, _ = train_local(active, passives, PARAMS)
    model, _ = train_local(active, passives, PARAMS, "secureboost",
                           options=ProtocolOptions(**{**SMALL_KEY, **options}))
    assert federated_descriptions(model) == federated_descriptions(reference)


def test_randomizers_computed_ahead_are_reported_apart_and_stop_after_the_last_tree(small_credit):
    active, passives = small_credit
    _, run = train_local(active, passives, PARAMS, "secureboost",
                         options=ProtocolOptions(**{**SMALL_KEY, "crypto_workers": 2, "scheme": "ou"}))
    assert {"randomizers ahead", "randomizers on demand", "encrypt"} <= set(run.phases)
    assert run.phases["randomizers ahead"] > 0
    _, run = train_local(active, passives, PARAMS, "secureboost",
                         options=ProtocolOptions(**SMALL_KEY, precompute_randomizers=False))
    assert "randomizers ahead" not in run.phases


def test_the_reserve_prepares_no_tree_after_the_last(small_credit, monkeypatch):
    from teeboost.crypto.reserve import RandomizerReserve

    targets = []
    real_fill = RandomizerReserve.fill
    monkeypatch.setattr(RandomizerReserve, "fill", lambda self, target: (targets.append(target),
                                                                         real_fill(self, target))[1])
    active, passives = small_credit
    train_local(active, passives, PARAMS, "secureboost", options=ProtocolOptions(**SMALL_KEY))
    assert len(targets) == PARAMS.n_trees  # before the first tree, then after each but the last


def test_packing_cuts_bytes(small_credit):
    active, passives = small_credit
    _, packed = train_local(active, passives, PARAMS, "secureboost", options=ProtocolOptions(**SMALL_KEY))
    _, unpacked = train_local(active, passives, PARAMS, "secureboost",
                              options=ProtocolOptions(**SMALL_KEY, pack_gradients=False, pack_bins=False))
    assert packed.traffic["bytes"]["active_to_passive"] < 0.55 * unpacked.traffic["bytes"]["active_to_passive"]
    assert packed.traffic["bytes"]["passive_to_active"] < 0.3 * unpacked.traffic["bytes"]["passive_to_active"]


def test_transcript_holds_what_secureboost_reveals(tmp_path, small_credit):
    active, passives = small_credit
    path = tmp_path / "sb.tbt"
    train_local(active, passives, PARAMS, "secureboost", options=ProtocolOptions(**SMALL_KEY), transcript=path)
    plain_path = tmp_path / "plain.tbt"
    train_local(active, passives, PARAMS, transcript=plain_path)
    secure = [r.message for r in read_transcript(path) if isinstance(r.message, HistogramNote)]
    plain = [m for r in read_transcript(plain_path) if r.kind == RECEIVED for m in _histogram_replies(r.message)]
    # every decrypted bin sum per node x feature x bin, equal to what plain sends in the clear
    assert len(secure) == len(plain) > 0
    for note, reply in zip(secure, plain):
        assert np.array_equal(note.sums, reply.sums)
    received = [type(m).__name__ for r in read_transcript(path) if r.kind == RECEIVED for m in _histogram_replies(r.message)]
    assert "EncryptedHistograms" in received and "HistogramReply" not in received
    # a level a passive party won came back with its split (one round trip, not two)
    assert any(isinstance(r.message, SplitReply) and r.message.next_level for r in read_transcript(path))


def _histogram_replies(msg):
    """A histogram reply, alone or with the split reply that answered the next level too."""
    from teeboost.transport import serde

    if isinstance(msg, SplitReply):
        return [serde.decode(bytes(msg.next_level))] if msg.next_level else []
    return [msg] if isinstance(msg, (HistogramReply, EncryptedHistograms)) else []


def _tamper(monkeypatch, edit):
    """Corrupt the first encrypted histogram reply on its way to the active party."""
    original = inmemory.answer_frame
    from teeboost.transport import serde

    def answer(handler, frame):
        reply = original(handler, frame)
        msg = serde.decode(reply)
        if isinstance(msg, EncryptedHistograms):
            return serde.encode(edit(msg))
        return reply

    monkeypatch.setattr(inmemory, "answer_frame", answer)


@pytest.mark.parametrize("edit, match", [
    (lambda m: type(m)(m.tree, m.counts, _flip(m.ciphertexts)), "tampered|out of range|add up"),
    (lambda m: type(m)(m.tree, m.counts, m.ciphertexts[:-1]), "expected"),
    (lambda m: type(m)(m.tree, _bump(m.counts), m.ciphertexts), "exceeds|add up|do not exist"),
], ids=["flipped-byte", "truncated", "wrong-counts"])
def test_tampered_or_truncated_ciphertexts_are_refused(monkeypatch, small_credit, edit, match):
    active, passives = small_credit
    _tamper(monkeypatch, edit)
    with pytest.raises(ProtocolError, match=match):
        train_local(active, passives, PARAMS, "secureboost", options=ProtocolOptions(**SMALL_KEY))


def _flip(ciphertexts):
    out = ciphertexts.copy()
    out[0, -1] ^= 0x01
    return out


def _bump(counts):
    out = counts.copy()
    out[0, 0, 0] += 1
    return out


@pytest.mark.slow
def test_secureboost_equals_plain_with_2048_bit_keys(small_credit):
    active, passives = small_credit
    reference, _ = train_local(active, passives, PARAMS)
    for scheme in ("paillier", "ou"):
        model, _ = train_local(active, passives, PARAMS, "secureboost", options=ProtocolOptions(scheme=scheme))
        assert federated_descriptions(model) == federated_descriptions(reference)


# --- Okamoto-Uchiyama against a malicious passive party (docs/secureboost.md, "OU caveat")

def test_every_run_has_its_own_key(small_credit, monkeypatch):
    """A factor of n learnt in one run (see the OU caveat) must not open another run."""
    from teeboost.protocols.scoring.secureboost import SecureBoostPassive

    seen = []
    original = SecureBoostPassive._set_key

    def record(self, msg):
        seen.append(msg.numbers)
        return original(self, msg)

    monkeypatch.setattr(SecureBoostPassive, "_set_key", record)
    active, passives = small_credit
    params = BoostParams(n_trees=1, max_depth=2, subsample=0.8, max_bin=32)
    for _ in range(2):
        train_local(active, passives, params, "secureboost", options=ProtocolOptions(**SMALL_KEY, scheme="ou"))
    assert len(seen) == 2 and seen[0] != seen[1]


@pytest.mark.parametrize("plaintext", ["above p", "above the slots"])
def test_an_out_of_range_ciphertext_aborts_the_run(small_credit, monkeypatch, plaintext):
    """A malicious passive party encrypts a value of its choice with the public key and
    slips it into its histogram reply. Decrypted, a value >= p comes back reduced mod p,
    which is how a factor of n would leak if the result were ever acted on; the active
    party refuses the reply before anything depends on it."""
    import gmpy2
    from gmpy2 import mpz

    from teeboost.protocols.scoring import secureboost

    original = secureboost.SecureBoostPassive._level

    def forged(self, nodes, node_rows):
        reply = original(self, nodes, node_rows)
        public = self.public
        m = mpz(1) << (public.plaintext_bits + 40) if plaintext == "above p" else mpz(1) << (public.plaintext_bits - 1)
        c = gmpy2.powmod(public.g, m, public.n) * gmpy2.powmod(public.h, 12345, public.n) % public.n
        ciphertexts = reply.ciphertexts.copy()
        ciphertexts[0] = np.frombuffer(int(c).to_bytes(public.ciphertext_bytes, "big"), dtype=np.uint8)
        return EncryptedHistograms(reply.tree, reply.counts, ciphertexts)

    monkeypatch.setattr(secureboost.SecureBoostPassive, "_level", forged)
    active, passives = small_credit
    with pytest.raises(ProtocolError, match="bits above its slots|exceeds what its row count|do not add up"):
        train_local(active, passives, BoostParams(n_trees=1, max_depth=2, subsample=0.8, max_bin=32), "secureboost",
                    options=ProtocolOptions(**SMALL_KEY, scheme="ou"))
