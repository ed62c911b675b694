"""The enclave runtime: attestation, attested channels, sealing, isolation failures."""

import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from teeboost.errors import AttestationError, EnclaveError, IntegrityError
from teeboost.tee.channel import ChannelInitiator
from teeboost.tee.code import EnclaveCode
from teeboost.tee.quote import Quote, QuoteVerifier
from teeboost.tee.simulated import SimulatedBackend, SimulatedPlatform

PROGRAM = Path(__file__).with_name("echo_enclave.py")


def get_quote(enclave, report_data, nonce):
    """Through the test-only program's entry point (production programs have none)."""
    return enclave.ecall("test_quote", bytes(nonce) + bytes(report_data))


def seal(enclave, data, context):
    return enclave.ecall("test_seal", len(context).to_bytes(4, "big") + context + data)


def unseal(enclave, blob, context):
    return enclave.ecall("test_unseal", len(context).to_bytes(4, "big") + context + blob)


@pytest.fixture(scope="module")
def backend():
    return SimulatedBackend(SimulatedPlatform.create())


def code_for(backend, **config):
    config = {"trusted_roots": [backend.attestation_root.hex()], **config}
    return EnclaveCode.from_file(PROGRAM, config=config)


@pytest.fixture
def enclave(backend):  # one per test: an enclave stops serving after a failed check
    with backend.load(code_for(backend), label="test") as e:
        yield e


def party_verifier(backend, code):
    return QuoteVerifier([backend.attestation_root], [code.measurement], allow_simulated=True)


def connect(enclave, verifier):
    """A plain party (no quote of its own) opens an attested channel to the enclave."""
    initiator = ChannelInitiator(verifier=verifier)
    final, channel = initiator.finish(enclave.ecall("respond", b"P" + initiator.hello()))
    enclave.ecall("finish_responder", final)
    return channel


def test_happy_path_ecall_quote_and_channel(backend, enclave):
    code = code_for(backend)
    assert enclave.measurement == code.measurement  # reported by the enclave process itself
    assert enclave.pid != os.getpid()
    assert "simulated" in enclave.describe()
    assert enclave.ecall("echo", b"hello") == b"hello"
    nonce = os.urandom(32)
    quote = party_verifier(backend, code).verify(get_quote(enclave, b"report", nonce), nonce=nonce, report_data=b"report")
    assert quote.backend == "simulated"
    channel = connect(enclave, party_verifier(backend, code))
    for message in (b"gradients", b"", os.urandom(100_000)):
        assert channel.open(enclave.ecall("reply", channel.seal(message))) == b"echo:" + message


def test_aes_256_channels(backend, enclave):
    initiator = ChannelInitiator(verifier=party_verifier(backend, code_for(backend)), aes_bits=256)
    assert initiator.key_bytes == 32


def test_measurement_changes_with_one_byte_of_code_or_config(backend):
    code = code_for(backend)
    changed = EnclaveCode(code.name, code.program.replace(b"echo:", b"echo;"), code.modules, code.config)
    assert changed.measurement != code.measurement
    assert code_for(backend, extra=1).measurement != code.measurement
    patched = dict(code.modules)
    patched["teeboost.tee.channel"] += b"\n# one more line\n"
    assert EnclaveCode(code.name, code.program, patched, code.config).measurement != code.measurement


def test_wrong_measurement_is_rejected(backend, enclave):
    other = EnclaveCode.from_source("other", b"def ecall_x(rt, p):\n    return p\n")
    with pytest.raises(AttestationError) as info:
        connect(enclave, QuoteVerifier([backend.attestation_root], [other.measurement], allow_simulated=True))
    assert str(info.value) == "remote attestation failed"  # opaque


def test_forged_quote_is_rejected(backend, enclave):
    code = code_for(backend)
    nonce = os.urandom(32)
    verifier = party_verifier(backend, code)
    genuine = Quote.from_bytes(get_quote(enclave, b"r", nonce))
    impostor = Ed25519PrivateKey.generate()  # a key nobody trusts
    forged = Quote("simulated", code.measurement, genuine.report_data, genuine.platform_id, nonce).signed(impostor)
    with pytest.raises(AttestationError):
        verifier.verify(forged.to_bytes(), nonce=nonce, report_data=b"r")
    tampered = bytearray(genuine.to_bytes())
    tampered[40] ^= 1  # inside the signed body
    with pytest.raises(AttestationError):
        verifier.verify(bytes(tampered), nonce=nonce, report_data=b"r")


def test_stale_nonce_is_rejected(backend, enclave):
    verifier = party_verifier(backend, code_for(backend))
    old_nonce = os.urandom(32)
    quote = get_quote(enclave, b"r", old_nonce)
    with pytest.raises(AttestationError):
        verifier.verify(quote, nonce=os.urandom(32), report_data=b"r")


def test_report_data_must_bind_the_enclave_key(backend, enclave):
    """A man in the middle replacing the enclave's key-exchange key is caught."""
    verifier = party_verifier(backend, code_for(backend))
    initiator = ChannelInitiator(verifier=verifier)
    reply = bytearray(enclave.ecall("respond", b"P" + initiator.hello()))
    reply[4 + 32 + 4 + 5] ^= 1  # a byte of the ephemeral public key
    with pytest.raises(AttestationError):
        initiator.finish(bytes(reply))


