"""Attacks on a party's compute boundary, mounted with the attacker's real capabilities: a
peer's messages (the only thing another party controls), and a second party's settings in
the same process. Also: what a closed pool leaves in Ray's workers, and what enclave code
can reach."""

from __future__ import annotations

import json

import numpy as np
import pytest

from teeboost.compute import ComputeError, ComputeOptions, open_backend
from teeboost.config import ProtocolOptions
from teeboost.core.binning import fit_bins
from teeboost.core.columns import PartyColumns
from teeboost.crypto.pool import CryptoPool, pools_held
from teeboost.crypto.schemes import generate_keypair
from teeboost.errors import ProtocolError
from teeboost.protocols.scoring.secureboost import EncryptedGradients, PublicKeyMessage, SecureBoostPassive
from teeboost.tee.code import import_closure
from teeboost.transport import serde
from teeboost.transport.base import ErrorReply, answer_frame
from teeboost.workers import WorkerError

pytest.importorskip("ray")

OPTIONS = ProtocolOptions(key_bits=1024, insecure_key_bits=True)


def _passive(ray_backend, n_rows=12_000) -> SecureBoostPassive:
    raw = np.random.default_rng(0).normal(size=(n_rows, 3))
    bins = fit_bins(raw, 32)
    return SecureBoostPassive(PartyColumns(bins, bins.transform(raw)), OPTIONS, backend=ray_backend)


def _key_message(public) -> PublicKeyMessage:
    return PublicKeyMessage(public.scheme, json.dumps({k: hex(v) for k, v in public.numbers().items()}))


@pytest.mark.malicious_host
def test_a_peer_cannot_make_a_passive_party_store_more_than_it_sent(ray_backend):
    """Before: one sampled row of a 12,000-row party made the passive store 12,000 rows of
    ciphertexts in its object store (hundreds of MB with a large key, per tree)."""
    passive = _passive(ray_backend)
    key = generate_keypair("paillier", 1024, insecure_key_bits=True)
    passive.handle(_key_message(key.public))
    one = np.frombuffer(int(key.encrypt_many([5])[0]).to_bytes(key.public.ciphertext_bytes, "big"), dtype=np.uint8)
    passive.handle(EncryptedGradients(0, 1, 40, True, 1, np.array([7], dtype=np.uint32), one.reshape(1, -1)))
    stored = [ray_backend.ray.get(ref) for ref in passive._ciphertexts.stored]
    assert sum(shard.nbytes for shard in stored) == key.public.ciphertext_bytes
    passive.close()


@pytest.mark.malicious_host
def test_a_peer_key_larger_than_the_party_takes_is_refused(ray_backend):
    passive = _passive(ray_backend, 2000)
    n = (1 << 8193) + 1  # a modulus of 8,194 bits: every bin sum would cost 64x a 1024-bit one
    huge = PublicKeyMessage("paillier", json.dumps({"n": hex(n), "h_s": hex(3)}))
    with pytest.raises(ProtocolError, match="key has 8194 bits; this party takes at most 4096"):
        passive.handle(huge)
    passive.close()


def test_one_process_reaches_one_cluster(ray_backend):
    """A second party's cluster in the same process would otherwise silently be the first's."""
    with pytest.raises(ComputeError, match="already connected to Ray at 'local' and cannot also reach "
                                           "'10.255.255.1:6379'"):
        open_backend(ComputeOptions(backend="ray", address="10.255.255.1:6379"))
    with pytest.raises(ComputeError, match="started with num_cpus=2; a second one with num_cpus=1"):
        open_backend(ComputeOptions(backend="ray", num_cpus=1))


def test_a_closed_pools_key_leaves_the_ray_workers(ray_backend):
    key = generate_keypair("paillier", 1024, insecure_key_bits=True)
    pool = CryptoPool(key, workers=2, pool_id="closing-key-pool", backend=ray_backend)
    assert pool.decrypt(pool.encrypt(list(range(2000)))) == list(range(2000))
    probe = ray_backend.pool(2)
    held = probe.map(pools_held, [0.2] * 6)
    assert any("closing-key-pool" in h for h in held)  # the key is in the workers while the pool is open
    pool.close()
    held = probe.map(pools_held, [0.2] * 6)
    assert not any("closing-key-pool" in h for h in held), held
    probe.close()


class _Unpicklable:
    """Deserialises to an error in the worker, as an argument of code the worker lacks would."""

    def __reduce__(self):
        return int, ("not a number",)


def test_arguments_a_worker_cannot_unpickle_are_a_named_compute_error(ray_backend):
    pool = ray_backend.pool(1)
    with pytest.raises(ComputeError, match=r"a Ray worker could not run builtins\.abs .*every node runs the "
                                           "driver's teeboost"):
        pool.map(abs, [_Unpicklable()])
    assert pool.map(abs, [-3]) == [3]  # the pool stays usable


def test_a_jobs_own_error_keeps_its_type_and_the_workers_traceback(ray_backend):
    pool = ray_backend.pool(2)
    with pytest.raises(ValueError, match="invalid literal") as caught:
        pool.map(int, ["1", "x", "y"])
    assert any("raised in a Ray worker" in note for note in caught.value.__notes__)


def test_peers_hear_only_that_a_partys_compute_failed(capsys):
    def handler(msg):
        try:
            raise WorkerError("worker process 4711 on node gpu-7.bank.internal was killed by signal 9")
        except WorkerError as error:
            raise ProtocolError(f"a cryptography worker died: {error}") from error

    reply = serde.decode(answer_frame(handler, serde.encode(ErrorReply("x", "y"))))
    assert isinstance(reply, ErrorReply) and "gpu-7" not in reply.detail and "compute workers failed" in reply.detail
    assert "gpu-7.bank.internal" in capsys.readouterr().err  # the operator still has the details


@pytest.mark.parametrize("family", ["ntee", "onetee", "strict"])
def test_enclave_code_cannot_reach_a_compute_backend(family):
    from teeboost.tee.code import module_source

    source = module_source(f"teeboost.protocols.{family}.enclave.program")
    reachable = import_closure(source)
    assert not [m for m in reachable if m.startswith(("teeboost.compute", "teeboost.workers", "ray"))]
