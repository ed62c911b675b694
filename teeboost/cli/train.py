"""``teeboost train`` and ``teeboost predict``: every party in this process, or (predict
``--config``) the active party with its peers online."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import DataError
from .common import _print_report, _Progress
from .options import _add_compute_options, _add_training_options, _compute, _load_parties, _options, _params



def add_train(sub) -> None:
    train = sub.add_parser("train", help="train a model across parties (all in this process)")
    _add_training_options(train)
    _add_compute_options(train)
    train.set_defaults(func=_cmd_train)


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
        value = evaluate(metric, y_test, model.predict(active_x, passive_x), test_active.weights,
                         huber_slope=params.huber_slope)
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
        "round_trips": run.traffic["round_trips"],
        "round_trips_per_tree": run.round_trips_per_tree,
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
