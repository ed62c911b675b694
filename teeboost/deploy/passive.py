"""A passive party as its own process: ``teeboost party --config passive.toml``.

It serves only the active party its config names (mutual TLS), aligns ids by PSI, trains
under the protocol the active party sets up if its ``[policy]`` allows it (and with
parameters the policy allows), saves its own model file, and scores prediction batches
that were aligned by PSI (re-reading its data file when it changed, so new ids can be scored
without a restart). Every run, query and refusal goes into its audit log. It stops on
``Shutdown``.
"""

from __future__ import annotations

import json
import re
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..audit import AuditLog
from ..budget import RowLedger, SealedLedgerFile, ledger_path
from ..checkpoint import passive_checkpoint_file, remove_checkpoint
from ..config import BoostParams
from ..data import PartyData, read_csv_header
from ..errors import ConfigError, ProtocolError, TeeboostError
from ..federation import build_passive
from ..model_files import PassiveModel, load_passive, passive_file, save_models
from ..parties.messages import Ack, RouteRequest
from ..parties.passive import PassiveParty
from ..parties.psi import PsiPassive, PsiRequest, PsiResult
from ..policy import DAY_SECONDS, PolicyRefused
from ..protocols.enclaves import ProtocolEnv
from ..protocols.strict import StrictPredictPassive
from ..transport.grpc_transport import PartyServer
from .config import PartyConfig, protocol_env
from .messages import Finish, PredictData, Setup, Shutdown, TeeProfile
from .tee_check import SETUP_STEPS, check_own_tee, compare_profiles, own_profile, uses_enclaves

__all__ = ["PassiveService", "serve_passive"]

_RUN_ID = re.compile(r"^[A-Za-z0-9._-]{1,80}$")
RUN_DATASETS = ("train", "valid", "test")  # a training run's own rows, never a prediction batch's name


