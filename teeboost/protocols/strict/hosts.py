"""Strict mode: every party has an enclave and the active party learns nothing but the model.

Beyond N-TEE, the active party's labels and binned columns go into its enclave once, and the
enclave runs the whole boosting run (gradients, margins, node membership, leaf values, its
own party's candidates). Hosts relay sealed records whose number and sizes follow from
public parameters only (every tree runs ``max_depth`` levels; every level record covers
every position and every row); rows left out by subsampling and validation rows are routed
inside the enclaves along with the training rows. What comes out:

- the active host: progress per tree (its leaf count), sealed checkpoints, and at the end the
  model it is entitled to: tree shapes, which party owns each split and its record id, leaf
  values, and its own thresholds; no gains, no node sizes, no partition of any node;
- each passive host: nothing during training; at the end the model's digest, its tree count
  and its own split records *sealed* to its enclave (which of its columns won where says which
  way the labels lean); they open in the clear only on the label owner's signed consent
  (``strict/enclave/consent``, ``disclose_records``);
- prediction (``StrictPredictor``): margins of the rows asked for, routed between enclaves.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import secrets
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from teeboost.config import BoostParams
from teeboost.core.binning import FeatureBins
from teeboost.core.boosting import TreeProgress
from teeboost.core.model import Ensemble
from teeboost.core.split import SplitCriteria
from teeboost.core.tree import OwnerTable, SplitRecord
from teeboost.errors import ProtocolError
from teeboost.protocols.messages import Ack
from teeboost.policy import PolicyRefused, SealedRefusal
from teeboost.transport import serde
from teeboost.transport.serde import message
from teeboost.protocols.strict.enclave import messages as sm
from teeboost.protocols.strict.enclave import online_messages as om
from teeboost.protocols.enclave.messages import pack_records, unpack_records
from teeboost.protocols.env import ProtocolEnv, enclave_code
from teeboost.protocols.ntee.hosts import EnclaveFinish, EnclaveHello, NteePassive, SealedMessage, attest_enclaves

__all__ = ["StrictActive", "StrictPassive", "StrictPredictPassive", "StrictSetup", "StrictResult", "PROGRAM",
           "announce_validation", "strict_margin", "disclose_records"]

PROGRAM = "teeboost.protocols.strict.enclave.program"


@message
@dataclass(frozen=True)
class StrictSetup:
    """Active host -> passive host, before the enclave handshake: the validation dataset the
    run routes along with the training rows ("" for none) and its row count."""

    validation: str
    n_valid: int


@dataclass
class StrictResult:
    """What the active host receives at the end of a strict run."""

    ensemble: Ensemble
    owner: OwnerTable
    timer: dict[str, float]


def owner_from_bins(entries, bins: FeatureBins) -> OwnerTable:
    """(id, feature, bin, missing left, tree) entries -> an owner table of raw thresholds
    (or category code masks)."""
    table = OwnerTable()
    for record_id, feature, bin_, missing_left, tree in entries:
        table.insert(int(record_id), bins.record(int(feature), int(bin_), bool(missing_left), int(tree)))
    return table


def announce_validation(channel, dataset: str, n_valid: int) -> None:
    """Tell every passive host which of its datasets rides along (before the handshake, so
    its enclave is loaded with those rows too)."""
    for party, reply in channel.request_all({p: StrictSetup(dataset, n_valid) for p in channel.parties}).items():
        if not isinstance(reply, Ack):
            raise ProtocolError(f"party {party} did not accept the strict run's setup")


class StrictActive:
    """The active host: starts and attests its enclave, loads its data into it, then only
    relays records and keeps what the enclave publishes."""

    trains_in_enclave = True

    def constrain(self, by_party) -> None:
        """Nothing to keep: every strict enclave applies the run's constraints itself, as bound
        with the criteria (the host only checked that some party holds each named column)."""

    def __init__(self, channel, columns, criteria, passive_bins, passive_categorical, params,
                 env: ProtocolEnv) -> None:
        self.channel = channel
        self.columns = columns
        self.params = params
        self.timer: dict[str, float] = {}
        self.enclave = None
        self.max_passive_features = 0  # the label owner's cap; its enclave has every passive enclave count
        started = time.perf_counter()
        self.enclave = attest_enclaves(PROGRAM, "strict", channel, criteria, params.max_bin, env)
        self.timer["enclave setup"] = time.perf_counter() - started

    def fit(self, labels: np.ndarray, classes: list | None, objective: str, outputs: int, *,
            valid_binned: np.ndarray | None = None, valid_labels: np.ndarray | None = None,
            sealed_checkpoint: bytes | None = None,
            on_tree: Callable[[TreeProgress], None] | None = None,
            on_checkpoint: Callable[[bytes, int], None] | None = None,
            weights: np.ndarray | None = None, valid_weights: np.ndarray | None = None) -> StrictResult:
        """``weights``: sample weights of the training rows, sealed into the enclave with the
        labels (scaled gradients are all that leave it, sealed); ``valid_weights`` weight the
        validation metrics early stopping watches in there."""
        train = self.columns.binned_by_feature.astype(np.uint16)
        binned = train if valid_binned is None else np.concatenate([train, valid_binned.astype(np.uint16)], axis=1)
        n_valid = 0 if valid_binned is None else valid_binned.shape[1]
        self.enclave.ecall("load", serde.encode(sm.StrictActiveLoad(
            json.dumps(self.params.to_dict()), objective, json.dumps(classes), labels.size, n_valid, outputs,
            labels.astype(np.float64), (valid_labels if valid_labels is not None else np.empty(0)).astype(np.float64),
            self.columns.bins.n_value_bins.astype(np.int64), self.columns.bins.categorical_mask, binned,
            np.ones(labels.size) if weights is None else np.asarray(weights, dtype=np.float64),
            np.ones(n_valid) if valid_weights is None else np.asarray(valid_weights, dtype=np.float64),
            int(self.max_passive_features), json.dumps(self.columns.names))))
        if sealed_checkpoint is not None:
            self.enclave.ecall("restore", sealed_checkpoint)
        started = time.perf_counter()
        step = self._step(b"")
        pending = None
        while True:
            if step.kind == "send":
                if pending is not None:
                    raise ProtocolError("the enclave sent twice without collecting")
                records = unpack_records(step.records.tobytes())
                pending = (step.label, self.channel.submit_all(
                    {p: SealedMessage(step.tree, step.label, r) for p, r in records.items()}))
                step = self._step(b"")
            elif step.kind == "collect":
                if pending is None or pending[0] != step.label:
                    raise ProtocolError(f"the enclave collects {step.label!r} answers it never sent for")
                replies = pending[1].result()
                pending = None
                answers = {}
                for party, reply in replies.items():
                    if not isinstance(reply, SealedMessage) or reply.kind != step.label or reply.tree != step.tree:
                        raise ProtocolError(f"party {party} did not answer the {step.label!r} record")
                    answers[party] = reply.record
                step = self._step(serde.encode(sm.StrictReplies(np.frombuffer(pack_records(answers), np.uint8))))
            elif step.kind == "progress":
                if on_tree is not None:
                    on_tree(TreeProgress(**json.loads(step.info)))
                step = self._step(b"")
            elif step.kind == "checkpoint":
                if on_checkpoint is not None:
                    on_checkpoint(step.blob.tobytes(), int(json.loads(step.info)["n_trees"]))
                step = self._step(b"")
            elif step.kind == "done":
                break
            else:
                raise ProtocolError(f"unknown enclave step {step.kind!r}")
        if pending is not None:  # the finish records: passive enclaves release their parties' records
            for party, reply in pending[1].result().items():
                if not isinstance(reply, Ack):
                    raise ProtocolError(f"party {party} did not confirm the end of training")
        self.timer["training in enclaves"] = time.perf_counter() - started
        info = json.loads(step.info)
        for name, seconds in info.get("timer", {}).items():
            self.timer[f"active enclave: {name}"] = float(seconds)
        ensemble = Ensemble.from_dict(info["ensemble"])
        return StrictResult(ensemble, owner_from_bins(info["records"], self.columns.bins), self.timer)

    def _step(self, payload: bytes) -> sm.StrictStep:
        return sm.expect(self.enclave.ecall("train", payload), sm.StrictStep, "the enclave")

    def close(self) -> None:
        if self.enclave is not None:
            self.enclave.close()


class StrictPassive(NteePassive):
    """Passive host: loads its rows into its enclave, relays records, and keeps the split
    records its enclave releases at the end; then serves prediction sessions."""

    handles = (StrictSetup, EnclaveHello, EnclaveFinish, SealedMessage)
    protocol = "strict"
    program = PROGRAM

    def __init__(self, columns, params, env: ProtocolEnv, index: int) -> None:
        super().__init__(columns, params, env, index)
        self._datasets: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
        self._validation: np.ndarray | None = None
        self._restore: tuple[bytes, int] | None = None
        self._loaded = False
        self._predictor: StrictPredictPassive | None = None  # once training is over
        self._ledger = None  # the sealed row ledger's file, and who hears what each session cost
        self.model_digest = ""  # of the published model, from the enclave at the end
        self.sealed_records = b""  # this party's records, sealed by its enclave at the end
        self.n_trees = 0

    def add_dataset(self, name: str, raw: np.ndarray, row_keys: np.ndarray | None = None) -> None:
        self._datasets[name] = (raw, row_keys)
        if self._predictor is not None:
            self._predictor.add_dataset(name, raw, row_keys)

    def bind_ledger(self, ledger, on_session=None) -> None:
        self._ledger = (ledger, on_session)
        if self._predictor is not None:
            self._predictor.bind_ledger(ledger, on_session)

    def drop_dataset(self, name: str) -> None:
        self._datasets.pop(name, None)
        if self._predictor is not None:
            self._predictor.drop_dataset(name)

    def _setup(self, msg: StrictSetup) -> Ack:
        if not msg.validation:
            self._validation = None
            return Ack()
        raw = self._datasets.get(msg.validation, (None, None))[0]
        if raw is None or raw.shape[0] != msg.n_valid:
            held = "none" if raw is None else f"{raw.shape[0]} rows"
            raise ProtocolError(f"the run routes {msg.n_valid} rows of dataset {msg.validation!r}; "
                                f"party {self.index} holds {held}")
        self._validation = self.columns.bins.transform(raw)
        return Ack()

    def _load_columns(self) -> None:
        train = self.columns.binned_by_feature.astype(np.uint16)
        valid = self._validation
        binned = train if valid is None else np.concatenate([train, valid.T.astype(np.uint16)], axis=1)
        bins = self.columns.bins
        self.enclave.ecall("columns", serde.encode(sm.StrictPassiveLoad(
            self.columns.n_rows, 0 if valid is None else valid.shape[0],
            self._policy.max_trees or 0, self._policy.max_depth or 0,
            bins.n_value_bins.astype(np.int64), bins.categorical_mask, binned,
            np.concatenate([np.asarray(c, dtype=np.float64) for c in bins.cuts] or [np.empty(0)]),
            json.dumps(self.columns.names))))
        self._loaded = True
        if self._restore is not None:
            blob, n_trees = self._restore
            self.enclave.ecall("restore_passive", n_trees.to_bytes(8, "big") + blob)
            self._restore = None

    def handle(self, msg):
        if self._predictor is not None:  # after training: prediction sessions (e.g. held-out test rows)
            return self._predictor.handle(msg)
        if isinstance(msg, StrictSetup):
            return self._setup(msg)
        if isinstance(msg, SealedMessage):
            if msg.kind in ("level", "split"):
                return SealedMessage(msg.tree, msg.kind, self.enclave.ecall("record", msg.record))
            if msg.kind == "finish":
                finished = sm.expect(self.enclave.ecall("record", msg.record), sm.StrictFinished, "the enclave")
                self.model_digest = finished.model_digest.hex()
                self.sealed_records = finished.sealed.tobytes()
                self.n_trees = int(finished.n_trees)
                self.columns.owner.replace(OwnerTable())  # nothing in the clear: the records are sealed
                self.enclave.close()
                self._predictor = StrictPredictPassive(self.columns.owner, self.model_digest, self.env, self.index,
                                                       sealed=self.sealed_records)
                self._predictor.bind_policy(self._party, self._policy)
                if self._ledger is not None:
                    self._predictor.bind_ledger(*self._ledger)
                for name, (raw, keys) in self._datasets.items():
                    if name not in RUN_ROWS:  # the run's own rows are never scored: only charged batches
                        self._predictor.add_dataset(name, raw, keys)
                self._datasets.clear()
                return Ack()
            raise ProtocolError(f"unexpected sealed message kind {msg.kind!r}")
        return super().handle(msg)

    # -- checkpoints: the records stay sealed until training ends

    def sealed_state(self) -> bytes | None:
        return bytes(self.enclave.ecall("checkpoint", b"")) if self._loaded and self._predictor is None else None

    def restore_sealed_state(self, blob: bytes, n_trees: int) -> None:
        self._restore = (blob, n_trees)

    def close(self) -> None:
        super().close()
        if self._predictor is not None:
            self._predictor.close()


#: Datasets of a training run (its training and validation rows): routed inside the enclaves
#: while it trains, and never scored by the finished model.
RUN_ROWS = ("train", "valid")


class StrictPredictPassive(NteePassive):
    """Passive host at prediction: a fresh enclave per prediction session, which charges the
    session to its sealed row ledger, then evaluates all of this party's records on the rows
    asked for and seals the bits to the active enclave. Its host answers no routing question
    in the clear, and learns only what each session cost."""

    handles = (EnclaveHello, EnclaveFinish, SealedMessage)
    protocol = "strict"
    program = PROGRAM

    def __init__(self, owner: OwnerTable, model_digest: str, env: ProtocolEnv, index: int, *,
                 sealed: bytes = b"", enclave=None) -> None:
        """``sealed``: the records as the enclave sealed them at the end of training (its host
        never holds them); ``owner`` holds them instead only once disclosed, or when one
        operator runs every party in one process. ``enclave``: one launched ahead."""
        super().__init__(None, BoostParams(), env, index, enclave=enclave)  # default criteria: nothing is scored
        self.owner = owner
        self.sealed = sealed
        self.model_digest = bytes.fromhex(model_digest)  # its enclave answers only for this model
        self.datasets: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
        self._used = False
        self._ledger = None  # SealedLedgerFile: None counts nothing (one process, one operator)
        self._on_session = None

    scores = False  # a prediction session binds default criteria but scores nothing

    def bind_ledger(self, ledger, on_session=None) -> None:
        """Charge every session to the sealed row ledger kept in ``ledger`` (a
        ``SealedLedgerFile``); ``on_session`` hears what each one cost."""
        self._ledger, self._on_session = ledger, on_session

    def add_dataset(self, name: str, raw: np.ndarray, row_keys: np.ndarray | None = None) -> None:
        if self._ledger is not None and (row_keys is None or row_keys.shape[0] != raw.shape[0]):
            raise ProtocolError(f"dataset {name!r} needs one row key per row: this party counts bits per row")
        self.datasets[name] = (raw, row_keys)

    def drop_dataset(self, name: str) -> None:
        self.datasets.pop(name, None)

    def _load_columns(self) -> None:
        """Nothing to load: prediction evaluates records on raw rows."""

    def handle(self, msg):
        if isinstance(msg, EnclaveHello):
            if self._used:  # one enclave per session: an enclave is initialised once
                self.enclave.close()
                self.enclave = self.env.backend().load(enclave_code(self.program, self.env.trusted_roots,
                                                                    self.env.options), label=f"passive-{self.index}")
            self._used = True
            return super().handle(msg)
        if isinstance(msg, SealedMessage):
            if not msg.kind.startswith("predict:"):
                raise ProtocolError(f"unexpected sealed message kind {msg.kind!r} at prediction")
            name = msg.kind.partition(":")[2]
            raw, keys = self.datasets.pop(name, (None, None))  # one session per batch: margins of other own
            if raw is None:                                    # splits would be new answers about the same rows
                raise ProtocolError(f"party {self.index} has no dataset {name!r} (each batch is scored once)")
            return SealedMessage(-1, msg.kind, self._session(name, msg.record, raw, keys))
        return super().handle(msg)

    def _session(self, name: str, request: bytes, raw: np.ndarray, keys: np.ndarray | None) -> bytes:
        """The enclave charges the session, then seals the record bits; the host stores the
        new sealed ledger before anything leaves."""
        policy = self._policy
        counted = self._ledger is not None
        lock = self._ledger.locked() if counted else contextlib.nullcontext()
        with lock:
            blob, version = self._ledger.load() if counted else (b"", 0)
            online, online_version = self._ledger.load_online() if counted else (b"", 0)
            mine = sm.StrictRecordsIn(self.model_digest, np.frombuffer(self.sealed, dtype=np.uint8),
                                      *sm.record_arrays(OwnerTable() if self.sealed else self.owner),
                                      np.ascontiguousarray(raw, dtype=np.float64), policy.output_bits or 0,
                                      policy.max_outputs or 0, policy.max_bits_per_row_per_day or 0, time.time(),
                                      version, keys if counted else np.zeros((0, 16), np.uint8),
                                      np.frombuffer(blob, dtype=np.uint8), online_version,
                                      np.frombuffer(online, dtype=np.uint8))
            parts = unpack_records(self.enclave.ecall("predict_records", pack_records({0: request,
                                                                                       1: serde.encode(mine)})))
            summary = json.loads(parts[2])
            if summary["refused"]:
                raise PolicyRefused(self._party, summary["refused"], summary["detail"])
            if parts[1]:
                self._ledger.store(parts[1], int(summary["version"]))
        if self._on_session is not None:
            self._on_session(name, summary)
        return parts[0]



def strict_margin(channel, env: ProtocolEnv, ensemble: Ensemble, owner: OwnerTable, raw: np.ndarray,
                  dataset: str) -> np.ndarray:
    """Margins of ``raw``'s rows (the active party's columns; the passive parties hold the
    dataset of that name) computed in a fresh attested session of strict enclaves: passive
    record bits go sealed to the active enclave; only margins come out."""
    params = BoostParams()
    # the session's run id names the dataset, so a passive party knows which side serves it
    session = dataclasses.replace(env, run_id=f"predict.{dataset}.{secrets.token_hex(16)}")
    enclave = attest_enclaves(PROGRAM, "strict", channel, SplitCriteria.from_params(params), params.max_bin, session)
    try:
        raw = np.ascontiguousarray(raw, dtype=np.float64)
        requests = unpack_records(enclave.ecall("predict_begin", serde.encode(sm.StrictPredictIn(
            json.dumps(ensemble.to_dict()), raw.shape[0], *sm.record_arrays(owner), raw))))
        replies = channel.request_all({p: SealedMessage(-1, f"predict:{dataset}", r) for p, r in requests.items()})
        answers = {}
        for party, reply in replies.items():
            if not isinstance(reply, SealedMessage) or reply.kind != f"predict:{dataset}":
                raise ProtocolError(f"party {party} did not answer the prediction record")
            answers[party] = reply.record
        out = serde.decode(enclave.ecall("predict_finish", pack_records(answers)))
        if isinstance(out, om.StrictOnlineRefusal):  # sealed by its enclave: its host could not tell
            raise SealedRefusal(f"passive-{out.party}", out.rule, out.detail)
        if not isinstance(out, sm.StrictPredictions):
            raise ProtocolError(f"the enclave sent {type(out).__name__}, expected StrictPredictions")
        return out.margin
    finally:
        enclave.close()


def disclose_records(env: ProtocolEnv, sealed: bytes, model_digest: str, signature: bytes) -> OwnerTable:
    """A passive party's sealed records, opened by a fresh enclave of its own on the label
    owner's signed consent (``strict/enclave/consent``) -> its owner table, for export and importances."""
    enclave = env.backend().load(enclave_code(PROGRAM, env.trusted_roots, env.options), label="disclose")
    try:
        table = sm.expect(enclave.ecall("disclose", serde.encode(sm.StrictDisclose(
            bytes.fromhex(model_digest), signature, np.frombuffer(sealed, dtype=np.uint8)))), sm.StrictRecordTable,
            "the enclave")
    finally:
        enclave.close()
    owner = OwnerTable()
    for i, f, t, left, mask, tree in zip(table.ids, table.features, table.thresholds, table.missing_left,
                                         table.categories, table.trees):
        owner.insert(int(i), SplitRecord(int(f), float(t), bool(left), int(tree), int(mask)))
    return owner
