"""The active party's cache of a passive party's blinded id set (``teeboost.protocols.online``):
fetched once per passive data version, then each request's ids are looked up with one blinded
round trip of their own.

Lookup is by the first 8 bytes of bH(y), sorted (8 MB at 1e6 ids rather than a dict of a
million byte strings); a hit is confirmed on all 32 bytes.
"""

from __future__ import annotations

import threading

import numpy as np

from ..crypto.psi import POINT_BYTES, blind, hash_ids, invert_scalar, new_scalar
from ..errors import ProtocolError
from teeboost.protocols.online import STALE_IDS, OnlineBlind, OnlineBlinded, OnlineIdsAsk, OnlineIdSet

__all__ = ["BlindedIdCache"]


class BlindedIdCache:
    """One passive party's set, as last fetched."""

    def __init__(self, party: int, name: str) -> None:
        self.party = party
        self.name = name
        self.version = ""
        self.n_ids = 0
        self.fetches = 0  # how many times the whole set was fetched (metrics)
        self._prefix = np.zeros(0, dtype=np.uint64)
        self._order = np.zeros(0, dtype=np.int64)  # sorted position -> handle
        self._points = np.zeros((0, POINT_BYTES), dtype=np.uint8)
        self._lock = threading.Lock()

    def refresh(self, channel) -> None:
        """Fetch the set unless the version held is current."""
        reply = channel.request(self.party, OnlineIdsAsk(self.version))
        if not isinstance(reply, OnlineIdSet):
            raise ProtocolError(f"passive party {self.name!r} did not send its online id set")
        if reply.points.shape[0] == 0 and reply.version == self.version:
            return
        points = np.ascontiguousarray(reply.points, dtype=np.uint8)
        if points.ndim != 2 or points.shape != (reply.n_ids, POINT_BYTES):
            raise ProtocolError(f"passive party {self.name!r} sent an id set of shape {points.shape} for "
                                f"{reply.n_ids} ids")
        prefix = points[:, :8].copy().view(np.uint64).reshape(-1) if points.size else np.zeros(0, np.uint64)
        order = np.argsort(prefix, kind="stable")
        with self._lock:
            self._prefix, self._order, self._points = prefix[order], order, points
            self.version, self.n_ids = reply.version, int(reply.n_ids)
            self.fetches += 1

    def handles(self, channel, ids: list[str]) -> tuple[str, np.ndarray]:
        """(the id set version they refer to, the handle of each id in the passive party's set,
        -1 where it does not hold the id). One round trip, with a fresh blinding scalar. Every
        later message about these rows must name that version (a refresh meanwhile, e.g. by a
        health check, must not move them to another version's rows)."""
        scalar = new_scalar()
        asked = blind(hash_ids(ids), scalar)
        with self._lock:
            version = self.version
        reply = channel.request(self.party, OnlineBlind(version, asked))
        if not isinstance(reply, OnlineBlinded) or reply.points.shape != asked.shape:
            raise ProtocolError(f"passive party {self.name!r} did not answer the blinded ids")
        if reply.version != version:
            raise ProtocolError(f"passive party {self.name!r} answered for id set {reply.version[:12]}, not "
                                f"{version[:12]}")
        theirs = blind(np.ascontiguousarray(reply.points, dtype=np.uint8), invert_scalar(scalar))  # bH(x)
        return version, self._lookup(theirs, version)

    def _lookup(self, points: np.ndarray, version: str) -> np.ndarray:
        with self._lock:
            if version != self.version:  # refreshed meanwhile (a health check): look up again
                raise ProtocolError(f"{STALE_IDS}: party {self.name!r}'s id set changed during the request")
            key = points[:, :8].copy().view(np.uint64).reshape(-1)
            at = np.searchsorted(self._prefix, key)
            out = np.full(points.shape[0], -1, dtype=np.int64)
            for i, start in enumerate(at):  # a prefix may repeat (2**-64 odds): every candidate is checked
                j = int(start)
                while j < self._prefix.size and self._prefix[j] == key[i]:
                    handle = int(self._order[j])
                    if np.array_equal(self._points[handle], points[i]):
                        out[i] = handle
                        break
                    j += 1
            return out
