"""The active party as its own process: it drives the whole federation over gRPC.

``run_training``: connect to every passive party (mutual TLS), align ids by PSI, split the
shared rows into training and held-out rows, set every party up, train under the chosen
protocol (every party checkpointing after every round), score the held-out rows by federated
prediction, have every party save its own model file. If a passive party goes away it waits
for it to come back and resumes from the checkpoints; ``resume=True`` does the same after
the active party itself was restarted. ``run_prediction``: the same connections, then route new rows through the saved
model, each passive party answering only for its own splits.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..core.boosting import TreeProgress
from ..checkpoint import active_checkpoint_file, remove_checkpoint
from ..data import PartyData, read_csv, train_test_rows
from ..errors import DataError, PeerUnavailable
from ..federation import train_active
from ..labels import encode_with_classes
from ..metrics import evaluate
from ..model_files import load_active, save_models
from ..parties.active import FederatedOracle
from ..protocols.strict import strict_margin
from ..parties.psi import intersect_as_active
from ..transport.grpc_transport import GrpcChannel
from .config import PartyConfig, protocol_env
from .messages import Finish, PredictData, Setup, Shutdown

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


def run_training(config: PartyConfig, *, transcript: Path | None = None,
                 on_tree: Callable[[TreeProgress], None] | None = None, resume: bool = False) -> dict[str, Any]:
    data = PartyData.from_csv(config.data, id_column=config.id_column, label=config.label, name=config.name,
                              require_label=True)
    checkpoint = active_checkpoint_file(config.checkpoint_dir)
    recoveries = 0
    channel = connect(config)  # peers absent at the start: fail fast, nothing to recover
    try:
        while True:
            try:
                return _train_once(config, channel, data, transcript, on_tree, resume)
            except PeerUnavailable as exc:
                if recoveries >= config.max_recoveries or config.recover_timeout <= 0:
                    raise
                recoveries += 1
                resume = checkpoint.exists()
                print(f"teeboost: {exc}; waiting up to {config.recover_timeout:g} s for it, then "
                      f"{'resuming from the last checkpoint' if resume else 'starting over'} "
                      f"(recovery {recoveries} of {config.max_recoveries})", file=sys.stderr, flush=True)
                channel.close()
                channel = connect(config, config.recover_timeout)
    finally:
        channel.close()


def _train_once(config: PartyConfig, channel: GrpcChannel, data: PartyData, transcript: Path | None,
                on_tree: Callable[[TreeProgress], None] | None, resume: bool) -> dict[str, Any]:
    started = time.perf_counter()
    rows, sizes = intersect_as_active(channel, data.ids)
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
    setup = Setup(config.protocol, json.dumps(params.to_dict()), train, test, valid)
    channel.request_all({p: setup for p in channel.parties})
    names = {peer.index: peer.name for peer in config.peers}
    model, run = train_active(aligned.take(train), channel, params, config.protocol, env=protocol_env(config),
                              party_names=names,
                              validation=(aligned.take(valid), "valid") if valid.size else None,
                              transcript=transcript, on_tree=on_tree, checkpoint_dir=config.checkpoint_dir,
                              resume=resume)
    value = None
    if test.size:
        held_out = aligned.take(test)
        prediction = model.ensemble.loss.predict(_margin(config, channel, model, held_out.features, "test"))
        value = evaluate(model.ensemble.loss.metric, encode_with_classes(held_out, model.ensemble.classes),
                         prediction)
    model.id_column = config.id_column
    written = save_models(config.model_dir, model, [])
    channel.request_all({p: Finish(config.protocol) for p in channel.parties})
    remove_checkpoint(active_checkpoint_file(config.checkpoint_dir))
    traffic = channel.traffic.to_dict()
    return {
        "protocol": config.protocol, "objective": model.ensemble.objective, "n_samples": int(train.size),
        "n_test": int(test.size), "n_trees": len(model.ensemble.trees), "metric": model.ensemble.loss.metric,
        "value": value, "train_seconds": round(run.train_seconds, 4), "bytes_total": traffic["bytes_total"],
        "bytes": traffic["bytes"], "bytes_by_message": traffic["bytes_by_message"],
        "messages": traffic["messages"], "psi": psi, "phases": run.phases, "transport": "grpc",
        "tls": "INSECURE plaintext" if config.insecure else "mutual TLS",
        **({"enclaves": run.enclaves} if run.enclaves else {}),
        "model_files": [str(p) for p in written], "per_tree": run.to_dict()["per_tree"],
    }


def _margin(config: PartyConfig, channel: GrpcChannel, model, features: np.ndarray, dataset: str) -> np.ndarray:
    """Margins of rows whose passive columns the parties hold as ``dataset``: strict models
    route between enclaves (only margins reach this host), others by routing questions."""
    if model.protocol == "strict":
        return strict_margin(channel, protocol_env(config), model.ensemble, model.owner, features, dataset)
    oracle = FederatedOracle(channel, dataset, model.owner, features)
    return model.ensemble.margin(features.shape[0], oracle)


def run_prediction(config: PartyConfig, data_path: Path, output: Path) -> dict[str, Any]:
    model = load_active(config.model_dir / "active.json")
    frame = read_csv(data_path, id_column=config.id_column)
    if config.id_column not in frame.columns:
        raise DataError(f"{data_path}: id column {config.id_column!r} not found")
    columns = [config.id_column] + [c for c in model.feature_names]
    missing = [c for c in model.feature_names if c not in frame.columns]
    if missing:
        raise DataError(f"{data_path}: the active party's model needs column(s) {', '.join(map(repr, missing))}")
    data = PartyData.from_frame(frame[columns], id_column=config.id_column, name=config.name,
                                source=str(data_path), check_constant=False)
    ids = [str(i) for i in data.ids]
    if any("\n" in i for i in ids):
        raise DataError(f"{data_path}: ids may not contain line breaks")
    channel = connect(config)
    try:
        channel.request_all({p: PredictData("predict", "\n".join(ids).encode()) for p in channel.parties})
        margin = _margin(config, channel, model, data.features, "predict")
        prediction = model.ensemble.loss.predict(margin)
        traffic = channel.traffic.to_dict()
    finally:
        channel.close()
    out = pd.DataFrame({config.id_column: ids})
    ensemble = model.ensemble
    if ensemble.objective == "binary":
        out[f"probability_{ensemble.classes[1]}"] = prediction
    elif ensemble.objective == "multiclass":
        for k, label in enumerate(ensemble.classes):
            out[f"probability_{label}"] = prediction[:, k]
    else:
        out["prediction"] = prediction
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".partial")
    out.to_csv(tmp, index=False)
    tmp.replace(output)
    return {"rows": len(out), "output": str(output), "bytes_total": traffic["bytes_total"], "bytes": traffic["bytes"]}


def shutdown_peers(config: PartyConfig, reason: str = "the active party is done") -> None:
    channel = connect(config)
    try:
        channel.request_all({p: Shutdown(reason) for p in channel.parties})
    finally:
        channel.close()
