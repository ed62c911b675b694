"""The active party as its own process: it drives the whole federation over gRPC.

``run_training``: connect to every passive party (mutual TLS), align ids by PSI, split the
shared rows into training and held-out rows, set every party up, train under the chosen
protocol (every party checkpointing after every round), score the held-out rows by federated
prediction, have every party save its own model file. If a passive party goes away it waits
for it to come back and resumes from the checkpoints; ``resume=True`` does the same after
the active party itself was restarted. ``run_prediction``: the same connections, align the
batch's ids with every passive party by PSI, then route the shared rows through the saved
model, each passive party answering only for its own splits. Its own ``[policy]`` decides
which protocols it starts; its audit log records every run, peer and prediction batch.
"""

from __future__ import annotations

import json
import secrets
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..audit import AuditLog
from ..core.boosting import TreeProgress
from ..core.loss import make_objective
from ..checkpoint import active_checkpoint_file, remove_checkpoint
from ..data import PartyData
from ..data_sources import DataSource, read_party, read_source
from ..number_format import NumberFormat
from ..errors import DataError, PeerUnavailable, TeeboostError
from ..policy import SealedRefusal
from ..federation import train_active
from ..labels import encode_labels, encode_with_classes
from ..metrics import evaluate
from ..model_files import load_active, save_models
from ..parties.active import FederatedOracle, ensemble_digest
from teeboost.protocols.protection import protection_report
from teeboost.protocols.strict.hosts import strict_margin
from ..parties.psi import intersect_as_active
from ..row_matching import train_test_rows
from ..run_report import training_report
from ..transport.grpc_transport import GrpcChannel
from ..transport.tls import peer_certificate_fingerprint
from .config import PartyConfig, protocol_env
from .messages import Abandon, Finish, PredictData, Setup, Shutdown
from .protocol_check import check_peer_settings
from .tee_check import check_own_tee, check_peers, explain_attestation_failure, uses_enclaves

__all__ = ["run_training", "run_prediction", "shutdown_peers"]


def connect(config: PartyConfig, connect_timeout: float | None = None) -> GrpcChannel:
    channel = GrpcChannel(config.peers, sender=config.name, tls=config.tls, insecure=config.insecure,
                          timeout=config.timeout, max_message_bytes=config.max_message_bytes,
                          retries=config.retries)
    try:
        channel.wait_ready(config.connect_timeout if connect_timeout is None else connect_timeout)
    except BaseException:
        channel.close()
        raise
    return channel


def peer_fingerprints(config: PartyConfig) -> dict[str, str]:
    """Each passive party's certificate fingerprint, from a TLS handshake that checks it
    against the federation CA and the party's name, for the audit log."""
    if config.insecure:
        return {p.name: "no certificate (insecure)" for p in config.peers}
    out = {}
    for peer in config.peers:
        try:
            out[peer.name] = peer_certificate_fingerprint(peer.address, peer.name, config.tls,
                                                          timeout=config.connect_timeout)
        except (OSError, TeeboostError) as exc:
            out[peer.name] = f"unknown ({exc})"
    return out


