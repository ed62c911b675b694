"""Big-integer work spread over a party's compute backend, with keys sent once per worker.

A ``CryptoPool`` runs on a ``ComputeBackend`` (``teeboost.compute``): this machine's worker
processes (fresh interpreters that never import the caller's script: ``teeboost.workers``)
or the party's own Ray cluster. Each worker receives the key material once, in the pool's
initializer, and the key holder's workers build their fixed-base encryption tables there.
Jobs then carry only numbers: plaintexts as Python ints, ciphertexts as fixed-width bytes,
bins as numpy arrays. A passive party's per-row ciphertexts and bins are row shards
(``RowShards``): on Ray they stay in the object store and jobs name the rows they sum. With
one local worker the same functions run in this process, so small jobs and tests skip
process start-up.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import gmpy2
import numpy as np
from gmpy2 import mpz

from ..compute import ComputeBackend, LocalBackend, RowShards, row_jobs, take_rows
from ..errors import ProtocolError
from ..workers import WorkerError
from .schemes import private_from_numbers, public_from_numbers

__all__ = ["CryptoPool", "default_workers"]

# per-process key state, by pool id (several pools can live in one process in tests)
_STATE: dict[str, Any] = {}


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def _init(pool_id: str, scheme: str, public_numbers: dict[str, int], private_numbers: dict[str, int] | None,
          window: int, exponent_bits: int | None) -> None:
    if private_numbers is not None:
        key = private_from_numbers(scheme, public_numbers, private_numbers, window, exponent_bits)
        key.build_tables()
        _STATE[pool_id] = key
    else:
        _STATE[pool_id] = public_from_numbers(scheme, public_numbers)


def _release(pool_id: str, *_: Any) -> None:
    """Forget a pool's key in a worker that outlives it (Ray's shared workers)."""
    _STATE.pop(pool_id, None)


def pools_held(busy_seconds: float = 0.0) -> list[str]:
    """As a job: the pools whose keys this worker process holds now (operators and tests ask
    whether a closed pool's key is gone). ``busy_seconds`` spreads such jobs over workers."""
    import time
    time.sleep(busy_seconds)
    return sorted(_STATE)


def _public(pool_id: str) -> Any:
    state = _STATE[pool_id]
    return getattr(state, "public", state)


def _to_bytes(values, width: int) -> bytes:
    return b"".join(int(v).to_bytes(width, "big") for v in values)


def _from_bytes(blob: bytes, width: int) -> list[mpz]:
    return [mpz.from_bytes(blob[i:i + width], "big") for i in range(0, len(blob), width)]


def _encrypt(pool_id: str, plaintexts: list[int]) -> bytes:
    key = _STATE[pool_id]
    return _to_bytes(key.encrypt_many(plaintexts), key.public.ciphertext_bytes)


def _randomizers(pool_id: str, count: int) -> bytes:
    key = _STATE[pool_id]
    return _to_bytes(key.randomizers(count), key.public.ciphertext_bytes)


def _encrypt_with(pool_id: str, plaintexts: list[int], randomizers: bytes) -> bytes:
    key = _STATE[pool_id]
    size = key.public.ciphertext_bytes
    return _to_bytes(key.encrypt_with(plaintexts, _from_bytes(randomizers, size)), size)


def _decrypt(pool_id: str, blob: bytes) -> list[int]:
    key = _STATE[pool_id]
    return [int(m) for m in key.decrypt_many(_from_bytes(blob, key.public.ciphertext_bytes))]


def _bin_sums_rows(pool_id: str, cts: np.ndarray, ct_positions: np.ndarray | None, bins: np.ndarray,
                   bin_positions: np.ndarray | None, width: int) -> bytes:
    """Product of ciphertexts per feature x bin x slot over some rows of one shard.

    ``cts``: (rows, slots, bytes) uint8, ``bins``: (features, rows), each either the rows
    already gathered (positions None) or a whole shard and the rows to take from it."""
    public = _public(pool_id)
    size = public.ciphertext_bytes
    n2 = public.ciphertext_modulus
    cts = take_rows(cts, ct_positions, 0)
    bins = take_rows(bins, bin_positions, 1)
    slots = cts.shape[1]
    per_slot = [_from_bytes(np.ascontiguousarray(cts[:, s]).tobytes(), size) for s in range(slots)]
    out = []
    for feature_bins in bins:
        order = np.argsort(feature_bins, kind="stable").tolist()
        counts = np.bincount(feature_bins, minlength=width).tolist()
        position = 0
        for count in counts:
            members = order[position:position + count]
            for column in per_slot:
                acc = mpz(1)
                for row in members:
                    acc = acc * column[row] % n2
                out.append(acc)
            position += count
    return _to_bytes(out, size)


def _pack(pool_id: str, blob: bytes, group: int, shift: int) -> bytes:
    """Horner packing of consecutive ciphertexts, ``group`` per output ciphertext."""
    public = _public(pool_id)
    size = public.ciphertext_bytes
    n2 = public.ciphertext_modulus
    factor = mpz(1) << shift
    cts = _from_bytes(blob, size)
    out = []
    for start in range(0, len(cts), group):
        acc = cts[start]
        for c in cts[start + 1:start + group]:
            acc = gmpy2.powmod(acc, factor, n2) * c % n2
        out.append(acc)
    return _to_bytes(out, size)


class CryptoPool:
    """Encrypt, decrypt, sum and pack in parallel under one key."""

    def __init__(self, key: Any, *, workers: int | None, pool_id: str, niceness: int = 0,
                 backend: ComputeBackend | None = None) -> None:
        """``key``: a private key (encrypt/decrypt) or a public key (sums and packing);
        ``workers``: None for one per CPU of the backend; ``niceness`` > 0: background
        workers that take only otherwise idle cores; ``backend``: where the work runs (None:
        this machine's processes)."""
        self.pool_id = pool_id
        self.backend = backend or LocalBackend()
        private = hasattr(key, "public")
        self.public = key.public if private else key
        self._workers = None
        if self.backend.by_reference or (workers or default_workers()) > 1:
            initargs = (pool_id, self.public.scheme, self.public.numbers(),
                        key.numbers() if private else None, getattr(key, "window", 12),
                        getattr(key, "exponent_bits", None))
            try:  # every worker builds its tables once, before (or at) its first job
                self._workers = self.backend.pool(workers, initializer=_init, initargs=initargs,
                                                  niceness=niceness, release=_release)
            except WorkerError as error:
                raise ProtocolError(f"could not start cryptography workers: {error}") from error
            self.workers = self._workers.workers
        else:
            self.workers = 1
            if private:
                key.build_tables()
            _STATE[pool_id] = key

    @property
    def width(self) -> int:
        return self.public.ciphertext_bytes

    def _run(self, fn: Callable, jobs: list[tuple]) -> list:
        if self._workers is None:
            if self.pool_id not in _STATE:
                raise ProtocolError(f"the cryptography pool {self.pool_id} is closed")
            return [fn(self.pool_id, *job) for job in jobs]
        try:
            return self._workers.map(fn, [self.pool_id] * len(jobs), *zip(*jobs))
        except WorkerError as error:  # the cause stays attached: peers are told less (answer_frame)
            raise ProtocolError(f"a cryptography worker died: {error}") from error

    def _chunks(self, count: int, minimum: int = 64) -> list[tuple[int, int]]:
        parts = max(1, min(self.workers * 4, count // minimum)) if count else 1
        edges = np.linspace(0, count, parts + 1).astype(int)
        return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]

    def encrypt(self, plaintexts: list[int], randomizers: np.ndarray | None = None) -> np.ndarray:
        """(len, width) uint8 ciphertexts; with ``randomizers`` (one fresh row each, from
        ``randomizers``) only the multiplications are left to do."""
        chunks = self._chunks(len(plaintexts))
        if randomizers is None:
            blob = b"".join(self._run(_encrypt, [(plaintexts[a:b],) for a, b in chunks]))
        else:
            if randomizers.shape != (len(plaintexts), self.width):
                raise ProtocolError(f"{len(plaintexts)} plaintexts but randomizers of shape {randomizers.shape}")
            jobs = [(plaintexts[a:b], randomizers[a:b].tobytes()) for a, b in chunks]
            blob = b"".join(self._run(_encrypt_with, jobs))
        return np.frombuffer(blob, dtype=np.uint8).reshape(len(plaintexts), self.width)

    def randomizers(self, count: int) -> np.ndarray:
        """(count, width) uint8 fresh randomisers (h_s^x or h^r), the plaintext-free part of
        encryption, spread over the workers."""
        if count <= 0:
            return np.zeros((0, self.width), dtype=np.uint8)
        parts = max(1, min(self.workers, count))
        edges = np.linspace(0, count, parts + 1).astype(int)
        jobs = [(int(b - a),) for a, b in zip(edges[:-1], edges[1:]) if b > a]
        blob = b"".join(self._run(_randomizers, jobs))
        return np.frombuffer(blob, dtype=np.uint8).reshape(count, self.width)

    def decrypt(self, ciphertexts: np.ndarray) -> list[int]:
        jobs = [(ciphertexts[a:b].tobytes(),) for a, b in self._chunks(len(ciphertexts), 8)]
        return [m for part in self._run(_decrypt, jobs) for m in part]

    def bin_sums_sharded(self, ciphertexts: RowShards, bins: RowShards, rows: np.ndarray, width: int) -> list[mpz]:
        """Per feature x bin x slot ciphertext sums over ``rows``, flattened in that order.
        Both shard sets must cut rows at the same places; jobs are (shard, rows) pieces."""
        if not np.array_equal(ciphertexts.edges, bins.edges):
            raise ProtocolError("ciphertext and bin shards cut rows at different places")
        n2 = self.public.ciphertext_modulus
        jobs = row_jobs(ciphertexts, rows, self.workers * 4, 2048) or [(0, np.zeros(0, dtype=np.int64))]
        args = [(*ciphertexts.job_data(s, p), *bins.job_data(s, p), width) for s, p in jobs]
        parts = [_from_bytes(blob, self.width) for blob in self._run(_bin_sums_rows, args)]
        total = parts[0]
        for part in parts[1:]:
            total = [x * y % n2 for x, y in zip(total, part)]
        return total

    def pack(self, ciphertexts: list[mpz], group: int, shift: int) -> list[mpz]:
        if group <= 1:
            return list(ciphertexts)
        groups = (len(ciphertexts) + group - 1) // group
        per_job = max(1, groups // max(1, self.workers * 2))
        jobs = []
        for g0 in range(0, groups, per_job):
            chunk = ciphertexts[g0 * group:(g0 + per_job) * group]
            jobs.append((_to_bytes(chunk, self.width), group, shift))
        return [c for blob in self._run(_pack, jobs) for c in _from_bytes(blob, self.width)]

    def close(self) -> None:
        if self._workers is not None:
            self._workers.close()
            self._workers = None
        _STATE.pop(self.pool_id, None)  # later calls: "the cryptography pool ... is closed"
