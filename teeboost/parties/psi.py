"""Entity alignment by private set intersection, before any training.

Active party (ids X, scalar a) with each passive party (ids Y, scalar b):
1. active -> passive: aH(x) for every x, in the active party's row order;
2. passive -> active: b(aH(x)) in the same order, and bH(y) for its ids sorted by their
   blinded value (an order that depends on b and the ids, never on its file's row order);
3. active: a(bH(y)) and b(aH(x)) are equal exactly for shared ids. After running this with
   every passive party, the intersection is the active rows shared by all; the active party
   sends each passive party, in that row order, the positions of those ids in its shuffled
   list, so both sides end with the same rows in the same order.
The active party learns which of its ids every party holds and the size of each passive
set; a passive party learns the final intersection and the size of the active set.

Alignment runs for a purpose: ``train`` (the rows of a training run) or ``predict.<session>``
(a batch of rows to score, one session each); each purpose keeps its own result, so scoring
never disturbs a run and concurrent scoring sessions never see each other's rows. A passive
party keeps at most ``MAX_PENDING`` exchanges awaiting their result (the oldest is forgotten)
and refuses an empty request, so requests cannot pile its memory up.
"""

from __future__ import annotations

from dataclasses import dataclass

import re
import time
from collections import OrderedDict

import numpy as np

from ..crypto.psi import POINT_BYTES, blind, hash_ids, new_scalar
from ..errors import DataError, ProtocolError
from ..transport.base import Channel
from ..transport.serde import array_field, message
from teeboost.protocols.messages import Ack

__all__ = ["PsiRequest", "PsiReply", "PsiResult", "PsiPassive", "intersect_as_active", "PURPOSES"]


PURPOSES = ("train", "predict")
_SESSION_PURPOSE = re.compile(r"^(predict|train)\.[A-Za-z0-9._-]{1,80}$")
STALE_EXCHANGE_SECONDS = 120.0  # a pending exchange this old may be started again (its result never came)
MAX_PENDING = 32  # exchanges awaiting their PsiResult, and aligned results awaiting their use


@message
@dataclass(frozen=True)
class PsiRequest:
    purpose: str
    points: np.ndarray = array_field("uint8", 2)


@message
@dataclass(frozen=True)
class PsiReply:
    double_blinded: np.ndarray = array_field("uint8", 2)
    theirs: np.ndarray = array_field("uint8", 2)


@message
@dataclass(frozen=True)
class PsiResult:
    """Positions, in the passive party's sorted list, of the intersection in row order."""

    purpose: str
    positions: np.ndarray = array_field("int64", 1)


class PsiPassive:
    """Passive side; ``rows[purpose]`` is set once that purpose's result arrives (its rows in
    the agreed order). Hashed ids are kept (they depend only on the ids); every exchange
    blinds them with a fresh scalar."""

    def __init__(self, ids: np.ndarray) -> None:
        self.ids = [str(i) for i in ids]
        self.rows: OrderedDict[str, np.ndarray] = OrderedDict()
        self._order: OrderedDict[str, np.ndarray] = OrderedDict()
        self._asked: dict[str, int] = {}
        self._started: dict[str, float] = {}  # when each pending exchange began (monotonic)
        self._hashed: np.ndarray | None = None

    def handle(self, msg):
        if isinstance(msg, PsiRequest):
            purpose = _purpose(msg.purpose)
            if msg.points.ndim != 2 or msg.points.shape[1] != POINT_BYTES:
                raise ProtocolError("malformed PSI request")
            if msg.points.shape[0] == 0:
                raise ProtocolError("an empty PSI request aligns nothing")
            started = self._started.get(purpose)
            if purpose in self._order and started is not None and time.monotonic() - started < STALE_EXCHANGE_SECONDS:
                # one exchange per purpose at a time: another would re-shuffle the order its result
                # refers to (red-team finding: 999 of 1,000 rows misaligned, no error)
                raise ProtocolError(f"an alignment for {purpose[:80]!r} is already under way")
            if self._hashed is None:
                self._hashed = hash_ids(self.ids)
            scalar = new_scalar()
            mine = blind(self._hashed, scalar)
            order = np.lexsort(mine.T[::-1])  # sorted by blinded value: reveals nothing of the file's order
            self._order.pop(purpose, None)
            self._order[purpose] = order
            self._started[purpose] = time.monotonic()
            self._asked[purpose] = int(msg.points.shape[0])
            self.rows.pop(purpose, None)
            while len(self._order) > MAX_PENDING:  # the oldest exchange is forgotten: its result is refused
                forgotten, _ = self._order.popitem(last=False)
                self._asked.pop(forgotten, None)
                self._started.pop(forgotten, None)
            return PsiReply(blind(msg.points, scalar), mine[order])
        if isinstance(msg, PsiResult):
            purpose = _purpose(msg.purpose)
            order = self._order.pop(purpose, None)
            self._started.pop(purpose, None)
            if order is None:
                raise ProtocolError(f"PSI result ({purpose}) without its PSI exchange (never made, already "
                                    f"used, or one of more than {MAX_PENDING} waiting)")
            positions = msg.positions
            if positions.size and (positions.min() < 0 or positions.max() >= order.size
                                   or np.unique(positions).size != positions.size):
                raise ProtocolError("PSI result names positions outside the exchanged set")
            if positions.size > self._asked.pop(purpose):  # an intersection is no larger than either set
                raise ProtocolError("PSI result claims more shared rows than ids the active party submitted")
            self.rows[purpose] = order[positions]
            while len(self.rows) > MAX_PENDING:
                self.rows.popitem(last=False)
            return Ack()
        raise ProtocolError(f"unexpected {type(msg).__name__} during alignment")


def _purpose(purpose: str) -> str:
    if purpose not in PURPOSES and not _SESSION_PURPOSE.fullmatch(purpose):
        raise ProtocolError(f"alignment purpose {purpose[:80]!r} is neither 'train.<run>' nor 'predict.<session>'")
    return purpose


def intersect_as_active(channel: Channel, ids: np.ndarray, purpose: str = "train", *,
                        allow_empty: bool = False) -> tuple[np.ndarray, dict[int, int]]:
    """Run PSI with every passive party; returns the active party's rows of the intersection
    (in its own order) and each passive party's set size. Sends every party its PsiResult."""
    scalar = new_scalar()
    mine = blind(hash_ids([str(i) for i in ids]), scalar)
    replies = channel.request_all({p: PsiRequest(purpose, mine) for p in channel.parties})
    shared = np.ones(len(ids), dtype=bool)
    lookups: dict[int, dict[bytes, int]] = {}
    doubles: dict[int, np.ndarray] = {}
    sizes = {}
    for party, reply in replies.items():
        if reply.double_blinded.shape != mine.shape:
            raise ProtocolError(f"party {party} returned {reply.double_blinded.shape[0]} PSI elements for {len(ids)}")
        theirs = blind(reply.theirs, scalar)
        lookups[party] = {theirs[j].tobytes(): j for j in range(theirs.shape[0])}
        sizes[party] = int(theirs.shape[0])
        doubles[party] = reply.double_blinded
        shared &= np.array([doubles[party][i].tobytes() in lookups[party] for i in range(len(ids))], dtype=bool)
    rows = np.flatnonzero(shared)
    if rows.size == 0 and not allow_empty:
        raise DataError("the parties share no ids: nothing to train on")
    channel.request_all({
        party: PsiResult(purpose, np.array([lookups[party][doubles[party][i].tobytes()] for i in rows], dtype=np.int64))
        for party in channel.parties
    })
    return rows, sizes
