"""A passive party as its own process: ``teeboost party --config passive.toml``.

It serves only the active party its config names (mutual TLS), aligns ids by PSI, trains
under the protocol the active party sets up if its ``[policy]`` allows it (and with
parameters the policy allows), saves its own model file, and scores prediction batches
that were aligned by PSI (re-reading its data file when it changed, so new ids can be scored
without a restart). Every run, query and refusal goes into its audit log. It stops on
``Shutdown``.

Sessions never mix: a training run is one live run at a time (a second is refused while the
first is live, unless it takes over with ``--resume`` or the first went stale); each prediction
session has its own alignment and dataset (``predict.<session>``) and is scored only with the
saved model whose digest it names, never an in-progress run; an enclave handshake and a strict
scoring session hold the party's enclave side until they end, and another waits (``Busy``).
Peers are told what a refusal is about, never the party's data, files or stack: those stay in
its stderr, under a reference both sides can quote.

Which side answers a request (the live run's or a saved model's) and the prediction sessions'
bookkeeping are ``teeboost.deploy.prediction_sessions``, a mixin of ``PassiveService``.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import signal
import sys
import threading
import time
import traceback
from collections import OrderedDict
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..audit import AuditLog
from ..budget import RowLedger, SealedLedgerFile, ledger_path
from ..checkpoint import passive_checkpoint_file, remove_checkpoint
from ..config import BoostParams
from ..data import PartyData
from ..data_sources import read_party, source_columns
from ..errors import (AttestationError, Busy, ConfigError, EnclaveError, IntegrityError, ProtocolError, Refused,
                      TeeboostError)
from ..federation import build_passive
from ..heap import settle
from ..model_files import PassiveModel, load_passive, passive_file, save_models
from teeboost.protocols.messages import Ack, RouteRequest
from ..parties.passive import PassiveParty
from ..parties.psi import PsiPassive, PsiRequest, PsiResult
from ..policy import DAY_SECONDS, PolicyRefused
from ..run_constraints import check_declared_directions
from teeboost.protocols.env import ProtocolEnv
from ..transport.grpc_transport import PartyServer, current_online_peer
from .config import PartyConfig, protocol_env
from .messages import Abandon, Finish, PredictData, ProtocolSettings, Setup, Shutdown, TeeProfile
from .online_passive import OnlineService, online_state_path
from .protocol_check import compare_settings
from .prediction_sessions import MAX_PREDICTION_SESSIONS, RUN_ID_PATTERN, PredictionSessions
from .tee_check import SETUP_STEPS, check_own_tee, compare_profiles, own_profile, uses_enclaves

__all__ = ["PassiveService", "serve_passive"]

SWITCH_INTERVAL = 0.0005  # seconds (Python's default is 0.005)
PREPARE_SECONDS = 60.0  # at most this long readying online scoring before listening
STALE_RUN_SECONDS = 600.0  # a live run with no request for this long may be replaced by a new one
#: Refusals a peer hears verbatim: about the protocol or the policy, from the message itself.
#: Anything else (the party's data, files, a fault) is reported as a reason code and a reference.
_TOLD = (ProtocolError, AttestationError, IntegrityError, Refused)


def _reason(exc: BaseException) -> str:
    """The reason code a peer is told for a fault of this party's own."""
    from ..errors import CheckpointError, DataError, ModelFileError

    for kind, reason in ((DataError, "data"), (ConfigError, "configuration"), (CheckpointError, "checkpoint"),
                         (ModelFileError, "model file"), (EnclaveError, "enclave"), (OSError, "files")):
        if isinstance(exc, kind):
            return reason
    return "internal"


def _ends_complete(path: Path, size: int) -> bool:
    """A CSV file someone finished writing ends with a newline; a Parquet file with its magic."""
    if size == 0:
        return False
    parquet = path.suffix.lower() in (".parquet", ".pq")
    with path.open("rb") as handle:
        handle.seek(max(0, size - (4 if parquet else 1)))
        return handle.read() == b"PAR1" if parquet else handle.read(1) in (b"\n", b"\r")