def run_training(config: PartyConfig, *, transcript: Path | None = None,
                 on_tree: Callable[[TreeProgress], None] | None = None, resume: bool = False,
                 on_phase: Callable[[str], None] | None = None) -> dict[str, Any]:
    data = read_party(config.data, id_column=config.id_column, label=config.label, name=config.name,
                      require_label=True, weight_column=config.weight_column, number_format=config.number_format)
    # this party's own policy first: nothing is sent for a run it would not take part in
    config.policy.check_params(config.name, config.protocol, config.params, _outputs(data, config), serving=False,
                               config=str(config.path))
    check_tee(config, config.protocol)
    checkpoint = active_checkpoint_file(config.checkpoint_dir)
    recoveries = 0
    audit = AuditLog(config.audit_log, config.name)
    channel = connect(config)  # peers absent at the start: fail fast, nothing to recover
    run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(6)}"
    audit.write("run", run_id=run_id, protocol=config.protocol, params=config.params.to_dict(),
                peers={p.name: p.address for p in config.peers}, peer=peer_fingerprints(config), resume=resume,
                rows={"data": data.n_rows})
    done = False
    try:
        while True:
            try:
                result = _train_once(config, channel, data, transcript, on_tree, resume, run_id, audit, on_phase)
                audit.write("trained", run_id=run_id, n_trees=result["n_trees"], metric=result["metric"],
                            value=result["value"], bytes_total=result["bytes_total"],
                            messages=result["messages"])
                done = True
                return result
            except PeerUnavailable as exc:
                if recoveries >= config.max_recoveries or config.recover_timeout <= 0:
                    raise
                recoveries += 1
                resume = checkpoint.exists()
                print(f"teeboost: {exc}; waiting up to {config.recover_timeout:g} s for it, then "
                      f"{'resuming from the last checkpoint' if resume else 'starting over'} "
                      f"(recovery {recoveries} of {config.max_recoveries})", file=sys.stderr, flush=True)
                audit.write("recovery", run_id=run_id, detail=str(exc), attempt=recoveries)
                channel.close()
                channel = connect(config, config.recover_timeout)
            except TeeboostError as exc:
                audit.write("refused", run_id=run_id, rule=_rule_of(exc), detail=str(exc))
                explained = explain_attestation_failure(exc) if uses_enclaves(config.protocol) else None
                if explained is not None:
                    raise explained from exc
                raise
    finally:
        if not done:  # a run that will not finish is released at the passive parties (its checkpoints stay)
            _abandon(channel, run_id)
        channel.close()
        audit.close()


def _abandon(channel: GrpcChannel, run_id: str) -> None:
    """Best effort: a party that cannot be told lets the run go stale (or a --resume takes it over)."""
    try:
        channel.request_all({p: Abandon(run_id) for p in channel.parties})
    except Exception:  # noqa: BLE001 - the run's own error is the one to report
        pass


def check_tee(config: PartyConfig, protocol: str) -> None:
    """This party's own [tee] set-up, before anything is sent (TEE protocols only)."""
    if uses_enclaves(protocol):
        check_own_tee(protocol_env(config), party=config.name, config=config.path, index=0, protocol=protocol,
                      n_parties=len(config.peers) + 1)


def _rule_of(exc: Exception) -> str:
    """The policy rule a (possibly remote) refusal names, else the error's kind."""
    text = str(exc)
    marker = "by its policy ([policy] "
    if marker in text:
        return text.split(marker, 1)[1].split(")", 1)[0]
    return type(exc).__name__


def _outputs(data: PartyData, config: PartyConfig) -> int:
    _, classes, objective = encode_labels(data, config.params.objective, config.params.positive_class)
    return make_objective(objective, len(classes) if classes else 2).n_outputs


