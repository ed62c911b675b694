"""Wire messages of online scoring: one customer at a time, whatever the passive party's size.

Alignment is split in two so that no request runs PSI over the passive party's whole id list:
- once per passive data version, the active party fetches the passive party's id set, each id
  hashed to ristretto255 and blinded with the passive party's long-term online key b, in a
  secret order (``OnlineIdsAsk`` -> ``OnlineIdSet``); it learns how many ids there are, nothing else;
- per request, one blinded round trip for the request's own ids (``OnlineBlind``: aH(x) ->
  b(aH(x))); the active party removes its fresh a and looks bH(x) up in the cached set, which
  gives the row's position (its handle) in that order, or tells it the id is not held.
The passive party sees a random group element per id and never which customer it was.

Then the rows are scored by handle: routing questions in the clear (``OnlineRoute``; plain,
SecureBoost, 1-TEE: the passive host answers about the rows it is asked about, so it learns
which of its customers were scored, as in batch prediction), or sealed between enclaves
(``OnlineSealed``; N-TEE: the active party names the rows in the clear for the passive host to
charge, and the active host learns only the scores; strict: the passive enclave finds the rows
by an oblivious scan, and its host learns only how many rows were scored). Every message names the data version
its handles refer to; a passive party whose data changed refuses it (``stale ids``) and the
active party fetches the new set: a handle is never applied to another version's rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..transport.grpc_transport import ONLINE_SESSION_PREFIX
from ..transport.serde import array_field, message

__all__ = ["OnlineIdsAsk", "OnlineIdSet", "OnlineBlind", "OnlineBlinded", "OnlineRoute", "OnlineSealed",
           "STALE_IDS", "ONLINE_SESSION_PREFIX"]

STALE_IDS = "stale ids"  # the refusal's first words when a request names another data version


@message
@dataclass(frozen=True)
class OnlineIdsAsk:
    """The passive party's blinded id set, unless ``known_version`` is still current."""

    known_version: str


@message
@dataclass(frozen=True)
class OnlineIdSet:
    """bH(y) for every id y of the passive party, in its secret order; empty when the asker's
    version is current. ``n_ids`` is always the set's size."""

    version: str
    n_ids: int
    points: np.ndarray = array_field("uint8", 2)


@message
@dataclass(frozen=True)
class OnlineBlind:
    """aH(x) for each id x of one request (a fresh a per request)."""

    version: str
    points: np.ndarray = array_field("uint8", 2)


@message
@dataclass(frozen=True)
class OnlineBlinded:
    version: str
    points: np.ndarray = array_field("uint8", 2)


@message
@dataclass(frozen=True)
class OnlineRoute:
    """One level's routing questions about rows given by handle (positions in the id set of
    ``version``): question j asks whether row ``rows[j]`` (an index into ``handles``; empty
    when there is one row) goes left at record ``records[j]``. Answered by ``RouteReply``.
    ``batch`` (16 random bytes) names the scoring the levels belong to: its distinct rows are
    charged to ``max_prediction_rows_per_day`` once, and it may take at most a path's levels."""

    model_digest: str
    version: str
    batch: bytes
    handles: np.ndarray = array_field("int64", 1)
    records: np.ndarray = array_field("int32", 1)
    rows: np.ndarray = array_field("uint16", 1)


@message
@dataclass(frozen=True)
class OnlineSealed:
    """Strict and N-TEE: one record between the active enclave and this party's online enclave
    (the session's ``run_id`` names which), holding handles one way and record bits the other.
    N-TEE: the rows' ``handles``, the model's ``outputs`` and ``path_bits`` also in the clear,
    for the passive host to charge (its enclave refuses the record if they are not the sealed
    ones, which the active enclave computed)."""

    run_id: str
    model_digest: str
    version: str
    record: bytes
    outputs: int = 0
    path_bits: int = 0  # N-TEE: the most of the party's nodes on a row's paths, over the trees
    handles: np.ndarray = array_field("int64", 1, optional=True)