class PassiveService(PredictionSessions):
    """One passive party serving its active party: PSI alignment, one live training run at a
    time, prediction sessions, and every fault turned into a refusal the peer may hear."""

    def __init__(self, config: PartyConfig) -> None:
        self.config = config
        self.policy = config.policy
        self.audit = AuditLog(config.audit_log, config.name)
        # bits per row per day: routing answers in the row ledger, strict sessions in the
        # passive enclave's sealed ledger (both beside the audit log, neither holding ids)
        self.ledger = RowLedger(ledger_path(config.audit_log), config.name) if config.audit_log else None
        self.strict_ledger = (SealedLedgerFile.beside(config.audit_log, self.ledger, config.identities[0]
                                                      if config.identities else b"") if config.audit_log else None)
        self.party: PassiveParty | None = None  # the live training run's side
        self._init_session_tables()  # prediction sessions, their saved models' sides, enclave turns
        self.server: PartyServer | None = None
        self.run_id = ""
        self._run_seen = 0.0  # when the live run last had a request (monotonic)
        self._finished = False  # the live run saved its model (Finish)
        self._served_runs: set[str] = set()  # training run ids served by this process (Hello)
        self._source: tuple[int, int] | None = None
        self._aligned: OrderedDict[str, PartyData] = OrderedDict()
        self._data_lock = threading.RLock()  # the data is re-read by both lanes (main and online)
        self._online: OnlineService | None = None  # the online lane's side, made at its first request
        # what this process served, for the report it prints when it stops
        self.served = {"runs": 0, "protocols": [], "prediction_batches": 0, "prediction_rows": 0, "refusals": 0}
        self._reload()
        self.audit.write("start", policy=self.policy.to_dict(), data=str(config.data), rows=self.data.n_rows,
                         features=list(self.data.feature_names), serves=config.active_party,
                         tls="INSECURE plaintext" if config.insecure else "mutual TLS")

    @property
    def peer(self) -> str:
        """The client being served: of this thread's online request, else of the main lane's."""
        return current_online_peer() or (self.server.current_peer if self.server is not None else "in-process")

    def env(self) -> ProtocolEnv:
        return protocol_env(self.config)

    def current_data(self) -> PartyData:
        """The data served now, re-read if its file changed (thread-safe)."""
        with self._data_lock:
            self._reload()
            return self.data

    def _reload(self) -> None:
        with self._data_lock:
            self._reload_data()

    def _reload_data(self) -> None:
        """(Re)read the data file if it changed since it was last read: new ids can be
        aligned and scored without a restart. Runs already aligned keep their rows. A file
        being written (no newline at its end, or changing while read) is not read: the data
        read before stays in use (replace the file atomically: write it under another name in
        the same directory, then rename it into place)."""
        path = self.config.data
        if not isinstance(path, Path):  # a SQL source: read it again; a change of content is a reload
            known = self._saved_categories()
            data = read_party(path, id_column=self.config.id_column, name=self.config.name,
                              categorical=[c for c in known if c in source_columns(path)],
                              number_format=self.config.number_format)
            digest = ("\x00".join(map(str, data.ids)).encode() if data.ids is not None else b"", data.features.tobytes())
            source = hashlib.sha256(b"".join(digest)).hexdigest()
            if source != self._source:
                self.data, self.psi = data, PsiPassive(data.ids)
                if self._source is not None:
                    self.audit.write("reload", data=str(path), rows=self.data.n_rows)
                self._source = source
            return
        try:
            stat = path.stat()
        except FileNotFoundError:
            raise ConfigError(f"{path}: party {self.config.name!r}'s data file is gone") from None
        source = (stat.st_mtime_ns, stat.st_size)
        if source == self._source:
            return
        if not _ends_complete(path, stat.st_size):
            return self._defer_reload(f"{path} does not end with a newline: it looks half-written")
        known = self._saved_categories()
        data = read_party(path, id_column=self.config.id_column, name=self.config.name,
                          categorical=[c for c in known if c in source_columns(path)],
                          number_format=self.config.number_format)
        after = path.stat()
        if (after.st_mtime_ns, after.st_size) != source:
            return self._defer_reload(f"{path} changed while it was read")
        self.data = data
        self.psi = PsiPassive(self.data.ids)
        if self._source is not None:
            self.audit.write("reload", data=str(path), rows=self.data.n_rows)
        self._source = source

    def _defer_reload(self, why: str) -> None:
        if self._source is None:  # nothing read before: nothing to serve
            raise ConfigError(f"{why}; write the file under another name and rename it into place")
        print(f"teeboost: party {self.config.name}: {why}; still serving the data read before (write the file "
              "under another name and rename it into place)", file=sys.stderr, flush=True)
        self.audit.write("reload deferred", data=str(self.config.data))

    def _saved_categories(self) -> list[str]:
        """The categorical columns of this party's saved model: read as text, as trained."""
        path = self.config.model_dir / passive_file(self.config.index)
        try:
            return list(load_passive(path).vocabularies)
        except TeeboostError:
            return []

    def handle(self, msg: Any) -> Any:
        return self._answer(msg, self._handle)

    def handle_online(self, msg: Any) -> Any:
        """The transport's online lane (several threads; ``teeboost.deploy.online_passive``)."""
        return self._answer(msg, self._handle_online)

    def _handle_online(self, msg: Any) -> Any:
        return self.online().handle(msg)

    def online(self) -> OnlineService:
        with self._data_lock:
            if self._online is None:
                self._online = OnlineService(self)
            return self._online

    def prepare_online(self, wait: float = PREPARE_SECONDS) -> None:
        """A party that served online before readies it before it listens: its id set (read
        from its cache, or built) and, if it served enclave sessions, a spare enclave with its
        kernels compiled (``teeboost.tee.spare``). After a restart, the first online request then
        waits for neither: on a slow day it once timed out building the id set, and a scoring
        service waited more than 5 s for the spare to launch after the party was back."""
        from .online_strict import StrictOnlinePassive

        started = time.monotonic()
        if online_state_path(self.config, ".online-ids.npz").exists():
            try:
                self.online().snapshot()
            except Exception as exc:  # noqa: BLE001 - said now; the first request says it again
                print(f"teeboost: party {self.config.name}: the online id set could not be built at start "
                      f"({type(exc).__name__}: {exc})", file=sys.stderr, flush=True)
        sessions = StrictOnlinePassive.served_before(self.config)
        if sessions:
            ready = self.online().strict_side().prepare(wait=max(0.0, wait - (time.monotonic() - started)),
                                                        keep=sessions)
            if not ready:
                print(f"teeboost: party {self.config.name}: its spare online enclave was not ready within "
                      f"{wait:.0f} s of start; listening anyway (the first session waits for it)",
                      file=sys.stderr, flush=True)

    def _answer(self, msg: Any, handler) -> Any:
        try:
            reply = handler(msg)
        except _TOLD as exc:
            self._refused(msg, exc.rule if isinstance(exc, PolicyRefused) else type(exc).__name__, str(exc))
            print(f"teeboost: party {self.config.name}: refused {type(msg).__name__}: {exc}", file=sys.stderr,
                  flush=True)  # its operator sees what the active party is told
            raise
        except Exception as exc:  # noqa: BLE001 - every fault becomes a refusal; the details stay here
            reason = _reason(exc)
            reference = secrets.token_hex(4)
            print(f"teeboost: party {self.config.name}: could not serve {type(msg).__name__} ({reason}, reference "
                  f"{reference}): {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            if reason == "internal":
                traceback.print_exc(file=sys.stderr)
            self._refused(msg, reason, f"reference {reference} (details in the party's stderr)")
            raise Refused(f"party {self.config.name!r} cannot serve {type(msg).__name__} ({reason}; reference "
                          f"{reference}): its operator has the details") from None
        if isinstance(msg, RouteRequest):
            self.audit.write("route", run_id=self.run_id, peer=self.peer, dataset=msg.dataset,
                             questions=int(msg.records.size), answers=int(reply.n_answers))
        return reply

    def refused_sealed(self, msg: Any, exc: PolicyRefused) -> None:
        """A refusal its enclave sealed in an online answer's place: audited and said here as
        one raised is (``_answer``), though the answer leaves as a record."""
        self._refused(msg, exc.rule, str(exc))
        print(f"teeboost: party {self.config.name}: refused {type(msg).__name__}: {exc}", file=sys.stderr, flush=True)

    def _refused(self, msg: Any, rule: str, detail: str) -> None:
        """Audited with the peer's fingerprint, at most so many a minute per rule and peer (a
        flood of refusals is summed up, not written line by line)."""
        self.audit.refused(rule, peer=self.peer, address=self.server.current_address if self.server is not None
                           and hasattr(self.server, "current_address") else "", request=type(msg).__name__,
                           rule=rule, detail=detail[:300], run_id=self.run_id)
        self.served["refusals"] += 1

    def undecodable(self, exc: Exception) -> None:
        self.audit.refused(type(exc).__name__, peer=self.peer, request="undecodable frame", rule=type(exc).__name__,
                           detail=str(exc)[:300], run_id=self.run_id)

    def transport_refused(self, reason: str, peer: str, address: str) -> None:
        """Refusals at the transport (a certificate not allowed to call, a replay, a wrong
        sender): audited, rate-limited, with the caller's fingerprint and address."""
        keyword = reason.split(":", 1)[0][:40]  # the rate limit is per kind of refusal, not per wording
        self.audit.refused(keyword, peer=peer, address=address, request="transport", rule="transport",
                           detail=reason[:300])
        self.served["refusals"] += 1

    def _handle(self, msg: Any) -> Any:
        if isinstance(msg, PsiRequest):
            return self._align(msg)
        if isinstance(msg, PsiResult):
            reply = self.psi.handle(msg)
            self._aligned.pop(msg.purpose, None)
            self._aligned[msg.purpose] = self.data.take(self.psi.rows.pop(msg.purpose))
            while len(self._aligned) > MAX_PREDICTION_SESSIONS:  # alignments nobody used: the oldest goes
                self._aligned.popitem(last=False)
            self.audit.write("aligned", peer=self.peer, purpose=msg.purpose,
                             intersection=self._aligned[msg.purpose].n_rows)
            return reply
        if isinstance(msg, Setup):
            return self._setup(msg)
        if isinstance(msg, TeeProfile):
            return self._compare_tee(msg)
        if isinstance(msg, ProtocolSettings):  # before alignment: settings every party must share
            compare_settings(msg, self.config.options, self.config.name)
            return Ack()
        if isinstance(msg, Finish):
            return self._finish()
        if isinstance(msg, PredictData):
            return self._predict_data(msg)
        if isinstance(msg, Abandon):
            if self.party is not None and not self._finished and msg.run_id == self.run_id:
                self._close_run("abandoned by the active party")
                self.audit.write("abandoned", run_id=msg.run_id, peer=self.peer)
            elif msg.run_id in self._sessions or msg.run_id in self._aligned:  # a prediction session gave up
                if self._scoring is not None and self._scoring[0] == msg.run_id:
                    self._end_turn()
                self._aligned.pop(msg.run_id, None)
                self._end_session(msg.run_id)
                self.audit.write("abandoned", session=msg.run_id[:80], peer=self.peer)
            return Ack()
        if isinstance(msg, Shutdown):
            print(f"teeboost: party {self.config.name}: shutting down ({msg.reason[:200]!r})", file=sys.stderr)
            self._close_run("shutdown")
            self._close_predictors("shutdown")
            self.audit.write("shutdown", peer=self.peer, reason=msg.reason[:200])
            if self.server is not None:
                self.server.request_stop()
            return Ack()
        return self._dispatch(msg)

    def _budget(self, rule: str, asked: int) -> None:
        if getattr(self.policy, rule) is not None:
            self.policy.check_budget(self.config.name, rule, self.audit.usage(DAY_SECONDS)[rule], asked)

    def _align(self, msg: PsiRequest) -> Any:
        self._reload()
        asked = int(msg.points.shape[0]) if msg.points.ndim == 2 else 0
        self._budget("max_psi_ids_per_day", asked)
        reply = self.psi.handle(msg)
        self.audit.write("align", peer=self.peer, purpose=msg.purpose, ids=asked, own_rows=self.data.n_rows)
        return reply

    def _setup(self, msg: Setup) -> Ack:
        # the run's own alignment (purpose train.<run id>): another run's cannot be taken
        aligned = self._aligned.pop(f"train.{msg.run_id}", None)
        if aligned is None:
            aligned = self._aligned.get("train")
        if aligned is None:
            raise ProtocolError("training set-up before id alignment")
        if not RUN_ID_PATTERN.fullmatch(msg.run_id):
            raise ProtocolError("the run id must be 1-80 letters, digits, '.', '_' or '-'")
        try:
            params = BoostParams(**json.loads(msg.params))
        except (ValueError, TypeError) as exc:
            raise ProtocolError(f"unusable training parameters: {exc}") from None
        if not 1 <= msg.outputs <= 10_000:
            raise ProtocolError(f"a run of {msg.outputs} trees per round is out of range")
        self.policy.check_params(self.config.name, msg.protocol, params, msg.outputs)
        check_declared_directions(self.config.name, self.config.monotone, params, aligned.feature_names)
        self._budget("max_runs_per_day", 1)
        for name, positions in (("train", msg.train), ("test", msg.test), ("valid", msg.valid)):
            if positions.size and (positions.min() < 0 or positions.max() >= aligned.n_rows):
                raise ProtocolError(f"{name} positions outside the {aligned.n_rows} aligned rows")
        every = np.concatenate([msg.train, msg.test, msg.valid])
        if np.unique(every).size != every.size:  # a row twice would count twice towards k and routing limits
            raise ProtocolError("training, held-out and validation positions must be distinct rows, each once")
        # held-out rows are scored, and validation rows routed, by the run itself
        self._budget("max_prediction_rows_per_day", int(msg.test.size) + int(msg.valid.size))
        if self.config.attestation is not None and msg.protocol not in HARDWARE_CHECKED:
            raise ProtocolError(f"party {self.config.name!r} requires hardware attestation ([attestation]) and "
                                f"refuses protocol {msg.protocol!r}, which would not check the active party's "
                                f"enclave with it (allowed: {', '.join(HARDWARE_CHECKED)})")
        env = self.env()
        if uses_enclaves(msg.protocol):  # a missing [tee] is named before any enclave starts
            self._check_own_tee(env, msg.protocol)
        if self.party is not None and not self._finished and msg.run_id != self.run_id and not msg.resume:
            idle = time.monotonic() - self._run_seen
            if idle < STALE_RUN_SECONDS:
                raise Busy(f"party {self.config.name!r} is training run {self.run_id!r} (its last request {idle:.0f} s "
                           f"ago); another run is refused until it finishes or has been idle for "
                           f"{STALE_RUN_SECONDS:g} s (an interrupted run is taken over with --resume)")
        self._close_run("replaced by a new run")
        self.run_id = msg.run_id
        self._finished = False
        self._run_seen = time.monotonic()
        train = aligned.take(msg.train)
        self.party = build_passive(self.config.index, train, params, msg.protocol, env,
                                   valid=aligned.take(msg.valid) if msg.valid.size else None,
                                   checkpoint=self._checkpoint_file(), policy=self.policy,
                                   served_runs=self._served_runs)
        self._bind_ledger()
        if msg.valid.size:
            self.party.set_row_keys("valid", self._row_keys(aligned.take(msg.valid)))
        test = aligned.take(msg.test)
        self.party.add_dataset("test", test.conform(self.party.feature_names, self.party.vocabularies,
                                                    "the model").features, self._row_keys(test))
        self.audit.write("setup", run_id=self.run_id, peer=self.peer, protocol=msg.protocol,
                         params=params.to_dict(), outputs=int(msg.outputs),
                         rows={"train": int(msg.train.size), "test": int(msg.test.size), "valid": int(msg.valid.size)})
        return Ack()

    def _row_keys(self, data: PartyData) -> np.ndarray | None:
        return self.ledger.row_keys(data.ids) if self.ledger is not None else None

    def _bind_ledger(self) -> None:
        if self.ledger is not None:
            self.party.bind_ledger(self.ledger, self.strict_ledger, self._strict_session)

    def _strict_session(self, dataset: str, summary: dict) -> None:
        """What a strict prediction session cost, as its enclave counted it."""
        self.audit.write("charged", run_id=self.run_id, peer=self.peer, dataset=dataset, protocol="strict",
                         **{k: summary[k] for k in ("rows", "outputs", "output_bits", "cost_per_row", "window_rows")
                            if k in summary})

    def _without_paths(self, text: str) -> str:
        """A set-up message for the peer: what to fix, not where this party keeps its files."""
        for path in sorted({str(self.config.path), str(self.config.path.resolve()), self.config.path.name},
                           key=len, reverse=True):
            text = text.replace(path, "its config file")
        return text

    def _check_own_tee(self, env: ProtocolEnv, protocol: str) -> None:
        """A [tee] set-up that does not fit is told to the active party as it is, naming this
        party's config file and what to fix there (README: set-up mistakes are named at both ends)."""
        try:
            check_own_tee(env, party=self.config.name, config=self.config.path, index=self.config.index,
                          protocol=protocol)
        except ConfigError as exc:
            raise ProtocolError(self._without_paths(str(exc))) from None

    def _compare_tee(self, msg: TeeProfile) -> TeeProfile:
        """The active party's public [tee] set-up against this party's: mismatches are named
        here (and reach the active party as this party's refusal); the reply is this party's."""
        if not uses_enclaves(msg.protocol) or msg.index != 0:
            raise ProtocolError("only the active party's [tee] set-up (index 0) for a protocol that runs enclaves "
                                "is compared")
        self.policy.check_protocol(self.config.name, msg.protocol)
        env = self.env()
        self._check_own_tee(env, msg.protocol)
        mine = own_profile(env, party=self.config.name, index=self.config.index, protocol=msg.protocol)
        try:
            compare_profiles(mine, msg)
        except ConfigError as exc:
            raise ProtocolError(self._without_paths(str(exc))) from None
        return mine

    def _close_run(self, why: str) -> None:
        """Account for the queries of the party being replaced, then release it."""
        if self.party is None:
            return
        self.audit.write("queries", run_id=self.run_id, queries=dict(self.party.queries), note=why)
        self.party.close()
        self.party = None

    def _finish(self) -> Ack:
        if self.party is None or self.party.columns is None or self._finished:
            raise ProtocolError("nothing was trained")
        digest = getattr(self.party.protocol, "model_digest", "") or self.party.model_digest
        if not digest:  # the saved model is replaced only by a run that reached its end
            raise ProtocolError(f"run {self.run_id!r} did not finish its model (no model digest was announced): "
                                "the saved model is kept")
        sealed = getattr(self.party.protocol, "sealed_records", b"")  # strict: no record in the clear
        model = PassiveModel(self.config.index, self.config.name, self.party.feature_names, self.party.owner,
                             "strict" if self.party.protocol_name == "strict" else "", digest,
                             self.party.max_depth,
                             self.party.vocabularies, sealed_records=sealed)
        save_models(self.config.model_dir, None, [model])
        remove_checkpoint(self._checkpoint_file())
        self.party.end_training()
        counts = ({"trees": self.party.protocol.n_trees, "records": "sealed"} if sealed
                  else {"records": len(self.party.owner)})
        self.audit.write("finish", run_id=self.run_id, peer=self.peer, model_digest=digest, **counts,
                         queries=dict(self.party.queries))
        self.served["runs"] += 1
        self.served["protocols"].append(self.party.protocol_name)
        self.party.queries.clear()
        self._finished = True  # sessions under way finish with the model they began with; new ones get this one
        return Ack()

    def _checkpoint_file(self) -> Path:
        return passive_checkpoint_file(self.config.checkpoint_dir, self.config.index)

    def close(self) -> None:
        if self._online is not None:
            self._online.close()
        self._close_run("party stopped")
        self._close_predictors("party stopped")
        self.audit.close()
        if self.strict_ledger is not None:
            self.strict_ledger.flush_online()
        if self.ledger is not None:
            self.ledger.close()


#: Protocols in which this passive party verifies the active enclave's quote with its
#: [attestation] policy; a party that requires hardware attestation serves no other.
HARDWARE_CHECKED = ("onetee",)


def serve_passive(config: PartyConfig, *, ready_file: Path | None = None) -> dict[str, Any]:
    """Serve until the active party sends ``Shutdown`` or this process gets SIGTERM or SIGINT
    (both stop it cleanly: the audit log is closed); returns what it served."""
    # threads hand requests to each other (transport loop, lanes, micro-batchers): a short GIL
    # switch interval keeps each handoff from waiting out another thread's 5 ms default slice
    sys.setswitchinterval(SWITCH_INTERVAL)
    service = PassiveService(config)
    # before its port is even bound (a bound port that does not answer yet holds a caller until
    # its timeout): a party that is back is ready to score
    service.prepare_online()
    server = PartyServer(service.handle, name=config.name, listen=config.listen, tls=config.tls,
                         insecure=config.insecure, client_name=config.active_party,
                         max_message_bytes=config.max_message_bytes, on_undecodable=service.undecodable,
                         on_refused=service.transport_refused, online_handler=service.handle_online)
    service.server = server
    server.start()
    settle()  # what start-up loaded stays out of full collections (teeboost.heap)
    host = config.listen.rsplit(":", 1)[0]
    address = f"{host}:{server.port}"
    print(f"teeboost: party {config.name} (passive {config.index}) listening on {address} "
          f"({'INSECURE plaintext' if config.insecure else 'mutual TLS'}; serves {config.active_party!r}; "
          f"protocols {', '.join(config.policy.protocols)}; audit log {config.audit_log})", file=sys.stderr, flush=True)
    _warn_without_tee(config)
    if ready_file is not None:
        tmp = ready_file.with_name(ready_file.name + ".tmp")
        tmp.write_text(address)
        tmp.replace(ready_file)
    with _stop_on_signals(server):
        try:
            server.wait()
        finally:
            service.close()
    online = service._online.served if service._online is not None else {"online_requests": 0, "online_rows": 0}
    return {"party": config.name, "index": config.index, "address": address, **service.served, **online,
            "model_dir": str(config.model_dir), "audit_log": str(config.audit_log)}


def _warn_without_tee(config: PartyConfig) -> None:
    """Said at start-up, not first when the active party asks for a run."""
    needing = [p for p in config.policy.protocols if uses_enclaves(p)]
    if needing and config.platform is None and config.identity is None and not config.trusted_roots \
            and not config.identities and config.attestation is None:
        print(f"teeboost: party {config.name}: WARNING: {config.path} has no [tee] section, so it cannot serve "
              f"{', '.join(needing)} (allowed by its [policy] protocols): {SETUP_STEPS}", file=sys.stderr, flush=True)


@contextmanager
def _stop_on_signals(server: PartyServer):
    """``kill`` or Ctrl-C stop the server like ``Shutdown`` does (main thread only: elsewhere
    signals cannot be handled)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stop = lambda signum, frame: server.request_stop()  # noqa: E731
    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