def _train_once(config: PartyConfig, channel: GrpcChannel, data: PartyData, transcript: Path | None,
                on_tree: Callable[[TreeProgress], None] | None, resume: bool, run_id: str,
                audit: AuditLog, on_phase: Callable[[str], None] | None = None) -> dict[str, Any]:
    # settings every party must share are compared before any id is exchanged
    check_peer_settings(channel, config.protocol, config.options, str(config.path))
    started = time.perf_counter()
    rows, sizes = intersect_as_active(channel, data.ids, f"train.{run_id}")  # this run's own alignment
    audit.write("aligned", run_id=run_id, purpose="train", ids=data.n_rows, intersection=int(rows.size))
    psi = {"seconds": round(time.perf_counter() - started, 3), "active_ids": int(data.n_rows),
           "passive_ids": {str(k): v for k, v in sizes.items()}, "intersection": int(rows.size),
           "bytes": channel.traffic.total}
    if rows.size < 2:
        raise DataError(f"{config.data}: the parties share {rows.size} id(s) in column {config.id_column!r}; ids "
                        "are compared as text, so '7', '007' and '7.0' differ: write ids the same way everywhere")
    aligned = data.take(rows)
    params = config.params
    train, test = train_test_rows(aligned.n_rows, config.test_size, params.random_state)
    valid = np.empty(0, dtype=np.int64)
    if params.early_stopping_rounds is not None:
        fit, held = train_test_rows(train.size, 0.2, params.random_state + 1)
        train, valid = train[fit], train[held]
    setup = Setup(run_id, config.protocol, json.dumps(params.to_dict()), _outputs(aligned, config), train, test,
                  valid, resume)
    channel.request_all({p: setup for p in channel.parties})
    env = protocol_env(config)
    if uses_enclaves(config.protocol):  # set-up mistakes are named before any enclave starts
        check_peers(channel, env, party=config.name, protocol=config.protocol)
    names = {peer.index: peer.name for peer in config.peers}
    model, run = train_active(aligned.take(train), channel, params, config.protocol, env=env,
                              party_names=names,
                              validation=(aligned.take(valid), "valid") if valid.size else None,
                              transcript=transcript, on_tree=on_tree, checkpoint_dir=config.checkpoint_dir,
                              resume=resume, on_phase=on_phase, policy=config.policy)
    value = None
    if test.size:
        held_out = aligned.take(test)
        features = held_out.conform(model.feature_names, model.vocabularies, "the model").features
        prediction = model.ensemble.loss.predict(_margin(config, channel, model, features, "test"))
        value = evaluate(model.ensemble.loss.metric, encode_with_classes(held_out, model.ensemble.classes),
                         prediction, huber_slope=params.huber_slope)
    model.id_column = config.id_column
    written = save_models(config.model_dir, model, [])
    channel.request_all({p: Finish(config.protocol) for p in channel.parties})
    remove_checkpoint(active_checkpoint_file(config.checkpoint_dir))
    traffic = channel.traffic.to_dict()
    return training_report({
        "protocol": config.protocol, "objective": model.ensemble.objective, "n_samples": int(train.size),
        "n_test": int(test.size), "n_trees": len(model.ensemble.trees), "metric": model.ensemble.loss.metric,
        "value": value, "train_seconds": round(run.train_seconds, 4), "bytes_total": traffic["bytes_total"],
        "bytes": traffic["bytes"], "bytes_by_message": traffic["bytes_by_message"],
        "messages": traffic["messages"], "round_trips": traffic["round_trips"],
        "round_trips_per_tree": run.round_trips_per_tree,
        # a passive party's column names stay with it
        "parties": {"active": list(model.feature_names), **{f"passive-{p.index}": None for p in config.peers}},
        "model_files": [str(p) for p in written], "transcript": None if transcript is None else str(transcript),
        "phases": run.phases, "per_tree": run.to_dict()["per_tree"],
        "psi": psi, "transport": "grpc", "tls": "INSECURE plaintext" if config.insecure else "mutual TLS",
    }, params=params, run=run, best_round=model.ensemble.best_round,
        protection=protection_report(config.protocol, config.options))

def _margin(config: PartyConfig, channel: GrpcChannel, model, features: np.ndarray, dataset: str) -> np.ndarray:
    """Margins of rows whose passive columns the parties hold as ``dataset``: strict models
    route between enclaves (only margins reach this host; a passive party in another enclave
    session is asked again until it is free), others by routing questions."""
    if model.protocol == "strict":
        return strict_margin(channel, protocol_env(config), model.ensemble, model.owner, features, dataset)
    oracle = FederatedOracle(channel, dataset, model.owner, features, backend=protocol_env(config).compute)
    return model.ensemble.margin(features.shape[0], oracle)


