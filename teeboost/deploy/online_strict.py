"""A passive party's strict online side: one attested enclave session per active online
session, in which its enclave holds every row (``teeboost.protocols.strict.enclave.online``).

This host hands its enclave the whole table once per model and data version, relays sealed
requests and answers, and keeps the enclave's online ledger: a log of sealed records, each
appended (and its version recorded) before the answer it charged leaves. It never learns which
of its rows a request scored, only how many.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ProtocolError
from ..model_files import load_passive, passive_file
from ..policy import PolicyRefused
from teeboost.protocols.enclave.messages import pack_records, unpack_records
from teeboost.protocols.ntee.hosts import EnclaveFinish, EnclaveHello
from teeboost.protocols.online import OnlineSealed
from teeboost.protocols.strict.enclave import messages as sm
from teeboost.protocols.strict.enclave import online_messages as om
from teeboost.protocols.strict.hosts import StrictPredictPassive
from teeboost.transport import serde
if TYPE_CHECKING:
    from .online_passive import OnlineService

__all__ = ["StrictOnlinePassive"]


class StrictOnlinePassive:
    def __init__(self, online: OnlineService) -> None:
        self.online = online
        self.service = online.service
        self.config = online.config
        self._side: StrictPredictPassive | None = None
        self._run_id = ""
        self._loaded: tuple[str, str] | None = None  # (model digest, id set version) in the enclave
        self._lock = threading.Lock()  # one request at a time: a session's records are in order
        self._batch_version = -1  # the batch ledger version the enclave last read
        self._keys: tuple[str, np.ndarray] | None = None  # (id set version, row keys in handle order)

    def handle(self, msg: Any) -> Any:
        with self._lock:
            if isinstance(msg, EnclaveHello):
                return self._hello(msg)
            if self._side is None:
                raise ProtocolError("no strict online session: start one with an enclave handshake")
            if isinstance(msg, EnclaveFinish):
                return self._side.handle(msg)
            return self._score(msg)

    def _hello(self, msg: EnclaveHello) -> Any:
        if not msg.run_id.startswith("online."):
            raise ProtocolError("an online enclave session's run id starts with 'online.'")
        model = load_passive(self.config.model_dir / passive_file(self.config.index))
        if model.protocol != "strict" or not model.model_digest:
            raise ProtocolError(f"party {self.config.name!r}'s saved model was not trained in strict mode")
        self.close()  # a new session replaces the old one (the active party reconnected)
        side = StrictPredictPassive(model.owner, model.model_digest, self.service.env(), model.index,
                                    sealed=model.sealed_records)
        side.bind_policy(self.config.name, self.service.policy, model.max_depth)
        side._used = True
        self._side, self._run_id, self._loaded, self._batch_version = side, msg.run_id, None, -1
        self._model = model
        return side.handle(msg)

    def _score(self, msg: OnlineSealed) -> OnlineSealed:
        if not isinstance(msg, OnlineSealed) or msg.run_id != self._run_id:
            raise ProtocolError("a strict online record outside its session")
        if msg.model_digest != self._model.model_digest:
            raise ProtocolError(f"the active party scores with model {msg.model_digest[:16]!r}; party "
                                f"{self.config.name!r} serves only its saved model {self._model.model_digest[:16]!r}")
        snap = self.online._current(msg.version)
        self._load(snap)
        ledger = self.service.strict_ledger
        with ledger.locked() if ledger is not None else contextlib.nullcontext():  # one charge at a time, both lanes
            told: dict = {"now": time.time()}
            records = {0: msg.record}
            if ledger is not None:
                blob, version = ledger.load()
                told["batch_version"] = version
                if version != self._batch_version:  # batch sessions spent since: the enclave reads their ledger
                    records[2] = blob
            records[1] = json.dumps(told).encode()
            parts = unpack_records(self._side.enclave.ecall("online_records", pack_records(records)))
            summary = json.loads(parts[2])
            if summary["refused"]:
                raise PolicyRefused(self.config.name, summary["refused"], summary["detail"])
            if ledger is not None:
                self._batch_version = told["batch_version"]
            if parts[1]:
                ledger.append_online(parts[1], int(summary["version"]))
        self.service.audit.write("online route", peer=self.service.peer, protocol="strict", rows=int(summary["rows"]),
                                 charged_rows=summary.get("charged_rows"), bits=summary.get("bits"))
        return OnlineSealed(msg.run_id, msg.model_digest, msg.version, parts[0])

    def _load(self, snap) -> None:
        """The table of this model and data version into the session's enclave (once)."""
        if self._loaded == (self._model.model_digest, snap.ids.version):
            return
        model = self._model
        ordered = snap.data.take(snap.ids.order)
        raw = ordered.conform(model.feature_names, model.vocabularies, "the model").features
        ledger, sealed_ledger = self.service.ledger, self.service.strict_ledger
        keys = np.zeros((0, 16), np.uint8)
        log, log_version = b"", 0
        if ledger is not None and sealed_ledger is not None:
            if self._keys is None or self._keys[0] != snap.ids.version:
                self._keys = (snap.ids.version, ledger.row_keys(ordered.ids))
            keys = self._keys[1]
            log, log_version = sealed_ledger.load_online()
        arrays = sm.record_arrays(model.owner if not model.sealed_records else type(model.owner)())
        policy = self.service.policy
        table = om.StrictOnlineTable(bytes.fromhex(model.model_digest), np.frombuffer(model.sealed_records, np.uint8),
                                     *arrays, np.ascontiguousarray(raw, dtype=np.float64), keys,
                                     policy.output_bits or 0, policy.max_outputs or 0,
                                     policy.max_bits_per_row_per_day or 0, time.time(),
                                     log_version, np.frombuffer(log, np.uint8))
        with sealed_ledger.locked() if sealed_ledger is not None else contextlib.nullcontext():
            parts = unpack_records(self._side.enclave.ecall("online_table", serde.encode(table)))
            summary = json.loads(parts[1])
            if parts[0]:  # the log starts again from the base record the enclave sealed
                sealed_ledger.restart_online(parts[0], int(summary["ledger_version"]))
        self._loaded = (model.model_digest, snap.ids.version)
        self.service.audit.write("online table", peer=self.service.peer, model=model.model_digest[:16],
                                 rows=int(summary["rows"]), ledger_entries=int(summary["ledger_rows"]))

    def close(self) -> None:
        if self._side is not None:
            self._side.close()
            self._side = None
