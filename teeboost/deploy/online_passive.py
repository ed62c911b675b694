"""A passive party's online lane: answers online scoring requests, concurrently with its other
work and with each other, micro-batched (``teeboost.microbatch``).

Requests of the active party's online sessions (``teeboost.protocols.online``) come here from
the transport's online lane, never through the training and batch-prediction handler, so a
long training step does not hold up a customer's score. What each request may ask is checked
as for batch prediction: the model is the saved one whose digest it names; a row's questions
in one tree are at most a path's worth (``max_depth``); ``max_psi_ids_per_day``,
``max_prediction_rows_per_day`` and ``max_bits_per_row_per_day`` are charged before anything
is answered, and every batch's audit lines are written before its answers leave.

What this host learns per request: the number of ids (a blinded element each, unlinkable to
a customer) and, outside strict mode, which of its rows were scored and with which of its
split records (as in batch prediction). In strict mode it learns only how many rows each
request scored (``teeboost.protocols.strict.online``).
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.vector_routing import RecordArrays
from ..errors import ProtocolError
from ..microbatch import MicroBatcher
from ..model_files import PassiveModel, load_passive, passive_file
from ..policy import DAY_SECONDS, PolicyRefused
from teeboost.protocols.messages import RouteReply
from teeboost.protocols.online import (STALE_IDS, OnlineBlind, OnlineBlinded, OnlineIdsAsk, OnlineIdSet, OnlineRoute,
                                       OnlineSealed)
from teeboost.protocols.ntee.hosts import EnclaveFinish, EnclaveHello
from ..transport.grpc_transport import current_online_peer, current_online_session
from .online_ids import ServedIdSet, load_or_create_key

if TYPE_CHECKING:
    from ..data import PartyData
    from .passive import PassiveService

__all__ = ["OnlineService", "online_state_path"]

MAX_SCORINGS = 4096  # scorings whose charged rows are remembered (a forgotten one's rows are charged again)
MODELS_HELD = 2  # (model, data version) pairs with their columns in memory: the current and the one before


def online_state_path(service_config, suffix: str) -> Path:
    """Beside the audit log (``audit-telco.online-key``), or in the model directory."""
    log = service_config.audit_log
    if log is not None:
        return log.with_name(log.name.removesuffix(".jsonl") + suffix)
    return service_config.model_dir / suffix.lstrip(".")


_SERIALS = itertools.count(1)


@dataclass
class _Snapshot:
    data: PartyData
    ids: ServedIdSet
    # one per data read: the values may change under the same ids (and id set version), and an
    # enclave's table must follow them (it kept the values it was first given: red team)
    serial: int = field(default_factory=lambda: next(_SERIALS))
    keys: dict = field(default_factory=dict)  # handle -> row ledger key (each row's HMAC once, not per level)

    def row_keys(self, ledger, handles: np.ndarray) -> np.ndarray:
        missing = [int(h) for h in handles if int(h) not in self.keys]
        if missing:
            found = ledger.row_keys([self.data.ids[int(self.ids.order[h])] for h in missing])
            self.keys.update(zip(missing, found))
            while len(self.keys) > 1_000_000:
                self.keys.pop(next(iter(self.keys)))
        return np.stack([self.keys[int(h)] for h in handles])


@dataclass
class _ServedModel:
    model: PassiveModel
    records: RecordArrays
    features: np.ndarray  # (n, f) this party's columns as the model reads them, in handle order


class OnlineService:
    """Thread-safe: the transport's online lane calls ``handle`` from several threads."""

    def __init__(self, service: PassiveService) -> None:
        self.service = service
        self.config = service.config
        self._key = load_or_create_key(online_state_path(self.config, ".online-key"))
        self._lock = threading.Lock()
        self._snapshot: _Snapshot | None = None
        self._building: PartyData | None = None  # new data whose id set is being built
        self._models: OrderedDict[tuple[str, str], _ServedModel] = OrderedDict()
        self._blinds = MicroBatcher(self._serve_blinds, name=f"{self.config.name}-blind", max_items=4096,
                                    size=lambda m: int(m.points.shape[0]))
        self._routes = MicroBatcher(self._serve_routes, name=f"{self.config.name}-route", max_items=4096,
                                    size=lambda item: int(item[1].handles.size))
        # scorings under way, by (transport session, batch id): levels routed, rows charged
        self._scorings: OrderedDict[tuple[bytes, bytes], tuple[int, set[int]]] = OrderedDict()
        self._strict = None  # the strict online enclave side, started at its first handshake
        self.served = {"online_requests": 0, "online_rows": 0}

    # -- the id set

    def snapshot(self) -> _Snapshot:
        """The id set of the data the party serves online. When the data file changed, the new
        set is built in the background (about a minute at 1e6 ids) while the previous one goes
        on answering; the first set is built before the first answer."""
        data = self.service.current_data()
        if data.ids is None:
            raise ProtocolError(f"party {self.config.name!r} has no id column: rows cannot be scored online")
        with self._lock:
            current = self._snapshot
            if current is not None and (current.data is data or self._building is data):
                return current
            if current is not None:  # serve the old set until the new one is ready
                self._building = data
                threading.Thread(target=self._build, args=(data,), name=f"teeboost-{self.config.name}-ids",
                                 daemon=True).start()
                return current
        built = self._built(data)
        with self._lock:
            if self._snapshot is None:
                self._snapshot = built
            return self._snapshot

    def _built(self, data: PartyData) -> _Snapshot:
        return _Snapshot(data, ServedIdSet([str(i) for i in data.ids], self._key,
                                           online_state_path(self.config, ".online-ids.npz")))

    def _build(self, data: PartyData) -> None:
        try:
            built = self._built(data)
        except Exception as exc:  # noqa: BLE001 - the old set goes on serving; the operator is told
            print(f"teeboost: party {self.config.name}: the online id set of the new data could not be built "
                  f"({type(exc).__name__}: {exc}); still serving the previous one", file=sys.stderr, flush=True)
            with self._lock:
                self._building = None
            return
        with self._lock:
            if self._building is data:
                self._snapshot, self._building = built, None
                self._models.clear()
        self.service.audit.write("online ids", version=built.ids.version[:12], ids=built.ids.n, rebuilt=True)

    def _current(self, version: str) -> _Snapshot:
        snap = self.snapshot()
        if version != snap.ids.version:
            raise ProtocolError(f"{STALE_IDS}: party {self.config.name!r} now serves id set {snap.ids.version[:12]}, "
                                f"not {version[:12]} (its data changed): fetch the new set")
        return snap

    # -- requests

    def handle(self, msg: Any) -> Any:
        if isinstance(msg, OnlineIdsAsk):
            snap = self.snapshot()
            points = snap.ids.points if msg.known_version != snap.ids.version else np.zeros((0, 32), np.uint8)
            self.service.audit.write("online ids", peer=current_online_peer(), version=snap.ids.version[:12],
                                     ids=snap.ids.n, sent=int(points.shape[0] > 0))
            return OnlineIdSet(snap.ids.version, snap.ids.n, points)
        if isinstance(msg, OnlineBlind):
            return self._blinds.submit(msg)
        if isinstance(msg, OnlineRoute):
            return self._routes.submit((current_online_session(), msg))
        if isinstance(msg, (OnlineSealed, EnclaveHello, EnclaveFinish)):
            return self.strict_side().handle(msg)
        raise ProtocolError(f"{type(msg).__name__} is not an online scoring request")

    def _serve_blinds(self, batch: list[OnlineBlind]) -> list[Any]:
        """Each id asked is charged to ``max_psi_ids_per_day``, request by request; one audit
        line per batch (``align``, purpose ``online``)."""
        results: list[Any] = []
        used = self._usage("max_psi_ids_per_day")
        asked = 0
        for msg in batch:
            try:
                snap = self._current(msg.version)
                k = int(msg.points.shape[0]) if msg.points.ndim == 2 else 0
                if not 1 <= k <= 4096:
                    raise ProtocolError(f"an online request names 1 to 4096 ids, not {k}")
                self._check_budget("max_psi_ids_per_day", used + asked, k)
                results.append(OnlineBlinded(snap.ids.version, snap.ids.blind(msg.points)))
                asked += k
            except Exception as exc:  # noqa: BLE001 - this request is refused, not the batch
                results.append(exc)  # raised in its own caller's thread, where the service audits it
        if asked:
            self.service.audit.write("align", peer=current_online_peer(), purpose="online", ids=asked,
                                     requests=len(batch))
        return results

    def _serve_routes(self, batch: list[tuple[bytes, OnlineRoute]]) -> list[Any]:
        """Rows are charged to ``max_prediction_rows_per_day`` when a scoring first routes them
        (a ``predict`` line per batch); every level is in an ``online route`` line."""
        results: list[Any] = []
        used = self._usage("max_prediction_rows_per_day")
        new_rows = answered = rows = 0
        for session, msg in batch:
            try:
                reply, fresh = self._route(session, msg, used + new_rows)
                results.append(reply)
                new_rows += fresh
                rows += int(msg.handles.size)
                answered += reply.n_answers
            except Exception as exc:  # noqa: BLE001
                results.append(exc)  # raised in its own caller's thread, where the service audits it
        if new_rows:
            self.service.audit.write("predict", peer=current_online_peer(), dataset="online", rows=new_rows,
                                     requests=len(batch))
            self.served["online_rows"] += new_rows
        if rows:
            self.service.audit.write("online route", peer=current_online_peer(), rows=rows, requests=len(batch),
                                     questions=answered)
            self.served["online_requests"] += len(batch)
        return results

    def _route(self, session: bytes, msg: OnlineRoute, used_rows: int) -> tuple[RouteReply, int]:
        """-> (the answers, how many rows this request charged). A scoring (``msg.batch``) is
        charged each distinct row once and takes at most a path's levels."""
        snap = self._current(msg.version)
        served = self._model(msg.model_digest, snap)
        handles = msg.handles
        k = int(handles.size)
        if not 1 <= k <= 4096 or handles.min() < 0 or handles.max() >= snap.ids.n or np.unique(handles).size != k:
            raise ProtocolError(f"an online request names 1 to 4096 distinct rows of the {snap.ids.n} in the id set")
        if len(msg.batch) != 16:
            raise ProtocolError("an online scoring is named by 16 bytes")
        rows = msg.rows.astype(np.int64) if k > 1 else np.zeros(msg.records.size, dtype=np.int64)
        if rows.size != msg.records.size or (rows.size and rows.max() >= k):
            raise ProtocolError("each online routing question names one of the request's rows")
        at = served.records.positions(msg.records)  # unknown ids are refused here
        self._check_paths(served, at, rows)
        depth = served.model.max_depth if served.model.max_depth is not None else (self.service.policy.max_depth or 64)
        with self._lock:
            key = (session, msg.batch)
            seen = self._scorings.pop(key, None) or (0, set())
            levels, charged = seen[0] + 1, seen[1]
            if levels > depth:
                raise ProtocolError(f"an online scoring routes at most {depth} levels (the model's depth)")
            fresh = [int(h) for h in handles if int(h) not in charged]
            self._check_budget("max_prediction_rows_per_day", used_rows, len(fresh))
            self._scorings[key] = (levels, charged | set(fresh))
            while len(self._scorings) > MAX_SCORINGS:
                self._scorings.popitem(last=False)
        if self.service.ledger is not None:
            keys = snap.row_keys(self.service.ledger, handles)
            self.service.ledger.charge(keys, np.bincount(rows, minlength=k), self.service.policy.max_bits_per_row_per_day,
                                       f"answering {rows.size} online routing question(s)")
        answers = served.records.go_left(served.features[handles], rows, msg.records)
        return RouteReply(int(answers.size), np.packbits(answers)), len(fresh)

    def _check_paths(self, served: _ServedModel, at: np.ndarray, rows: np.ndarray) -> None:
        """A row is asked about at most ``max_depth`` of this party's records per tree in one
        request: a path's worth, as in batch prediction (more would reveal its place at every
        split)."""
        depth = served.model.max_depth if served.model.max_depth is not None else self.service.policy.max_depth
        if depth is None or not rows.size:
            return
        _, counts = np.unique(rows * (1 << 32) + served.records.trees[at], return_counts=True)
        if counts.max() > depth:
            raise ProtocolError(f"an online request asks about a row at {int(counts.max())} of party "
                                f"{self.config.name!r}'s splits in one tree; a path crosses at most {depth}")

    def _model(self, digest: str, snap: _Snapshot) -> _ServedModel:
        with self._lock:
            served = self._models.get((digest, snap.ids.version))
            if served is not None:
                self._models.move_to_end((digest, snap.ids.version))
                return served
        model = load_passive(self.config.model_dir / passive_file(self.config.index))
        if not model.model_digest or digest != model.model_digest:
            raise ProtocolError(f"the active party scores with model {digest[:16]!r}; party {self.config.name!r} "
                                f"serves only its saved model {(model.model_digest or 'without digest')[:16]!r}")
        if model.protocol == "strict":
            raise ProtocolError(f"party {self.config.name!r} trained model {digest[:16]!r} in strict mode: its rows "
                                "are scored only between enclaves")
        missing = [n for n in model.feature_names if n not in snap.data.feature_names]
        if missing:
            raise ProtocolError(f"party {self.config.name!r}'s data no longer has the model's column(s) "
                                f"{', '.join(map(repr, missing))}")
        ordered = snap.data.take(snap.ids.order)
        features = ordered.conform(model.feature_names, model.vocabularies, "the model").features
        served = _ServedModel(model, RecordArrays.from_owner(model.owner),
                              np.ascontiguousarray(features, dtype=np.float64))
        with self._lock:
            self._models[(digest, snap.ids.version)] = served
            while len(self._models) > MODELS_HELD:
                self._models.popitem(last=False)
        return served

    # -- budgets and refusals

    def _usage(self, rule: str) -> int:
        if getattr(self.service.policy, rule) is None:
            return 0
        return int(self.service.audit.usage(DAY_SECONDS)[rule])

    def _check_budget(self, rule: str, used: int, asked: int) -> None:
        if getattr(self.service.policy, rule) is not None:
            self.service.policy.check_budget(self.config.name, rule, used, asked)

    def strict_side(self):
        with self._lock:
            if self._strict is None:
                from .online_strict import StrictOnlinePassive

                self._strict = StrictOnlinePassive(self)
            return self._strict

    def close(self) -> None:
        self._blinds.close()
        self._routes.close()
        if self._strict is not None:
            self._strict.close()
