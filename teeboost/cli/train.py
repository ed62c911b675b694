"""``teeboost train`` and ``teeboost predict``: every party in this process, or (predict
``--config``) the active party with its peers online."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import DataError
from .common import DEFAULT_MODEL_DIR, _print_report, _Progress
from .options import _add_compute_options, _add_training_options, _compute, _load_parties, _options, _params



def add_train(sub) -> None:
    train = sub.add_parser("train", help="train a model across parties (all in this process)")
    _add_training_options(train)
    _add_compute_options(train)
    train.set_defaults(func=_cmd_train)


def add_predict(sub) -> None:
    predict = sub.add_parser("predict", help="predict with a saved model (one prediction per input row)")
    predict.add_argument("--model-dir", type=Path,
                         help=f"a locally trained model (all parties' files; default: {DEFAULT_MODEL_DIR}, where "
                              "train writes it)")
    predict.add_argument("--config", type=Path, help="the active party's config: predict with parties online")
    predict.add_argument("--data", type=Path, required=True, help="CSV with every party's columns")
    predict.add_argument("--sep", help="column separator of the CSV (default: sniffed: comma, semicolon, tab or pipe)")
    predict.add_argument("--output", type=Path, required=True, help="CSV to write")
    predict.add_argument("--allow-simulated-tee", action="store_true",
                         help="strict models: route between simulated enclaves (no hardware protection)")
    predict.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    predict.set_defaults(func=_cmd_predict)


def _run_training(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    from ..checkpoint import remove_checkpoints
    from ..datasets import GIVE_ME_SOME_CREDIT_ID
    from ..estimator import party_features
    from ..federation import train_local
    from ..labels import encode_with_classes
    from ..metrics import evaluate
    from ..row_matching import match_rows, train_test_rows
    from ..training_columns import check_distinct_feature_names
    from teeboost.protocols.protection import protection_report
    from teeboost.protocols.registry import PROTOCOLS

    from ..run_report import training_report

    if args.protocol not in PROTOCOLS:
        raise DataError(
            f"protocol {args.protocol!r} is not implemented in this version of teeboost "
            f"(available: {', '.join(sorted(PROTOCOLS))})"
        )
    params = _params(args)
    options = _options(args)
    active, passives = _load_parties(args)
    active, passives_aligned = match_rows(active, passives, args.align)
    check_distinct_feature_names([active, *passives_aligned])
    train_rows, test_rows = train_test_rows(active.n_rows, args.test_size, params.random_state)
    validation = None
    if params.early_stopping_rounds is not None:
        fit_rows, valid_rows = train_test_rows(train_rows.size, args.validation_size, params.random_state + 1)
        valid_rows, train_rows = train_rows[valid_rows], train_rows[fit_rows]
        validation = (active.take(valid_rows), [p.take(valid_rows) for p in passives_aligned])
    n_outputs = 1
    if params.objective == "multiclass" or (params.objective is None and active.labels is not None
                                            and len(np.unique(active.labels)) > 2):
        n_outputs = len(np.unique(active.labels))
    progress = _Progress(params.n_trees * n_outputs, sys.stderr.isatty() and not args.json)
    checkpoints = args.checkpoint_dir or args.model_dir / "checkpoint"
    try:
        model, run = train_local(
            active.take(train_rows), [p.take(train_rows) for p in passives_aligned], params, args.protocol,
            validation=validation, transcript=args.transcript, on_tree=progress, options=options,
            checkpoint_dir=checkpoints, resume=args.resume, on_phase=progress.phase, compute=_compute(args),
        )
    finally:
        progress.close()
    objective = model.active.ensemble.objective
    metric = params.metrics_for(objective)[-1]  # the watched one: eval_metric's last, or the objective's default
    value = None
    if test_rows.size:
        test_active = active.take(test_rows)
        active_x, passive_x = party_features(model, test_active, [p.take(test_rows) for p in passives_aligned])
        y_test = encode_with_classes(test_active, model.active.ensemble.classes)
        value = evaluate(metric, y_test, model.predict(active_x, passive_x), test_active.weights)
    model.active.id_column = args.id_column or (GIVE_ME_SOME_CREDIT_ID if args.data is None and not args.active_data else None)
    written = model.save(args.model_dir)
    remove_checkpoints(checkpoints, len(model.passives))
    report = training_report({
        "protocol": args.protocol,
        "objective": objective,
        "n_samples": int(train_rows.size),
        "n_test": int(test_rows.size),
        "n_trees": model.n_trees,
        "metric": metric,
        "value": value,
        "train_seconds": round(run.train_seconds, 4),
        "bytes_total": run.traffic["bytes_total"],
        "bytes": run.traffic["bytes"],
        "bytes_by_message": run.traffic["bytes_by_message"],
        "messages": run.traffic["messages"],
        "parties": {"active": list(model.active.feature_names),
                    **{f"passive-{m.index}": list(m.feature_names) for m in model.passives}},
        "model_files": [str(p) for p in written],
        "transcript": str(args.transcript) if args.transcript else None,
        "phases": run.phases,
        "per_tree": run.to_dict()["per_tree"],
        "psi": None,  # rows are matched in this process (--align), no ids are exchanged
        "transport": "in-process",
        "tls": None,
    }, params=params, run=run, best_round=model.active.ensemble.best_round,
        protection=protection_report(args.protocol, options))
    return report


def _print_early_stopping(report: dict[str, Any]) -> None:
    if "stopped_early" not in report:
        return
    kept = "" if report["best_round"] is None else \
        f"; kept the {report['best_round'] + 1} rounds up to the best validation {report['metric']}"
    if report["stopped_early"]:
        print(f"early stopping  stopped after {report['rounds_run']} rounds: validation {report['metric']} "
              f"did not improve for {report['early_stopping_rounds']} rounds{kept}")
    else:
        print(f"early stopping  did not stop the run: all {report['rounds_run']} rounds ran{kept}")


def _cmd_train(args: argparse.Namespace) -> int:
    report = _run_training(args)
    if args.json:
        print(json.dumps(report))
    else:
        _print_report(report)
        _print_early_stopping(report)
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    if args.config is not None:
        from ..deploy.active import run_prediction
        from ..deploy.config import load_config

        summary = run_prediction(load_config(args.config), args.data, args.output, sep=args.sep)
        print(json.dumps(summary) if args.json else
              f"wrote {summary['rows']} predictions to {summary['output']} "
              f"({summary['bytes_total']:,} bytes of routing questions on the wire)")
        return 0
    if args.model_dir is None:
        args.model_dir = DEFAULT_MODEL_DIR
        if not args.model_dir.exists():
            raise DataError(f"no model in {args.model_dir}, where 'teeboost train' writes one by default: train "
                            "first, or give --model-dir (a local model) or --config (the active party's config, "
                            "parties online)")
    import numpy as np
    import pandas as pd

    from ..config import ProtocolOptions
    from ..data import PartyData, read_csv
    from ..estimator import party_features
    from ..federation import FederatedModel

    model = FederatedModel.load(args.model_dir, ProtocolOptions(allow_simulated_tee=args.allow_simulated_tee))
    id_column = model.active.id_column
    frame = read_csv(args.data, id_column=id_column, sep=args.sep, text_columns=[name for m in [model.active, *model.passives]
                                                                  for name in m.vocabularies])
    if id_column is not None and id_column not in frame.columns:
        id_column = None
    source = str(args.data)
    drop = [c for c in (model.active.label,) if c is not None and c in frame.columns]
    features = frame.drop(columns=drop)
    active = PartyData.from_frame(features[[c for c in features.columns if c in model.active.feature_names or c == id_column]],
                                  id_column=id_column, name="active", source=source)
    passives = [PartyData.from_frame(features[[c for c in features.columns if c in m.feature_names or c == id_column]],
                                     id_column=id_column, name=m.name, source=source)
                for m in model.passives]
    active_x, passive_x = party_features(model, active, passives)
    margin, traffic = model.predict_margin(active_x, passive_x)
    prediction = model.active.ensemble.loss.predict(margin)
    out = pd.DataFrame()
    if id_column is not None:
        out[id_column] = frame[id_column].astype(str)
    ensemble = model.active.ensemble
    if ensemble.objective == "binary":
        out[f"probability_{ensemble.classes[1]}"] = prediction
        out["prediction"] = np.where(prediction >= 0.5, ensemble.classes[1], ensemble.classes[0])
    elif ensemble.objective == "multiclass":
        for k, label in enumerate(ensemble.classes):
            out[f"probability_{label}"] = prediction[:, k]
        out["prediction"] = np.asarray(ensemble.classes, dtype=object)[np.argmax(prediction, axis=1)]
    else:
        out["prediction"] = prediction
    args.output.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.output.with_name(args.output.name + ".partial")
    out.to_csv(tmp, index=False)
    tmp.replace(args.output)
    summary = {"rows": len(out), "output": str(args.output), "bytes_total": traffic["bytes_total"]}
    print(json.dumps(summary) if args.json else
          f"wrote {len(out)} predictions to {args.output} ({traffic['bytes_total']:,} bytes of routing questions)")
    return 0
