"""ECDH private set intersection primitives over ristretto255 (libsodium via rbcl).

Each id is hashed to a group element (SHA-512 with a domain label, then ristretto255's
hash-to-group); a party blinds elements with its secret scalar. Because a(bH) = b(aH), two
parties who exchange blinded sets learn which elements they share and nothing else about
the others (DDH in a prime-order group). Bulk multiplications run in worker processes
(``teeboost.workers``, which never import the caller's script).
"""

from __future__ import annotations

import hashlib
import os

import numpy as np
import rbcl

from ..errors import ProtocolError
from ..workers import WorkerError, WorkerPool

__all__ = ["new_scalar", "invert_scalar", "hash_ids", "blind", "POINT_BYTES", "SCALAR_BYTES"]

POINT_BYTES = 32
SCALAR_BYTES = 32
_DOMAIN = b"teeboost-psi-v1|"


def new_scalar() -> bytes:
    return rbcl.crypto_core_ristretto255_scalar_random()


def invert_scalar(scalar: bytes) -> bytes:
    """1/a mod the group order: blinding with it removes a blinding with ``scalar``."""
    return rbcl.crypto_core_ristretto255_scalar_invert(scalar)


def _hash_chunk(ids: list[str]) -> bytes:
    return b"".join(rbcl.crypto_core_ristretto255_from_hash(hashlib.sha512(_DOMAIN + i.encode()).digest())
                    for i in ids)


def _blind_chunk(scalar: bytes, blob: bytes) -> bytes:
    out = []
    for start in range(0, len(blob), POINT_BYTES):
        try:
            out.append(rbcl.crypto_scalarmult_ristretto255(scalar, blob[start:start + POINT_BYTES]))
        except Exception:  # rbcl raises on encodings that are not group elements
            raise ProtocolError("a PSI message holds a value that is not a ristretto255 element") from None
    return b"".join(out)


def _pool_map(fn, jobs: list[tuple], workers: int) -> list:
    if workers <= 1 or len(jobs) <= 1:
        return [fn(*job) for job in jobs]
    try:
        with WorkerPool(min(workers, len(jobs))) as pool:
            return pool.map(fn, *zip(*jobs))
    except WorkerError as error:
        raise ProtocolError(f"a PSI worker process died: {error}") from None


def _workers(count: int, workers: int | None) -> int:
    if count < 20_000:
        return 1
    return workers or min(os.cpu_count() or 1, 8)


def hash_ids(ids: list[str], *, workers: int | None = None) -> np.ndarray:
    """(n, 32) uint8 group elements, one per id."""
    w = _workers(len(ids), workers)
    edges = np.linspace(0, len(ids), max(1, w * 2) + 1).astype(int)
    blob = b"".join(_pool_map(_hash_chunk, [(ids[a:b],) for a, b in zip(edges[:-1], edges[1:])], w))
    return np.frombuffer(blob, dtype=np.uint8).reshape(-1, POINT_BYTES)


def blind(points: np.ndarray, scalar: bytes, *, workers: int | None = None) -> np.ndarray:
    """Multiply every element by ``scalar``: (n, 32) uint8 -> (n, 32) uint8."""
    if points.ndim != 2 or points.shape[1] != POINT_BYTES:
        raise ProtocolError(f"PSI elements must be {POINT_BYTES} bytes each")
    n = points.shape[0]
    w = _workers(n, workers)
    edges = np.linspace(0, n, max(1, w * 2) + 1).astype(int)
    jobs = [(scalar, points[a:b].tobytes()) for a, b in zip(edges[:-1], edges[1:])]
    blob = b"".join(_pool_map(_blind_chunk, jobs, w))
    return np.frombuffer(blob, dtype=np.uint8).reshape(n, POINT_BYTES)