def test_simulated_quotes_can_be_refused(backend, enclave):
    code = code_for(backend)
    nonce = os.urandom(32)
    strict = QuoteVerifier([backend.attestation_root], [code.measurement])  # the default refuses them
    with pytest.raises(AttestationError):
        strict.verify(get_quote(enclave, b"r", nonce), nonce=nonce, report_data=b"r")


@pytest.fixture
def channel(backend, enclave):
    return connect(enclave, party_verifier(backend, code_for(backend)))


def test_tampered_record_rejected(enclave, channel):
    record = bytearray(channel.seal(b"payload"))
    record[-1] ^= 1
    with pytest.raises(IntegrityError):
        enclave.ecall("reply", bytes(record))


def test_replayed_record_rejected(enclave, channel):
    record = channel.seal(b"once")
    enclave.ecall("reply", record)
    with pytest.raises(IntegrityError):
        enclave.ecall("reply", record)


def test_reordered_records_rejected(enclave, channel):
    channel.seal(b"1")  # sent first, delivered never
    with pytest.raises(IntegrityError):
        enclave.ecall("reply", channel.seal(b"2"))


def test_truncated_record_rejected(enclave, channel):
    with pytest.raises(IntegrityError):
        enclave.ecall("reply", channel.seal(b"abcdef")[:-3])


def test_truncated_stream_rejected():
    from teeboost.tee.channel import SecureChannel

    key_a, key_b = os.urandom(16), os.urandom(16)
    sender, receiver = SecureChannel(key_a, key_b, None), SecureChannel(key_b, key_a, None)
    receiver.open(sender.seal(b"part 1"))
    with pytest.raises(IntegrityError):
        receiver.require_closed()  # truncated: no close record yet
    assert receiver.open(sender.seal_close()) is None
    receiver.require_closed()
    with pytest.raises(IntegrityError):
        receiver.open(b"\0" * 40)  # nothing may follow the close record


def test_enclave_to_enclave_channel_and_key_distribution(backend):
    code = code_for(backend)
    with backend.load(code, label="active") as active, backend.load(code, label="passive") as passive:
        final = active.ecall("finish_initiator", passive.ecall("respond", b"A" + active.ecall("hello")))
        passive.ecall("finish_responder", final)
        passive.ecall("take_secret", active.ecall("share_secret"))
        assert active.ecall("secret_digest") == passive.ecall("secret_digest")
        # a party that is not an attested enclave never gets the secret
        other = backend.load(code, label="active-2")
        try:
            channel = connect(other, party_verifier(backend, code))
            with pytest.raises(EnclaveError, match="only to attested enclaves"):
                other.ecall("share_secret")
            del channel
        finally:
            other.close()


def test_enclave_refuses_peer_running_other_code(backend):
    code = code_for(backend)
    other = code_for(backend, variant="modified")  # different config: different measurement
    with backend.load(code, label="active") as active, backend.load(other, label="impostor") as impostor:
        with pytest.raises(AttestationError):
            active.ecall("finish_initiator", impostor.ecall("respond", b"A" + active.ecall("hello")))


def test_sealing_is_bound_to_measurement_and_survives_restart(tmp_path):
    platform_file = tmp_path / "platform.key"
    backend = SimulatedBackend(SimulatedPlatform.load_or_create(platform_file))
    code = code_for(backend)
    with backend.load(code, label="first") as first:
        blob = seal(first, b"model state", b"checkpoint-3")
        with pytest.raises(IntegrityError):
            unseal(first, blob, b"checkpoint-4")  # context is authenticated
    restarted = SimulatedBackend(SimulatedPlatform.load_or_create(platform_file))
    with restarted.load(code, label="again") as again:
        assert unseal(again, blob, b"checkpoint-3") == b"model state"
    with restarted.load(code_for(restarted, variant="other"), label="other") as other:
        with pytest.raises(IntegrityError):
            unseal(other, blob, b"checkpoint-3")
    with SimulatedBackend().load(code, label="elsewhere") as elsewhere:  # another platform
        with pytest.raises(IntegrityError):
            unseal(elsewhere, blob, b"checkpoint-3")
    assert oct(platform_file.stat().st_mode & 0o777) == "0o600"


def test_errors_inside_the_enclave_reach_the_host_and_stop_it(backend):
    with backend.load(code_for(backend), label="failing") as enclave:
        with pytest.raises(EnclaveError, match="no entry point"):
            enclave.ecall("missing")
        assert enclave.ecall("echo", b"still alive") == b"still alive"  # an unknown name is no failure
        with pytest.raises(EnclaveError, match="deliberate failure"):
            enclave.ecall("fail")
        with pytest.raises(EnclaveError, match="stopped after a failed ecall"):  # nothing more after a failure
            enclave.ecall("echo", b"x")


def test_enclave_process_crash_is_a_clear_error(backend):
    crashing = backend.load(code_for(backend), label="fragile")
    try:
        with pytest.raises(EnclaveError, match=r"'fragile' \(pid \d+\) exited with code 3 during ecall 'crash'"):
            crashing.ecall("crash")
        with pytest.raises(EnclaveError, match="not running"):
            crashing.ecall("echo", b"x")
    finally:
        crashing.close()


def test_killed_enclave_is_a_clear_error(backend):
    victim = backend.load(code_for(backend), label="victim")
    try:
        os.kill(victim.pid, 9)
        with pytest.raises(EnclaveError, match="victim"):
            victim.ecall("echo", b"x")
    finally:
        victim.close()