def run_prediction(config: PartyConfig, data_path: Path | str, output: Path, *, sep: str | None = None,
                   number_format: NumberFormat | None = None, unmatched=None) -> dict[str, Any]:
    """``data_path``: the active party's new rows, a file or a SQL source (docs/data.md);
    ``unmatched``: what rows a passive party does not hold get (``teeboost.cli.unmatched``;
    default: written with empty scores and a reason)."""
    model = load_active(config.model_dir / "active.json")
    data_path = DataSource.parse(data_path)  # shown in messages without any password
    frame = read_source(data_path, id_column=config.id_column, sep=sep, text_columns=list(model.vocabularies),
                        number_format=config.number_format if number_format is None else number_format)
    if config.id_column not in frame.columns:
        raise DataError(f"{data_path}: id column {config.id_column!r} not found")
    columns = [config.id_column] + [c for c in model.feature_names]
    missing = [c for c in model.feature_names if c not in frame.columns]
    if missing:
        raise DataError(f"{data_path}: the active party's model needs column(s) {', '.join(map(repr, missing))}")
    data = PartyData.from_frame(frame[columns], id_column=config.id_column, name=config.name,
                                source=str(data_path)).conform(model.feature_names, model.vocabularies,
                                                               "the active party's model")
    ids = [str(i) for i in data.ids]
    if len(set(ids)) != len(ids):
        raise DataError(f"{data_path}: id column {config.id_column!r} repeats ids; each row needs its own")
    if model.protocol == "strict":  # prediction runs between enclaves
        check_tee(config, "strict")
    audit = AuditLog(config.audit_log, config.name)
    channel = connect(config)
    session = f"predict.{secrets.token_hex(8)}"  # this prediction's own alignment and dataset at every party
    digest = ensemble_digest(model.ensemble)  # passive parties serve only the saved model of this digest
    try:
        shared, _ = intersect_as_active(channel, data.ids, session, allow_empty=True)
        audit.write("align", purpose="predict", ids=len(ids), intersection=int(shared.size),
                    peer=peer_fingerprints(config))
        ensemble = model.ensemble
        width = ensemble.n_outputs if ensemble.objective == "multiclass" else 1
        prediction = np.full((len(ids), width), np.nan)
        if shared.size:
            if model.protocol == "strict":
                check_peers(channel, protocol_env(config), party=config.name, protocol="strict")
            channel.request_all({p: PredictData(session, digest) for p in channel.parties})
            margin = _margin(config, channel, model, data.features[shared], session)
            prediction[shared] = np.asarray(ensemble.loss.predict(margin)).reshape(shared.size, width)
        traffic = channel.traffic.to_dict()
        audit.write("predict", rows=int(shared.size), unscored=len(ids) - int(shared.size),
                    bytes_total=traffic["bytes_total"])
    except TeeboostError as exc:
        audit.write("refused", rule=_rule_of(exc), detail=str(exc))
        if not isinstance(exc, SealedRefusal):  # after a sealed one every party's session is over,
            # as after an answer, and an Abandon would tell the passive host of the refusal
            _abandon(channel, session)  # its turn and its rows are released at once, not after a lease
        explained = explain_attestation_failure(exc) if model.protocol == "strict" else None
        if explained is not None:
            raise explained from exc
        raise
    except BaseException:
        _abandon(channel, session)
        raise
    finally:
        channel.close()
        audit.close()
    out = pd.DataFrame({config.id_column: ids})
    if ensemble.objective == "binary":
        out[f"probability_{ensemble.classes[1]}"] = prediction[:, 0]
        out["prediction"] = _labels(ensemble.classes, (prediction[:, 0] >= 0.5).astype(int), prediction[:, 0])
    elif ensemble.objective == "multiclass":
        for k, label in enumerate(ensemble.classes):
            out[f"probability_{label}"] = prediction[:, k]
        best = np.nan_to_num(prediction, nan=-1.0).argmax(axis=1)
        out["prediction"] = _labels(ensemble.classes, best, prediction[:, 0])
    else:
        out["prediction"] = prediction[:, 0]
    unscored = len(ids) - int(shared.size)
    from ..serving.unmatched_rows import UnmatchedPolicy, write_unmatched

    policy = unmatched or UnmatchedPolicy("empty")
    held = np.zeros(len(ids), dtype=bool)
    held[shared] = True
    reasons = [None if h else "not held by every passive party (private set intersection)" for h in held]
    out = write_unmatched(out, reasons, data, policy, SimpleNamespace(
        label=f"model@{digest[:16]}", objective=ensemble.objective, classes=ensemble.classes),
        config.options.allow_simulated_tee)
    if unscored and policy.how == "empty":
        print(f"teeboost: {unscored} of {len(ids)} row(s) of {data_path} are not held by every party and were "
              "left unscored (empty cells; see the reason column)", file=sys.stderr)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".partial")
    out.to_csv(tmp, index=False)
    tmp.replace(output)
    fallen = int((out["scored_by"].astype(str).str.startswith("fallback@")).sum()) if "scored_by" in out else 0
    return {"rows": len(out), "scored": int(shared.size), "unscored": unscored - fallen, "fallback": fallen,
            "output": str(output),
            "bytes_total": traffic["bytes_total"], "bytes": traffic["bytes"], "round_trips": traffic["round_trips"]}


def _labels(classes: list, index: np.ndarray, probability: np.ndarray) -> list:
    """Predicted class labels; empty where the row could not be scored."""
    return [None if np.isnan(p) else classes[i] for i, p in zip(index, probability)]


def shutdown_peers(config: PartyConfig, reason: str = "the active party is done") -> None:
    channel = connect(config)
    try:
        channel.request_all({p: Shutdown(reason) for p in channel.parties})
    finally:
        channel.close()
