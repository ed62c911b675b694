"""A passive party's ids as served online: in a secret order, hashed and blinded once.

The blinded set is what the active party caches (``teeboost.protocols.online``), so it is
computed once per data version, not per request: at 1e6 ids that is about a minute of
scalar multiplications. The key b and the set are kept on disk beside the party's audit log
(the key readable by its owner only), so a restart with unchanged data serves the same version
and the active party's cache stays valid. The order is a permutation seeded by a keyed hash of
the ids: stable for the same data and key, unrelated to the file's row order.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

import numpy as np

from ..crypto.psi import POINT_BYTES, SCALAR_BYTES, blind, hash_ids, new_scalar
from ..errors import ConfigError, ProtocolError
from ..model_files import write_atomically

__all__ = ["ServedIdSet", "load_or_create_key"]


def load_or_create_key(path: Path) -> bytes:
    """The party's long-term online blinding key: created once (mode 0600), then reused."""
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        key = new_scalar()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first: use that one
            return load_or_create_key(path)
        with os.fdopen(fd, "wb") as out:
            out.write(key)
            out.flush()
            os.fsync(out.fileno())
        return key
    if len(key) != SCALAR_BYTES:
        raise ConfigError(f"{path}: the online blinding key must be {SCALAR_BYTES} bytes, it is {len(key)} (remove "
                          "it to make a new one; the active party then fetches the new id set)")
    return key


class ServedIdSet:
    """``order[h]``: the data row with handle h; ``points[h]``: bH(its id); ``version`` names
    both (data, key and order), and changes whenever any of them does."""

    def __init__(self, ids: list[str], key: bytes, cache: Path | None = None) -> None:
        self.key = key
        self.n = len(ids)
        joined = hashlib.sha256("\x00".join(ids).encode()).digest()
        seed = hmac.new(key, b"teeboost-online-order-v1" + joined, hashlib.sha256).digest()
        self.version = hmac.new(key, b"teeboost-online-version-v1" + joined, hashlib.sha256).hexdigest()[:32]
        self.order = np.random.default_rng(np.frombuffer(seed, dtype=np.uint64)).permutation(self.n)
        self.points = self._cached(cache)
        if self.points is None:
            ordered = [ids[i] for i in self.order]
            self.points = blind(hash_ids(ordered), key) if ordered else np.zeros((0, POINT_BYTES), np.uint8)
            if cache is not None:
                self._store(cache)

    def _cached(self, cache: Path | None) -> np.ndarray | None:
        if cache is None or not cache.exists():
            return None
        try:
            with np.load(cache, allow_pickle=False) as saved:
                if str(saved["version"]) != self.version:
                    return None
                points = np.ascontiguousarray(saved["points"], dtype=np.uint8)
        except (OSError, ValueError, KeyError):
            return None  # unreadable: computed again
        return points if points.shape == (self.n, POINT_BYTES) else None

    def _store(self, cache: Path) -> None:
        import io

        buffer = io.BytesIO()
        np.savez(buffer, version=np.array(self.version), points=self.points)
        cache.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(cache, buffer.getvalue())

    def blind(self, points: np.ndarray) -> np.ndarray:
        if points.ndim != 2 or points.shape[1] != POINT_BYTES:
            raise ProtocolError(f"online ids must be {POINT_BYTES}-byte group elements")
        return blind(points, self.key)
