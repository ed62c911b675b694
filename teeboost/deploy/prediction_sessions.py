"""Which side of a passive party answers a request, and the bookkeeping of prediction sessions.

A passive party answers with one of two sides: the live training run's (its datasets train,
valid and test, and its enclaves), or, for a prediction session, the side of the saved model
whose digest the session named when it began (``PredictData``). Sessions never mix: each has
its own alignment and dataset, at most two saved models are held (the current one, and the one
before it while sessions that began with it are under way), and an enclave handshake or a
strict scoring session holds the party's enclave side until it ends while another waits
(``Busy``).

Apart from ``teeboost.deploy.passive`` (the service: set-up, training runs, refusals, the
server) because this is the one part of it that juggles several sessions at once.
``PredictionSessions`` is a mixin of ``PassiveService``, whose state it reads.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from ..errors import Busy, ConfigError, ProtocolError
from ..model_files import load_passive, passive_file
from ..parties.passive import PassiveParty
from teeboost.protocols.messages import Ack, RouteRequest
from teeboost.protocols.ntee.hosts import EnclaveFinish, EnclaveHello, SealedMessage
from teeboost.protocols.strict.hosts import StrictPredictPassive
from .messages import PredictData

if TYPE_CHECKING:
    from ..audit import AuditLog
    from ..budget import RowLedger, SealedLedgerFile
    from ..data import PartyData
    from ..policy import Policy
    from .config import PartyConfig

__all__ = ["PredictionSessions", "RUN_DATASETS", "RUN_ID_PATTERN", "SESSION_LEASE_SECONDS", "MAX_PREDICTION_SESSIONS"]

RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,80}$")  # a run id, or a prediction batch's name
RUN_DATASETS = ("train", "valid", "test")  # a training run's own rows, never a prediction batch's name
SESSION_LEASE_SECONDS = 30.0  # an enclave handshake or strict scoring session with no progress this long is let go
MAX_PREDICTION_SESSIONS = 32  # prediction datasets held at once (the oldest unused one is dropped)


class PredictionSessions:
    """Prediction sessions and enclave turns of a ``PassiveService``: which side answers a
    request, and the saved models' sides (predictors) held for the sessions under way."""

    # what it reads of the service, which also lends it env(), _budget(), _row_keys() and
    # _strict_session()
    config: PartyConfig
    policy: Policy
    audit: AuditLog
    ledger: RowLedger | None
    strict_ledger: SealedLedgerFile | None
    party: PassiveParty | None  # the live training run's side
    peer: str
    served: dict[str, Any]
    _aligned: OrderedDict[str, PartyData]  # PSI alignments by purpose, not yet taken by a run or batch
    _run_seen: float  # when the live run last had a request (monotonic)

    def _init_session_tables(self) -> None:
        # the saved model's side for prediction sessions, by model digest: the current saved model,
        # and the one before it while sessions that began with it are still under way
        self._predictors: OrderedDict[str, PassiveParty] = OrderedDict()
        self._sessions: OrderedDict[str, str] = OrderedDict()  # prediction dataset -> model digest
        self._handshake: tuple[str, float] | None = None  # (target, since): an enclave handshake under way
        self._scoring: tuple[str, str, float] | None = None  # (target, session run id, since): strict scoring

    # -- which side answers: the live run's, or the saved model's

    def _dispatch(self, msg: Any) -> Any:
        """Run datasets (train, valid, test) and the run's enclaves belong to the live run;
        prediction sessions to the saved model. Enclave handshakes and strict scoring sessions
        take turns (``Busy``): they share the enclave side of a party."""
        now = time.monotonic()
        if isinstance(msg, EnclaveHello):
            target = self._hello_target(msg.run_id)
            self._take_turn(target, msg.run_id, now)
            self._handshake = (target, now)
            try:
                return self._side(target).handle(msg)
            except BaseException:
                self._end_turn()
                raise
        if isinstance(msg, EnclaveFinish):
            if self._handshake is None:
                raise ProtocolError("enclave handshake finished before it started")
            target = self._handshake[0]
            self._handshake = None
            try:
                return self._side(target).handle(msg)
            except BaseException:
                self._scoring = None
                raise
        if isinstance(msg, SealedMessage) and msg.kind.startswith("predict:"):
            dataset = msg.kind.partition(":")[2]
            target = "run" if dataset in RUN_DATASETS else dataset
            if self._scoring is None or self._scoring[0] != target:
                raise ProtocolError("a strict scoring record outside its session")
            try:
                return self._side(target).handle(msg)
            finally:
                self._scoring = None
                self._end_session(dataset)  # one scoring per batch
        if isinstance(msg, RouteRequest):
            return self._side("run" if msg.dataset in RUN_DATASETS else msg.dataset).handle(msg)
        return self._side("run").handle(msg)

    def _hello_target(self, run_id: str) -> str:
        """A strict scoring session's run id is ``predict.<dataset>.<token>``; a run's is its own."""
        if not run_id.startswith("predict."):
            return "run"
        dataset = run_id[len("predict."):].rpartition(".")[0]
        return "run" if dataset in RUN_DATASETS else dataset

    def _take_turn(self, target: str, run_id: str, now: float) -> None:
        busy = self._handshake or self._scoring
        if busy is not None and now - busy[-1] < SESSION_LEASE_SECONDS:
            raise Busy(f"party {self.config.name!r} is in another enclave session; ask again shortly")
        self._handshake = None
        self._scoring = (target, run_id, now) if run_id.startswith("predict.") else None

    def _end_turn(self) -> None:
        self._handshake = None
        self._scoring = None

    def _side(self, target: str) -> PassiveParty:
        """``target``: "run", or the dataset of a prediction session."""
        if target == "run":
            if self.party is None:
                raise ProtocolError(f"party {self.config.name!r} has no training run set up")
            self._run_seen = time.monotonic()
            return self.party
        predictor = self._predictors.get(self._sessions.get(target, ""))
        if predictor is None:
            raise ProtocolError(f"party {self.config.name!r} has no dataset {target[:80]!r} (align a batch and send "
                                "PredictData first)")
        return predictor

    def _end_session(self, dataset: str) -> None:
        digest = self._sessions.pop(dataset, None)
        predictor = self._predictors.get(digest or "")
        if predictor is not None:
            predictor.keep_datasets([d for d, g in self._sessions.items() if g == digest])
        self._retire_predictors()

    # -- the saved models' sides (predictors), by model digest

    def _predictor_for(self, digest: str) -> PassiveParty:
        """The saved model's side, if its digest is the one the active party predicts with."""
        path = self.config.model_dir / passive_file(self.config.index)
        model = load_passive(path)
        if not model.model_digest:
            raise ProtocolError(f"party {self.config.name!r}'s saved model carries no model digest (saved by an older "
                                "teeboost): train it again")
        if digest != model.model_digest:
            raise ProtocolError(f"the active party predicts with model {digest[:16]!r}; party "
                                f"{self.config.name!r} serves only its saved model {model.model_digest[:16]!r}")
        predictor = self._predictors.get(model.model_digest)
        if predictor is not None:
            return predictor
        strict = model.protocol == "strict"  # routing only between enclaves
        predictor = PassiveParty(model.index, model.name, model.feature_names, model.owner,
                                 protocol=StrictPredictPassive(model.owner, model.model_digest, self.env(),
                                                               model.index, sealed=model.sealed_records)
                                 if strict else None,
                                 protocol_name="strict" if strict else None, policy=self.policy,
                                 max_depth=model.max_depth, vocabularies=model.vocabularies,
                                 backend=None if strict else self.env().compute)
        if self.ledger is not None:
            predictor.bind_ledger(self.ledger, self.strict_ledger, self._strict_session)
        self._predictors[model.model_digest] = predictor
        self._retire_predictors(current=model.model_digest)
        return predictor

    def _retire_predictors(self, current: str | None = None) -> None:
        """Models no session uses any more go, but for the newest; at most two are held."""
        in_use = set(self._sessions.values())
        newest = current or next(reversed(self._predictors), None)
        for digest in list(self._predictors):
            if digest != newest and (digest not in in_use or len(self._predictors) > 2):
                self._drop_predictor(digest, "no session uses this model any more")
        for dataset, digest in list(self._sessions.items()):
            if digest not in self._predictors:  # its model went: the session is refused by name
                self._sessions.pop(dataset)

    def _close_predictors(self, why: str) -> None:
        for digest in list(self._predictors):
            self._drop_predictor(digest, why)
        self._sessions.clear()

    def _drop_predictor(self, digest: str, why: str) -> None:
        predictor = self._predictors.pop(digest, None)
        if predictor is None:
            return
        self.audit.write("prediction queries", model=digest[:16], queries=dict(predictor.queries), note=why)
        predictor.close()

    # -- a prediction session begins: its PSI-aligned batch, bound to the saved model it names

    def _predict_data(self, msg: PredictData) -> Ack:
        if msg.dataset in RUN_DATASETS or not RUN_ID_PATTERN.fullmatch(msg.dataset):
            # a batch under a run's dataset name would be routed as that dataset (red-team finding:
            # "train" was exempt from the leakage budget)
            raise ProtocolError(f"a prediction batch cannot be called {msg.dataset[:40]!r} (1-80 letters, digits, "
                                f"'.', '_' or '-', and none of {', '.join(RUN_DATASETS)})")
        batch = self._aligned.pop(msg.dataset, None)
        if batch is None:
            raise ProtocolError(f"prediction batch {msg.dataset[:80]!r} must be aligned by PSI (purpose "
                                f"{msg.dataset[:80]!r}) first")
        self._budget("max_prediction_rows_per_day", batch.n_rows)
        if msg.dataset in self._sessions:  # a session's dataset is never replaced while it is in use
            if msg.dataset != "predict":  # the one-process name, which one operator reuses batch after batch
                raise ProtocolError(f"prediction session {msg.dataset[:80]!r} is already under way")
            self._end_session(msg.dataset)
        predictor = self._predictor_for(msg.model_digest)
        self._sessions[msg.dataset] = msg.model_digest
        while len(self._sessions) > MAX_PREDICTION_SESSIONS:  # the oldest session goes (refused by name)
            self._end_session(next(iter(self._sessions)))
        missing = [n for n in predictor.feature_names if n not in batch.feature_names]
        if missing:
            raise ConfigError(f"{self.config.data}: the model uses column(s) {', '.join(map(repr, missing))}, "
                              "which this party's data no longer has")
        batch = batch.conform(predictor.feature_names, predictor.vocabularies, "the model")
        predictor.add_dataset(msg.dataset, batch.features, self._row_keys(batch))
        self.audit.write("predict", run_id=f"model:{msg.model_digest[:16]}", peer=self.peer,
                         dataset=msg.dataset, rows=batch.n_rows)
        self.served["prediction_batches"] += 1
        self.served["prediction_rows"] += batch.n_rows
        return Ack()
