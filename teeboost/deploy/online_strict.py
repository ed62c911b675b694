"""A passive party's strict online side: one attested enclave session per active online
session (several at once: a restarted or second scoring service opens its own), in which its
enclave holds every row (``teeboost.protocols.strict.enclave.online``).

This host hands each session's enclave the whole table once per model and data version,
relays sealed requests and answers, and keeps the enclaves' online ledger: a log of sealed
records, each appended (and its version recorded) before the answer it charged leaves. The
sessions share the log: before a session charges, its enclave is given the records the others
appended since it last looked, so every charge sees every other (one budget per row). This
host never learns which of its rows a request scored, only how many.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ProtocolError
from ..model_files import PassiveModel, load_passive, passive_file, write_atomically
from ..policy import PolicyRefused
from .online_passive import online_state_path
from teeboost.protocols.enclave.messages import pack_records, unpack_records
from teeboost.protocols.ntee.hosts import EnclaveFinish, EnclaveHello
from teeboost.protocols.online import OnlineSealed
from teeboost.protocols.strict.enclave import messages as sm
from teeboost.protocols.strict.enclave import online_messages as om
from teeboost.protocols.strict.enclave.ledger import FULL_PRECISION_BITS
from teeboost.protocols.env import enclave_code
from teeboost.protocols.strict.hosts import PROGRAM, StrictPredictPassive
from teeboost.tee.spare import SpareEnclave
from teeboost.transport import serde
from teeboost.transport.grpc_transport import current_online_session

if TYPE_CHECKING:
    from .online_passive import OnlineService


__all__ = ["StrictOnlinePassive", "MAX_SESSIONS", "RECENT_RECORDS"]

MAX_SESSIONS = 8  # strict online sessions held at once (the least recently used is closed)
RECENT_RECORDS = 10_000  # online ledger records kept in memory for sessions to catch up on
MAX_SPARES = 4  # spare enclaves launched at start, at most
BUSY_SECONDS = 120.0  # a session that served a request this recently is in use


@dataclass
class _Session:
    side: StrictPredictPassive
    model: PassiveModel
    loaded: tuple[str, str, int] | None = None  # (model digest, id set version, data read) in its enclave
    batch_version: int = -1  # the batch ledger version its enclave last read
    seen: int = 0  # the last online ledger version its enclave knows
    lock: threading.Lock = field(default_factory=threading.Lock)
    used: float = field(default_factory=time.monotonic)  # when it last served a request


class StrictOnlinePassive:
    def __init__(self, online: OnlineService) -> None:
        self.online = online
        self.service = online.service
        self.config = online.config
        self._sessions: OrderedDict[str, _Session] = OrderedDict()  # by run id
        self._handshakes: dict[bytes, str] = {}  # transport session -> run id of its handshake under way
        self._lock = threading.Lock()
        self._remembered = StrictOnlinePassive.served_before(self.config)
        self._recent: list[tuple[int, bytes]] = []  # online ledger records since the log last restarted
        self._keys: tuple[str, np.ndarray] | None = None  # (id set version, row keys in handle order)
        self._spare = SpareEnclave(self._launch, lambda enclave: enclave.ecall("online_warm"),
                                   name=f"passive-{self.config.index}")

    def _launch(self):
        env = self.service.env()
        return env.backend().load(enclave_code(PROGRAM, env.trusted_roots, env.options),
                                  label=f"passive-{self.config.index}")

    @staticmethod
    def served_before(config) -> int:
        """How many online enclave sessions this party served at once before (0: none): at start
        it launches that many spare enclaves, so that after a restart every scoring model's new
        session waits for no launch (with one spare, a second model's session waited 3.7 s for
        the next one: the load test, 2026-12-07)."""
        marker = online_state_path(config, ".online-enclaves")
        try:
            text = marker.read_bytes()[:8].strip()
        except OSError:
            return 0
        return min(MAX_SPARES, int(text)) if text.isdigit() and int(text) > 0 else 1  # bytes: ASCII digits only

    def prepare(self, wait: float = 0.0, keep: int | None = None) -> bool:
        """Launch the spares; wait up to ``wait`` seconds for them: -> whether they are ready."""
        self._spare.prepare(keep)
        return self._spare.wait(wait) if wait > 0 else False

    def handle(self, msg: Any) -> Any:
        if isinstance(msg, EnclaveHello):
            return self._hello(msg)
        if isinstance(msg, EnclaveFinish):
            with self._lock:
                run_id = self._handshakes.pop(current_online_session(), None)
                session = self._sessions.get(run_id or "")
            if session is None:
                raise ProtocolError("an enclave handshake finished before it started")
            with session.lock:
                return session.side.handle(msg)
        if not isinstance(msg, OnlineSealed):
            raise ProtocolError(f"{type(msg).__name__} is not a strict online request")
        with self._lock:
            session = self._sessions.get(msg.run_id)
            if session is not None:
                self._sessions.move_to_end(msg.run_id)
                session.used = time.monotonic()
        if session is None:
            raise ProtocolError("a strict online record outside its session (start one with an enclave handshake)")
        with session.lock:  # a session's records are in order
            return self._score(session, msg)

    def _hello(self, msg: EnclaveHello) -> Any:
        if not msg.run_id.startswith("online.") or len(msg.run_id) > 80:
            raise ProtocolError("an online enclave session's run id starts with 'online.'")
        model = load_passive(self.config.model_dir / passive_file(self.config.index))
        if not model.model_digest:
            raise ProtocolError(f"party {self.config.name!r}'s saved model names no published model")
        env = self.service.env()
        enclave = self._spare.take()
        try:
            side = StrictPredictPassive(model.owner, model.model_digest, env, model.index,
                                        sealed=model.sealed_records, enclave=enclave)
        except BaseException:
            enclave.close()  # a side that could not be built leaves no enclave running (red team)
            raise
        side.bind_policy(self.config.name, self.service.policy, model.max_depth)
        with self._lock:
            old = self._sessions.pop(msg.run_id, None)
            self._sessions[msg.run_id] = _Session(side, model)
            self._handshakes[current_online_session()] = msg.run_id
            gone = [self._sessions.popitem(last=False)[1] for _ in range(max(0, len(self._sessions) - MAX_SESSIONS))]
            now = time.monotonic()
            busy = sum(now - x.used < BUSY_SECONDS for x in self._sessions.values())
        self._remember_sessions(min(busy, MAX_SPARES))
        for session in [old, *gone]:
            if session is not None:
                session.side.close()
        return side.handle(msg)

    def _remember_sessions(self, busy: int) -> None:
        """How many sessions are in use at once, for the spares a restart launches (``prepare``)."""
        if busy != self._remembered:
            self._remembered = busy
            with contextlib.suppress(OSError):  # only a speed-up: never a reason to refuse a session
                write_atomically(online_state_path(self.config, ".online-enclaves"), str(busy).encode())
            self._spare.keep = max(1, busy)

    def _score(self, session: _Session, msg: OnlineSealed) -> OnlineSealed:
        if msg.model_digest != session.model.model_digest:
            raise ProtocolError(f"the active party scores with model {msg.model_digest[:16]!r}; party "
                                f"{self.config.name!r} serves only its saved model "
                                f"{session.model.model_digest[:16]!r}")
        snap = self.online._current(msg.version)
        ledger = self.service.strict_ledger
        with ledger.locked() if ledger is not None else contextlib.nullcontext():  # one charge at a time, all lanes
            self._load(session, snap)
            if not msg.record:  # the session's set-up: its table is loaded, nothing is scored
                return OnlineSealed(msg.run_id, msg.model_digest, msg.version, b"")
            used_rows = self.online._usage("max_prediction_rows_per_day")
            told: dict = {"now": time.time()}
            rows_limit = self.service.policy.max_prediction_rows_per_day
            if rows_limit is not None:  # its enclave refuses a larger request, sealed
                told["rows_left"] = int(rows_limit - used_rows)
            records = {0: msg.record}
            host_charged = session.model.protocol != "strict"
            if host_charged:  # N-TEE: this host sees the rows, as its routing did, and charges them itself
                told.update(self._told_in_the_clear(snap, msg))
                try:  # refused before its enclave answers, so that the refusal is sealed in the answer's place
                    self._charge_in_the_clear(snap, msg, used_rows, check_only=True)
                except PolicyRefused as exc:
                    told["refused"] = {"rule": exc.rule, "detail": exc.detail}
            elif ledger is not None:
                version = ledger.version()
                told["batch_version"] = version
                if version != session.batch_version:  # batch sessions spent since: the enclave reads their ledger
                    records[2] = ledger.load()[0]
                others = [(v, r) for v, r in self._recent if v > session.seen]
                if others:  # what other online sessions charged since this one last looked
                    records[3] = b"".join(len(r).to_bytes(4, "big") + r for _, r in others)
            records[1] = json.dumps(told).encode()
            parts = unpack_records(session.side.enclave.ecall("online_records", pack_records(records)))
            summary = json.loads(parts[2])
            if ledger is not None and not host_charged:
                session.batch_version = told["batch_version"]
                session.seen = max([session.seen, *(v for v, _ in self._recent)])
            if summary["refused"]:
                refusal = PolicyRefused(self.config.name, summary["refused"], summary["detail"])
                if not parts[0]:
                    raise refusal
                self.service.refused_sealed(msg, refusal)  # audited and said as any refusal is
                return OnlineSealed(msg.run_id, msg.model_digest, msg.version, parts[0])
            if host_charged:  # charged now that its enclave took the request, before its answer leaves
                self._charge_in_the_clear(snap, msg, used_rows)
                self.service.audit.write("predict", peer=self.service.peer, dataset="online", protocol="ntee",
                                         rows=int(summary["rows"]))
                return OnlineSealed(msg.run_id, msg.model_digest, msg.version, parts[0])
            if parts[1]:  # kept even if refused below: the enclave's ledger already counts it
                ledger.append_online(parts[1], int(summary["version"]))
                self._recent.append((int(summary["version"]), parts[1]))
                session.seen = int(summary["version"])
            self._forget_seen()
            self.online._check_budget("max_prediction_rows_per_day", used_rows, int(summary["rows"]))
            # rows charged before the answer leaves; what the enclave charged in bits stays in it
            self.service.audit.write("predict", peer=self.service.peer, dataset="online", protocol="strict",
                                     rows=int(summary["rows"]))
        return OnlineSealed(msg.run_id, msg.model_digest, msg.version, parts[0])

    def _told_in_the_clear(self, snap, msg: OnlineSealed) -> dict:
        """N-TEE: what the active party names in the clear, for this host's enclave to check
        against what the active enclave sealed: the rows, the model's outputs, and the most of
        this party's nodes on a row's paths (computed by the active enclave from the trees it
        scores with)."""
        handles = np.asarray(msg.handles, dtype=np.int64)
        k = int(handles.size)
        if not 1 <= k <= 4096 or handles.min() < 0 or handles.max() >= snap.ids.n or np.unique(handles).size != k:
            raise ProtocolError(f"an online request names 1 to 4096 distinct rows of the {snap.ids.n} in the id set")
        if not 1 <= msg.outputs <= 1024 or msg.path_bits < 0:
            raise ProtocolError("an N-TEE online request names the model's outputs (1 to 1024) and its path bound")
        return {"handles": [int(h) for h in handles], "outputs": int(msg.outputs), "path_bits": int(msg.path_bits)}

    def _charge_in_the_clear(self, snap, msg: OnlineSealed, used_rows: int, check_only: bool = False) -> None:
        """N-TEE: the rows charged to ``max_prediction_rows_per_day`` and to the row ledger batch
        prediction charges (one budget per row, whichever way it is scored), each what its score
        can tell the active host: at most 64 bits an output (scores unquantized, as batch
        prediction's), and at most one bit per node of this party on the row's path in each tree
        (the scores are a function of those answers), whichever is less."""
        handles = np.asarray(msg.handles, dtype=np.int64)
        self.online._check_budget("max_prediction_rows_per_day", used_rows, int(handles.size))
        if self.service.ledger is not None:
            bits = min(int(msg.outputs) * FULL_PRECISION_BITS, int(msg.path_bits))
            ledger = self.service.ledger
            (ledger.check if check_only else ledger.charge)(
                snap.row_keys(ledger, handles), np.full(handles.size, bits),
                self.service.policy.max_bits_per_row_per_day, f"scoring {handles.size} row(s) online")

    def _forget_seen(self) -> None:
        """Records every session has applied are not needed in memory any more (the log on
        disk keeps them); at most ``RECENT_RECORDS`` are kept for sessions that lag (one that
        lags further is refused at its next request, and its scoring service attests a new
        session, which replays the log from disk)."""
        with self._lock:
            oldest = min((x.seen for x in self._sessions.values()), default=0)
        self._recent = [(v, r) for v, r in self._recent if v > oldest][-RECENT_RECORDS:]

    def _load(self, session: _Session, snap) -> None:
        """The table of this model and data version into the session's enclave (once); the
        ledger lock is held."""
        if session.loaded == (session.model.model_digest, snap.ids.version, snap.serial):
            return
        model = session.model
        ordered = snap.data.take(snap.ids.order)
        raw = ordered.conform(model.feature_names, model.vocabularies, "the model").features
        ledger, sealed_ledger = self.service.ledger, self.service.strict_ledger
        keys = np.zeros((0, 16), np.uint8)
        log, log_version = b"", 0
        if ledger is not None and sealed_ledger is not None and model.protocol == "strict":  # else the host charges
            if self._keys is None or self._keys[0] != snap.ids.version:
                self._keys = (snap.ids.version, ledger.row_keys(ordered.ids))
            keys = self._keys[1]
            log, log_version = sealed_ledger.load_online()
        arrays = sm.record_arrays(model.owner if not model.sealed_records else type(model.owner)())
        policy = self.service.policy
        output_bits = (policy.output_bits or 0) if model.protocol == "strict" else 0  # N-TEE: batch's scores
        table = om.StrictOnlineTable(bytes.fromhex(model.model_digest), np.frombuffer(model.sealed_records, np.uint8),
                                     *arrays, np.ascontiguousarray(raw, dtype=np.float64), keys,
                                     output_bits, policy.max_outputs or 0,
                                     policy.max_bits_per_row_per_day or 0, time.time(),
                                     log_version, np.frombuffer(log, np.uint8), model.protocol != "strict")
        parts = unpack_records(session.side.enclave.ecall("online_table", serde.encode(table)))
        summary = json.loads(parts[1])
        session.batch_version = -1  # a new table: the enclave reads the batch ledger again
        if parts[0]:  # the log starts again from the base record the enclave sealed
            version = int(summary["ledger_version"])
            sealed_ledger.restart_online(parts[0], version)
            self._recent = [(version, parts[0])]
            session.seen = version
        session.loaded = (model.model_digest, snap.ids.version, snap.serial)
        self.service.audit.write("online table", peer=self.service.peer, model=model.model_digest[:16],
                                 rows=int(summary["rows"]))

    def close(self) -> None:
        self._spare.close()
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
        for session in sessions:
            session.side.close()