class PassiveService:
    def __init__(self, config: PartyConfig) -> None:
        self.config = config
        self.policy = config.policy
        self.audit = AuditLog(config.audit_log, config.name)
        # bits per row per day: routing answers in the row ledger, strict sessions in the
        # passive enclave's sealed ledger (both beside the audit log, neither holding ids)
        self.ledger = RowLedger(ledger_path(config.audit_log), config.name) if config.audit_log else None
        self.strict_ledger = SealedLedgerFile.beside(config.audit_log, self.ledger) if config.audit_log else None
        self.party: PassiveParty | None = None
        self.server: PartyServer | None = None
        self.run_id = ""
        self._served_runs: set[str] = set()  # training run ids served by this process (Hello)
        self._source: tuple[int, int] | None = None
        self._aligned: dict[str, PartyData] = {}
        # what this process served, for the report it prints when it stops
        self.served = {"runs": 0, "protocols": [], "prediction_batches": 0, "prediction_rows": 0, "refusals": 0}
        self._reload()
        self.audit.write("start", policy=self.policy.to_dict(), data=str(config.data), rows=self.data.n_rows,
                         features=list(self.data.feature_names), serves=config.active_party,
                         tls="INSECURE plaintext" if config.insecure else "mutual TLS")

    @property
    def peer(self) -> str:
        return self.server.current_peer if self.server is not None else "in-process"

    def env(self) -> ProtocolEnv:
        return protocol_env(self.config)

    def _reload(self) -> None:
        """(Re)read the data file if it changed since it was last read: new ids can be
        aligned and scored without a restart. Runs already aligned keep their rows."""
        try:
            stat = self.config.data.stat()
        except FileNotFoundError:
            raise ConfigError(f"{self.config.data}: party {self.config.name!r}'s data file is gone") from None
        source = (stat.st_mtime_ns, stat.st_size)
        if source == self._source:
            return
        known = self._saved_categories()
        self.data = PartyData.from_csv(self.config.data, id_column=self.config.id_column, name=self.config.name,
                                       categorical=[c for c in known if c in read_csv_header(self.config.data)])
        self.psi = PsiPassive(self.data.ids)
        if self._source is not None:
            self.audit.write("reload", data=str(self.config.data), rows=self.data.n_rows)
        self._source = source

    def _saved_categories(self) -> list[str]:
        """The categorical columns of this party's saved model: read as text, as trained."""
        path = self.config.model_dir / passive_file(self.config.index)
        try:
            return list(load_passive(path).vocabularies)
        except TeeboostError:
            return []

    def handle(self, msg: Any) -> Any:
        try:
            reply = self._handle(msg)
        except TeeboostError as exc:
            self.audit.write("refused", run_id=self.run_id, peer=self.peer, request=type(msg).__name__,
                             rule=exc.rule if isinstance(exc, PolicyRefused) else type(exc).__name__,
                             detail=str(exc)[:300])
            self.served["refusals"] += 1
            print(f"teeboost: party {self.config.name}: refused {type(msg).__name__}: {exc}", file=sys.stderr,
                  flush=True)  # its operator sees what the active party is told
            raise
        if isinstance(msg, RouteRequest):
            self.audit.write("route", run_id=self.run_id, peer=self.peer, dataset=msg.dataset,
                             questions=int(msg.records.size), answers=int(reply.n_answers))
        return reply

    def undecodable(self, exc: Exception) -> None:
        self.audit.write("refused", run_id=self.run_id, peer=self.peer, request="undecodable frame",
                         rule=type(exc).__name__, detail=str(exc)[:300])

    def _handle(self, msg: Any) -> Any:
        if isinstance(msg, PsiRequest):
            return self._align(msg)
        if isinstance(msg, PsiResult):
            reply = self.psi.handle(msg)
            self._aligned[msg.purpose] = self.data.take(self.psi.rows[msg.purpose])
            self.audit.write("aligned", peer=self.peer, purpose=msg.purpose,
                             intersection=self._aligned[msg.purpose].n_rows)
            return reply
        if isinstance(msg, Setup):
            return self._setup(msg)
        if isinstance(msg, TeeProfile):
            return self._compare_tee(msg)
        if isinstance(msg, Finish):
            return self._finish()
        if isinstance(msg, PredictData):
            return self._predict_data(msg)
        if isinstance(msg, Shutdown):
            print(f"teeboost: party {self.config.name}: shutting down ({msg.reason[:200]!r})", file=sys.stderr)
            self._close_run("shutdown")
            self.audit.write("shutdown", peer=self.peer, reason=msg.reason[:200])
            if self.server is not None:
                self.server.request_stop()
            return Ack()
        if self.party is None:
            raise ProtocolError(f"party {self.config.name!r} has not been set up for training or prediction")
        return self.party.handle(msg)

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
        aligned = self._aligned.get("train")
        if aligned is None:
            raise ProtocolError("training set-up before id alignment")
        if not _RUN_ID.fullmatch(msg.run_id):
            raise ProtocolError("the run id must be 1-80 letters, digits, '.', '_' or '-'")
        try:
            params = BoostParams(**json.loads(msg.params))
        except (ValueError, TypeError) as exc:
            raise ProtocolError(f"unusable training parameters: {exc}") from None
        if not 1 <= msg.outputs <= 10_000:
            raise ProtocolError(f"a run of {msg.outputs} trees per round is out of range")
        self.policy.check_params(self.config.name, msg.protocol, params, msg.outputs)
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
        self._close_run("replaced by a new run")
        self.run_id = msg.run_id
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
                         **{k: summary[k] for k in ("rows", "outputs", "output_bits", "charged_rows", "bits",
                                                    "window_rows", "window_largest_per_row", "window_total_bits")
                            if k in summary})

    def _check_own_tee(self, env: ProtocolEnv, protocol: str) -> None:
        check_own_tee(env, party=self.config.name, config=self.config.path, index=self.config.index,
                      protocol=protocol)

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
        compare_profiles(mine, msg)
        return mine

    def _close_run(self, why: str) -> None:
        """Account for the queries of the party being replaced, then release it."""
        if self.party is None:
            return
        self.audit.write("queries", run_id=self.run_id, queries=dict(self.party.queries), note=why)
        self.party.close()
        self.party = None

    def _finish(self) -> Ack:
        if self.party is None or self.party.columns is None:
            raise ProtocolError("nothing was trained")
        model = PassiveModel(self.config.index, self.config.name, self.party.feature_names, self.party.owner,
                             "strict" if self.party.protocol_name == "strict" else "",
                             getattr(self.party.protocol, "model_digest", "") or self.party.model_digest,
                             self.party.max_depth,
                             self.party.vocabularies)
        save_models(self.config.model_dir, None, [model])
        remove_checkpoint(self._checkpoint_file())
        self.party.end_training()
        self.audit.write("finish", run_id=self.run_id, peer=self.peer, records=len(self.party.owner),
                         queries=dict(self.party.queries))
        self.served["runs"] += 1
        self.served["protocols"].append(self.party.protocol_name)
        self.party.queries.clear()
        return Ack()

    def _checkpoint_file(self) -> Path:
        return passive_checkpoint_file(self.config.checkpoint_dir, self.config.index)

    def _predict_data(self, msg: PredictData) -> Ack:
        if msg.dataset in RUN_DATASETS or not _RUN_ID.fullmatch(msg.dataset):
            # a batch under a run's dataset name would be routed as that dataset (red-team finding:
            # "train" was exempt from the leakage budget)
            raise ProtocolError(f"a prediction batch cannot be called {msg.dataset[:40]!r} (1-80 letters, digits, "
                                f"'.', '_' or '-', and none of {', '.join(RUN_DATASETS)})")
        batch = self._aligned.pop("predict", None)
        if batch is None:
            raise ProtocolError("a prediction batch must be aligned by PSI (purpose 'predict') first")
        self._budget("max_prediction_rows_per_day", batch.n_rows)
        if self.party is None:
            model = load_passive(self.config.model_dir / passive_file(self.config.index))
            strict = model.protocol == "strict"  # routing only between enclaves
            self.party = PassiveParty(model.index, model.name, model.feature_names, model.owner,
                                      protocol=StrictPredictPassive(model.owner, model.model_digest, self.env(),
                                                                    model.index) if strict else None,
                                      protocol_name="strict" if strict else None, policy=self.policy,
                                      max_depth=model.max_depth, vocabularies=model.vocabularies,
                                      backend=None if strict else self.env().compute)
            self.run_id = f"model:{model.model_digest[:16] or 'saved'}"
            self._bind_ledger()
        missing = [n for n in self.party.feature_names if n not in batch.feature_names]
        if missing:
            raise ConfigError(f"{self.config.data}: the model uses column(s) {', '.join(map(repr, missing))}, "
                              "which this party's data no longer has")
        batch = batch.conform(self.party.feature_names, self.party.vocabularies, "the model")
        self.party.add_dataset(msg.dataset, batch.features, self._row_keys(batch))
        self.audit.write("predict", run_id=self.run_id, peer=self.peer, dataset=msg.dataset, rows=batch.n_rows)
        self.served["prediction_batches"] += 1
        self.served["prediction_rows"] += batch.n_rows
        return Ack()

    def close(self) -> None:
        self._close_run("party stopped")
        self.audit.close()
        if self.ledger is not None:
            self.ledger.close()


#: Protocols in which this passive party verifies the active enclave's quote with its
#: [attestation] policy; a party that requires hardware attestation serves no other.
HARDWARE_CHECKED = ("onetee",)


def serve_passive(config: PartyConfig, *, ready_file: Path | None = None) -> dict[str, Any]:
    """Serve until the active party sends ``Shutdown`` or this process gets SIGTERM or SIGINT
    (both stop it cleanly: the audit log is closed); returns what it served."""
    service = PassiveService(config)
    server = PartyServer(service.handle, name=config.name, listen=config.listen, tls=config.tls,
                         insecure=config.insecure, client_name=config.active_party,
                         max_message_bytes=config.max_message_bytes, on_undecodable=service.undecodable)
    service.server = server
    server.start()
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
    return {"party": config.name, "index": config.index, "address": address, **service.served,
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
