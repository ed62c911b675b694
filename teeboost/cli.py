"""``teeboost train | predict | demo``: the command-line face of the same Python API.

Output contract: human-readable lines by default; with ``--json`` exactly one JSON object
on stdout. Errors go to stderr with exit code 2 (bad input) or 1 (anything else), and a
run that fails writes no model and no transcript.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .checkpoint import remove_checkpoints
from .compute import ComputeOptions
from .config import METRICS, OBJECTIVE_ALIASES, OBJECTIVES, BoostParams, ProtocolOptions
from .core.boosting import TreeProgress
from .data import ALIGN_MODES, DataWarning, PartyData, check_distinct_feature_names, match_rows, read_csv, split_columns, train_test_rows
from .datasets import GIVE_ME_SOME_CREDIT_ID, GIVE_ME_SOME_CREDIT_LABEL, GIVE_ME_SOME_CREDIT_PASSIVE, bundled_path, load_give_me_some_credit
from .errors import ConfigError, DataError, TeeboostError
from .estimator import party_features
from .federation import FederatedModel, TrainingRun, train_local
from .labels import encode_with_classes
from .metrics import evaluate
from teeboost.protocols.protection import protection_report
from teeboost.protocols.registry import PROTOCOLS

__all__ = ["main"]

_CONTRACT_PROTOCOLS = ("plain", "secureboost", "ntee", "onetee", "strict")
DEFAULT_MODEL_DIR = Path("teeboost-model")  # train writes here and predict reads here unless told otherwise


def _version() -> str:
    """The installed distribution's version; the package's own when run from a source tree."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("teeboost")
    except PackageNotFoundError:
        from . import __version__

        return __version__


def _row_count(text: str) -> int:
    """A number of rows as people write it: 10000, 10_000, 1e4, 1.5e5 (but not 1.5)."""
    from decimal import Decimal, InvalidOperation

    try:
        value = Decimal(text.strip().replace("_", ""))
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of rows (write e.g. 10000, 10_000 or 1e4)") from None
    if not value.is_finite() or value != value.to_integral_value():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of rows")
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: need at least 1 row")
    return int(value)


class _DefaultsHelpFormatter(argparse.HelpFormatter):
    """Appends each option's default to its help, unless the help already names one or there
    is none worth showing (flags, options that are unset unless given)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if "default" in text or not action.option_strings or any(default is v for v in (None, False, argparse.SUPPRESS)):
            return text
        if isinstance(default, (list, tuple)):
            shown = " ".join(str(item) for item in default).replace("%", "%%")
            return f"{text} (default: {shown})"
        return f"{text} (default: %(default)s)"


def _add_training_options(parser: argparse.ArgumentParser) -> None:
    data = parser.add_argument_group("data (default: the bundled Give Me Some Credit sample and its default split)")
    data.add_argument("--data", type=Path, help="one CSV with every party's columns (a Give Me Some Credit file such as Kaggle's cs-training.csv needs nothing else)")
    data.add_argument("--label", help="label column (held by the active party)")
    data.add_argument("--weight-column", metavar="COLUMN",
                      help="column of per-row sample weights (held by the active party, not a feature); weights "
                           "scale the gradients before they are encrypted, masked or sealed")
    data.add_argument("--passive-columns", action="append", metavar="A,B,...",
                      help="columns of one passive party; repeat for more passive parties")
    data.add_argument("--active-data", type=Path, help="the active party's own CSV (with --passive-data)")
    data.add_argument("--passive-data", type=Path, action="append", metavar="FILE",
                      help="one passive party's CSV; repeat for more passive parties")
    data.add_argument("--id", dest="id_column", help="row id column present in every party's data")
    data.add_argument("--align", choices=ALIGN_MODES, default="auto",
                      help="how rows of the parties' files are matched: by id (the same ids everywhere), intersect "
                           "(the ids every party holds; the count is printed), position (row i is the same customer "
                           "in every file); auto: by id when there are id columns, intersecting when the id sets "
                           "differ, else by position unless two files share a column name")
    data.add_argument("--sep", help="column separator of the CSV files (default: sniffed from the first lines: "
                                    "comma, semicolon, tab or pipe)")
    data.add_argument("--categorical", action="append", metavar="A,B,...",
                      help="columns to treat as categories even though they hold numbers (e.g. codes); "
                           "text columns are categorical anyway")
    train = parser.add_argument_group("training")
    train.add_argument("--protocol", default="plain", choices=_CONTRACT_PROTOCOLS,
                       help="how the parties protect what they exchange: plain (not at all, the reference), "
                            "secureboost (homomorphic encryption), ntee, onetee, strict (enclaves)")
    train.add_argument("--objective", choices=(*OBJECTIVES, *OBJECTIVE_ALIASES), metavar="OBJECTIVE",
                       help="loss to fit: binary, multiclass, regression or poisson, or XGBoost's names "
                            "(binary:logistic, multi:softprob, reg:squarederror, count:poisson); "
                            "default: inferred from the label column")
    defaults = BoostParams()
    train.add_argument("--n-trees", "--n-estimators", dest="n_trees", type=int, default=defaults.n_trees,
                       help="boosting rounds (trees per class for multiclass)")
    train.add_argument("--max-depth", type=int, default=defaults.max_depth, help="deepest split level of a tree")
    train.add_argument("--learning-rate", "--eta", dest="learning_rate", type=float, default=defaults.learning_rate,
                       help="shrinkage applied to every leaf value")
    train.add_argument("--subsample", type=float, default=defaults.subsample,
                       help="share of training rows drawn for each round")
    train.add_argument("--reg-lambda", type=float, default=defaults.reg_lambda,
                       help="L2 regularisation of leaf values")
    train.add_argument("--min-child-weight", type=float, default=defaults.min_child_weight,
                       help="smallest hessian sum a child node may have")
    train.add_argument("--min-split-gain", "--gamma", dest="min_split_gain", type=float,
                       default=defaults.min_split_gain, help="smallest gain worth a split (XGBoost's gamma)")
    train.add_argument("--reg-alpha", type=float, default=defaults.reg_alpha, help="L1 regularisation of leaf values")
    train.add_argument("--max-delta-step", type=float, default=None,
                       help="cap on a leaf value's magnitude before the learning rate (0: none; default 0, "
                            "0.7 for poisson as in XGBoost)")
    train.add_argument("--colsample-bytree", type=float, default=defaults.colsample_bytree,
                       help="share of each party's columns a tree may split on (drawn per party and tree)")
    train.add_argument("--scale-pos-weight", type=float, default=defaults.scale_pos_weight,
                       help="weight of positive rows in binary classification (e.g. negatives / positives)")
    train.add_argument("--eval-metric", type=lambda text: tuple(m.strip() for m in text.split(",") if m.strip()),
                       default=None, metavar="M1,M2",
                       help=f"validation metrics per round ({', '.join(METRICS)}); early stopping watches the "
                            "last (default: auc, accuracy, rmse or poisson-nloglik by objective)")
    train.add_argument("--min-samples-leaf", type=int, default=defaults.min_samples_leaf,
                       help="fewest rows a leaf may hold")
    train.add_argument("--max-bin", type=int, default=defaults.max_bin,
                       help="histogram bins per feature (each party bins its own columns)")
    train.add_argument("--no-category-subsets", dest="category_subsets", action="store_false",
                       help="cut categorical columns only as 'the k most frequent categories vs the rest', never by "
                            "gradient-sorted subsets: a passive party's own split records then say no more about "
                            "the labels than a numeric threshold does (bound into the enclaves' attested criteria)")
    train.add_argument("--random-state", type=int, default=defaults.random_state,
                       help="seed of the train/test split and of subsampling")
    train.add_argument("--early-stopping-rounds", type=int, default=None,
                       help="stop when the validation metric has not improved for N rounds")
    train.add_argument("--validation-size", type=float, default=0.2,
                       help="share of training rows held for early stopping (with --early-stopping-rounds)")
    train.add_argument("--test-size", type=float, default=0.3, help="held-out share for the reported metric")
    secure = parser.add_argument_group("secure protocols")
    secure.add_argument("--scheme", choices=("paillier", "ou"), default="paillier",
                        help="additively homomorphic scheme for secureboost (ou: Okamoto-Uchiyama, faster)")
    secure.add_argument("--key-bits", type=int, default=2048, help="modulus size of the secureboost key")
    secure.add_argument("--insecure-key-bits", action="store_true",
                        help="allow keys below 2048 bits (tests and demos only: NOT secure)")
    secure.add_argument("--no-pack-gradients", action="store_true", help="encrypt g and h separately")
    secure.add_argument("--no-pack-bins", action="store_true", help="decrypt every bin sum separately")
    secure.add_argument("--crypto-workers", type=int, default=None,
                        help="processes for big-integer work (default: one per core)")
    length = secure.add_mutually_exclusive_group()
    length.add_argument("--short-randomizer", dest="short_randomizer", action="store_const", const=True,
                        default=None, help="random exponents of 2 x the key's security level (224 bits at 2048): "
                                           "4.5x fewer bits than n/2, generic attack still 2^112 (docs/secureboost.md); "
                                           "the default for --scheme ou")
    length.add_argument("--full-randomizer", dest="short_randomizer", action="store_const", const=False,
                        help="random exponents of n/2 bits (the default for --scheme paillier)")
    secure.add_argument("--no-precompute-randomizers", dest="precompute_randomizers", action="store_false",
                        help="do not compute the next tree's randomisers while passive parties work")
    secure.add_argument("--aes-bits", type=int, choices=(128, 256), default=128,
                        help="AES-GCM key size of the enclaves' attested channels (ntee, onetee)")
    secure.add_argument("--allow-simulated-tee", action="store_true",
                        help="ntee, onetee: accept the simulated enclave backend and its quotes (no hardware "
                             "isolation; the only backend on machines without SGX/TDX/SEV-SNP)")
    onetee_mode = secure.add_mutually_exclusive_group()
    onetee_mode.add_argument("--onetee-index-sets", dest="onetee_bins_once", action="store_false", default=True,
                             help="1-TEE: the seed paper's flow, passive parties sum one-time-pad-masked gradients "
                                  "and send index sets per node (slower; the default sends bins once, the same "
                                  "information, and the enclave sums)")
    onetee_mode.add_argument("--onetee-bins-once", dest="onetee_bins_once", action="store_true",
                             help="1-TEE: passive parties send their bin assignments to the enclave once "
                                  "(the default)")
    out = parser.add_argument_group("output")
    out.add_argument("--model-dir", type=Path, default=DEFAULT_MODEL_DIR,
                     help="where each party's model file is written (default: ./teeboost-model)")
    out.add_argument("--transcript", type=Path, help="record the active party's view of the run to this file")
    out.add_argument("--checkpoint-dir", type=Path,
                     help="where every party saves its state after every round (default: MODEL_DIR/checkpoint; "
                          "removed once the model is saved)")
    out.add_argument("--resume", action="store_true",
                     help="continue an interrupted run from its checkpoints (same data, parameters and protocol)")
    out.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")


def _add_compute_options(parser: argparse.ArgumentParser) -> None:
    compute = parser.add_argument_group("compute (where the parties' heavy loops run; docs/scaling.md)")
    compute.add_argument("--compute", choices=("local", "ray"), default="local",
                         help="local: this machine's processes (default); ray: a Ray cluster (pip install "
                              "'teeboost[ray]'). Every simulated party of this run uses it")
    compute.add_argument("--ray-address", default="local",
                         help="with --compute ray: 'auto' (the cluster of 'ray start'), 'ray://host:10001' "
                              "(Ray Client), or 'local' (a private instance on this machine, the default)")
    compute.add_argument("--compute-workers", type=int, default=None,
                         help="task processes (default: one per CPU of this machine or the Ray cluster)")


def _params(args: argparse.Namespace) -> BoostParams:
    return BoostParams(
        objective=args.objective, n_trees=args.n_trees, max_depth=args.max_depth,
        learning_rate=args.learning_rate, subsample=args.subsample, reg_lambda=args.reg_lambda,
        min_child_weight=args.min_child_weight, min_split_gain=args.min_split_gain,
        min_samples_leaf=args.min_samples_leaf, max_bin=args.max_bin, random_state=args.random_state,
        early_stopping_rounds=args.early_stopping_rounds, category_subsets=args.category_subsets,
        reg_alpha=args.reg_alpha, max_delta_step=args.max_delta_step, colsample_bytree=args.colsample_bytree,
        scale_pos_weight=args.scale_pos_weight, eval_metric=args.eval_metric,
    )


def _options(args: argparse.Namespace) -> ProtocolOptions:
    return ProtocolOptions(scheme=args.scheme, key_bits=args.key_bits, insecure_key_bits=args.insecure_key_bits,
                           pack_gradients=not args.no_pack_gradients, pack_bins=not args.no_pack_bins,
                           crypto_workers=args.crypto_workers, aes_bits=args.aes_bits,
                           short_randomizer=args.short_randomizer, precompute_randomizers=args.precompute_randomizers,
                           onetee_bins_once=args.onetee_bins_once, allow_simulated_tee=args.allow_simulated_tee)


def _compute(args: argparse.Namespace) -> ComputeOptions:
    if args.compute == "local" and args.ray_address != "local":
        raise ConfigError(f"--ray-address {args.ray_address} needs --compute ray")
    return ComputeOptions(backend=args.compute, address=args.ray_address, workers=args.compute_workers)


def _categorical_in(args: argparse.Namespace, frame: pd.DataFrame) -> list[str]:
    """The --categorical columns this file holds (each party's file holds some of them)."""
    return [c for c in _split_names(args.categorical) if c in frame.columns]


def _split_names(values: list[str] | None) -> list[str]:
    return [name.strip() for value in values or [] for name in value.split(",") if name.strip()]


def _load_parties(args: argparse.Namespace) -> tuple[PartyData, list[PartyData]]:
    if args.active_data or args.passive_data:
        if args.data or args.passive_columns:
            raise DataError("give either --data with --passive-columns, or --active-data with --passive-data")
        if not (args.active_data and args.passive_data and args.label):
            raise DataError("--active-data needs --label and at least one --passive-data")
        active_frame = read_csv(args.active_data, id_column=args.id_column, sep=args.sep)
        active = PartyData.from_frame(active_frame, id_column=args.id_column, label=args.label, name="active",
                                      source=str(args.active_data), require_label=True,
                                      categorical=_categorical_in(args, active_frame),
                                      weight_column=args.weight_column)
        passives = []
        for i, path in enumerate(args.passive_data, start=1):
            frame = read_csv(path, id_column=args.id_column, sep=args.sep)
            passives.append(PartyData.from_frame(frame, id_column=args.id_column, name=f"passive-{i}",
                                                 source=str(path), categorical=_categorical_in(args, frame)))
        return active, passives
    if args.data is None:
        if args.label or args.passive_columns:
            raise DataError("--label/--passive-columns need --data")
        frame = load_give_me_some_credit()
        return split_columns(frame, [GIVE_ME_SOME_CREDIT_PASSIVE], label=GIVE_ME_SOME_CREDIT_LABEL,
                             id_column=GIVE_ME_SOME_CREDIT_ID, source=str(bundled_path()),
                             weight_column=args.weight_column)
    if not args.passive_columns and args.label in (None, GIVE_ME_SOME_CREDIT_LABEL):
        # the full Kaggle cs-training.csv (or a sample of it): use the default split
        frame = load_give_me_some_credit(args.data)
        args.id_column = args.id_column or GIVE_ME_SOME_CREDIT_ID
        return split_columns(frame, [GIVE_ME_SOME_CREDIT_PASSIVE], label=GIVE_ME_SOME_CREDIT_LABEL,
                             id_column=args.id_column, source=str(args.data), weight_column=args.weight_column)
    if not args.label or not args.passive_columns:
        raise DataError("--data needs --label and at least one --passive-columns A,B,...")
    frame = read_csv(args.data, id_column=args.id_column, sep=args.sep)
    groups = [[c.strip() for c in spec.split(",") if c.strip()] for spec in args.passive_columns]
    return split_columns(frame, groups, label=args.label, id_column=args.id_column, source=str(args.data),
                         categorical=_categorical_in(args, frame), weight_column=args.weight_column)


class _Progress:
    """A progress bar per tree on a terminal; silent otherwise."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.bar = None
        if enabled:
            import shutil

            from tqdm import tqdm

            size = shutil.get_terminal_size((100, 20))  # some terminals report 0 columns and rows
            self.bar = tqdm(total=total, unit="tree", file=sys.stderr, desc="training", leave=False, ncols=size.columns,
                            nrows=size.lines, mininterval=0)  # redraw on every tree: trees are slow

    def __call__(self, item: TreeProgress) -> None:
        if self.bar is not None:
            postfix = {"leaves": item.n_leaves}
            if item.valid_metric is not None:
                postfix["valid"] = f"{item.valid_metric:.4f}"
            self.bar.set_postfix(postfix)
            self.bar.update(1)

    def phase(self, text: str) -> None:
        """A slow step within a tree (key generation, encryption) names itself, so the bar
        never sits silent for seconds."""
        if self.bar is not None:
            self.bar.set_description_str(f"training: {text}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _run_training(args: argparse.Namespace) -> dict[str, Any]:
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
    report = {
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
    }
    if run.enclaves:
        report["enclaves"] = run.enclaves
    if run.compute:
        report["compute"] = run.compute
    protection = protection_report(args.protocol, options)
    report["protection"] = protection["protection"]
    if protection["options"]:
        report["options"] = protection["options"]
    if params.early_stopping_rounds is not None:
        report.update(_early_stopping(params, run, model))
    return report


def _early_stopping(params: BoostParams, run: TrainingRun, model: FederatedModel) -> dict[str, Any]:
    """Whether early stopping ended the run before --n-trees rounds, and the best round (from
    0, as in the model file) the model was cut back to: fewer trees than asked for, unexplained,
    look like a bug."""
    rounds_run = 1 + max((t.round_index for t in run.trees), default=-1)
    best_round = model.active.ensemble.best_round
    return {"early_stopping_rounds": params.early_stopping_rounds, "stopped_early": rounds_run < params.n_trees,
            "rounds_run": rounds_run, "best_round": None if best_round is None else int(best_round)}


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


def _print_report(report: dict[str, Any]) -> None:
    value = "n/a (no held-out rows)" if report["value"] is None else f"{report['value']:.4f}"
    print(f"protocol        {report['protocol']}")
    if report.get("enclaves"):
        print(f"enclaves        {report['enclaves']}")
    if report.get("compute"):
        print(f"compute         {report['compute']}")
    print(f"objective       {report['objective']}  ({report['n_samples']} training rows, {report['n_test']} held out)")
    for name, columns in report.get("parties", {}).items():  # a deployed party knows only its own columns
        print(f"  {name:<13} {len(columns)} features: {', '.join(columns)}")
    print(f"trees           {report['n_trees']}")
    print(f"held-out {report['metric']:<6} {value}")
    print(f"train time      {report['train_seconds']:.3f} s")
    if report.get("phases"):
        print("  phases        " + ", ".join(f"{k} {v:.2f} s" for k, v in report["phases"].items()))
    print(f"bytes           {report['bytes_total']:,} total: "
          f"{report['bytes']['active_to_passive']:,} active->passive, "
          f"{report['bytes']['passive_to_active']:,} passive->active ({report['messages']} messages)")
    print(f"model files     {', '.join(report['model_files'])}")
    if report.get("transcript"):
        print(f"transcript      {report['transcript']}")
    if report.get("psi"):  # deployed runs: ids aligned by PSI over the network
        psi = report["psi"]
        print(f"PSI             {psi['intersection']} shared rows of {psi['active_ids']} active ids, "
              f"{psi['seconds']:.2f} s, {psi['bytes']:,} bytes")
    if report.get("transport"):
        print(f"transport       {report['transport'].replace('grpc', 'gRPC')}, {report['tls']}")


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
        from .deploy.active import run_prediction
        from .deploy.config import load_config

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


def _cmd_demo(args: argparse.Namespace) -> int:
    if not args.in_memory:
        from .deploy.demo import run_demo

        return run_demo(args.workdir, as_json=args.json)
    print("teeboost demo: Give Me Some Credit sample (bundled), one active and one passive party, "
          "in-memory federation", file=sys.stderr)
    demo_args = argparse.Namespace(**{**vars(_DEMO_DEFAULTS), "model_dir": args.model_dir, "json": args.json})
    started = time.perf_counter()
    reports = []
    for protocol in sorted(PROTOCOLS):
        demo_args.protocol = protocol
        demo_args.model_dir = args.model_dir / protocol
        reports.append(_run_training(demo_args))
    if args.json:
        print(json.dumps({"demo": reports, "seconds": round(time.perf_counter() - started, 3)}))
        return 0
    for report in reports:
        _print_report(report)
        print()
    print(f"{'protocol':<12} {report['metric']:>8} {'train s':>8} {'bytes':>12}")
    for report in reports:
        print(f"{report['protocol']:<12} {report['value']:>8.4f} {report['train_seconds']:>8.3f} {report['bytes_total']:>12,}")
    return 0


def _cmd_example_data(args: argparse.Namespace) -> int:
    from .deploy.example_data import write_example_data

    written = write_example_data(args.out, args.passive_parties, rows=args.rows, new_rows=args.new_rows,
                                 force=args.force)
    for name, path in written.items():
        frame = pd.read_csv(path)
        what = ("new rows for the active party to score (no label; every passive party holds them too)"
                if name == "new" else f"party {name!r}")
        print(f"wrote {path}: {what}, {len(frame):,} rows, columns {', '.join(frame.columns)}")
    return 0


def _cmd_certs_init_ca(args: argparse.Namespace) -> int:
    from .transport.tls import certificate_fingerprint, init_ca

    cert, key = init_ca(args.out, days=args.days, force=args.force)
    print(f"wrote {cert} (give it to every party) and {key} (mode 0600: keep it offline, with the CA operator)")
    print(f"CA fingerprint {certificate_fingerprint(cert.read_bytes())}")
    return 0


def _cmd_certs_request(args: argparse.Namespace) -> int:
    from .transport.tls import request_certificate

    key, csr, fingerprint = request_certificate(args.party, args.out, force=args.force)
    print(f"wrote {key} (mode 0600: this party's private key, never leaves this host) and {csr}")
    print(f"send {csr.name} to the CA operator, and confirm this public-key fingerprint with them over another "
          f"channel (phone, signed mail):\n  {fingerprint}")
    return 0


def _cmd_certs_sign(args: argparse.Namespace) -> int:
    from .transport.tls import sign_request

    party, key_fp, cert_fp, out = sign_request(args.ca, args.csr, args.out, days=args.days, dns=args.dns or [],
                                               ips=args.ip or [], force=args.force)
    print(f"signed a certificate for party {party!r}: {out}")
    print(f"  public key  {key_fp}   (must match what the party printed)")
    print(f"  certificate {cert_fp}")
    return 0


def _cmd_certs_demo(args: argparse.Namespace) -> int:
    from .transport.tls import create_federation_certs

    parties = [p.strip() for p in args.parties.split(",") if p.strip()]
    files = create_federation_certs(args.out, parties, days=args.days, force=args.force)
    print(f"LOCAL DEMO ONLY: {args.out} holds every party's private key, so whoever has it can pose as any "
          "party; a real federation uses 'certs init-ca', 'certs request' and 'certs sign'", file=sys.stderr)
    print(f"wrote {args.out / 'ca.pem'}, {args.out / 'ca.key'} and, per party, "
          + ", ".join(f"{f.cert.name}/{f.key.name}" for f in files.values()))
    return 0


def _cmd_audit_show(args: argparse.Namespace) -> int:
    from .audit import read_audit, read_counters, summarise

    path = args.log
    if path is None:
        if args.config is None:
            raise ConfigError("give the audit log (--log FILE) or the party's config (--config party.toml)")
        from .deploy.config import load_config

        path = load_config(args.config).audit_log
    if not path.exists():
        raise ConfigError(f"{path}: no audit log here (a party writes it once it starts)")
    entries = read_audit(path)
    if args.json:
        print(json.dumps(entries))
    else:
        from .budget import RowLedger, ledger_path

        routing = None
        if ledger_path(path).exists():  # the row ledger beside the log: bits per row of routing answers
            ledger = RowLedger(ledger_path(path), entries[-1].get("party", "?") if entries else "?")
            routing = ledger.day()
            ledger.close()
        # the last 24 h as the party counts them (beside the log: rotated or not, its budgets are there)
        print(summarise(entries, routing=routing, usage=read_counters(path)))
    return 0


def _cmd_tee_identity(args: argparse.Namespace) -> int:
    from .tee.identity import PartyIdentity

    if args.out.exists() or args.out.is_symlink():
        raise ConfigError(f"{args.out} already exists; an identity key is never replaced (`teeboost tee public-key "
                          f"{args.out}` prints its public key; delete it first only if you really mean to re-key "
                          "this party, then update every party's [tee] identities)")
    identity = PartyIdentity.generate()
    identity.save(args.out)
    print(identity.public_key.hex())
    return 0


def _cmd_consent(args: argparse.Namespace) -> int:
    from .deploy.disclosure import consent

    signed = consent(args.config, args.party, args.out)
    print(json.dumps({"consent": str(args.out), "party": signed.party_name, "model_digest": signed.model_digest})
          if args.json else
          f"wrote your consent that party {signed.party_name} may see its own split records of model "
          f"{signed.model_digest[:16]} to {args.out}: they say which way your labels lean at its splits; hand it over "
          "only if you accept that (audited)")
    return 0


def _cmd_disclose(args: argparse.Namespace) -> int:
    from .deploy.disclosure import disclose

    model = disclose(args.config, args.consent)
    print(json.dumps({"party": model.name, "records": len(model.owner), "model_digest": model.model_digest})
          if args.json else
          f"party {model.name}'s enclave opened its {len(model.owner)} sealed split records of model "
          f"{model.model_digest[:16]} on the label owner's consent; they are now in its model file "
          "(`teeboost export` and `teeboost importance` can use them; audited)")
    return 0


def _cmd_attestation_verify(args: argparse.Namespace) -> int:
    import tomllib

    from .tee.dcap import DcapPolicy, DcapQuoteVerifier, Refused, load_collateral

    table: dict = {}
    if args.policy is not None:
        try:
            table = dict(tomllib.loads(args.policy.read_text(encoding="utf-8")).get("attestation", {}))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{args.policy}: cannot read the policy: {exc}") from None
    if args.accept_status:
        table["accept_status"] = sorted(set(table.get("accept_status", ["UpToDate"])) | set(args.accept_status))
    if args.accept_advisory:
        table["accept_advisories"] = list(table.get("accept_advisories", [])) + args.accept_advisory
    table["mrenclave"] = list(table.get("mrenclave", [])) + (args.mrenclave or [])
    signers = list(table.get("mrsigner", []))
    for text in args.mrsigner or []:
        parts = text.split(":")
        if len(parts) != 3:
            raise ConfigError(f"--mrsigner {text!r} must be HEX:PRODID:MINSVN")
        signers.append({"mrsigner": parts[0], "isv_prod_id": int(parts[1]), "min_isv_svn": int(parts[2])})
    table["mrsigner"] = signers
    rtmrs = {}
    for text in args.rtmr or []:
        index, sep, value = text.partition("=")
        if not sep or index not in ("0", "1", "2", "3"):
            raise ConfigError(f"--rtmr {text!r} must be N=HEX with N from 0 to 3")
        rtmrs[f"rtmr{index}"] = value
    table["tdx"] = list(table.get("tdx", [])) + [
        {"mrtd": m, **rtmrs, **({"allow_unpinned_rtmrs": True} if args.allow_unpinned_rtmrs else {})}
        for m in args.mrtd or []]
    policy = DcapPolicy.from_config(table)
    expected = None
    if args.report_data is not None:
        try:
            expected = bytes.fromhex(args.report_data)
        except ValueError:
            raise ConfigError(f"--report-data {args.report_data!r} must be hex") from None
        if len(expected) != 64:
            raise ConfigError(f"--report-data must be exactly 64 bytes (128 hex digits), not {len(expected)}")
    try:
        quote = args.quote.read_bytes()
    except OSError as exc:
        raise DataError(f"{args.quote}: cannot read the quote: {exc.strerror}") from None
    collateral = load_collateral(args.collateral) if args.collateral is not None else None
    verifier = DcapQuoteVerifier(policy, collateral, pccs_url=args.pccs_url)
    try:
        result = verifier.inspect(quote, now=args.now, expected_report_data=expected)
    except Refused as refusal:
        seen = refusal.result.to_json() if refusal.result is not None else {}
        if args.json:
            print(json.dumps({"verified": False, "reason": refusal.reason, "detail": refusal.detail, **seen}))
        else:
            print(f"REFUSED ({refusal.reason}): {refusal.detail}")
            for key, value in seen.items():
                print(f"  {key:<18} {value}")
        return 1
    if args.json:
        print(json.dumps({"verified": True, **result.to_json()}))
        return 0
    print(f"verified: {result.tee.upper()} quote, TCB status {result.status}"
          + (f" (accepted advisories: {', '.join(result.advisories)})" if result.advisories else ""))
    for key, value in result.measurements.items():
        print(f"  {key:<12} {value}")
    print(f"  report data  {result.report_data.hex()}")
    print(f"  collateral   valid {result.collateral_window[0]} .. {result.collateral_window[1]}")
    return 0


def _cmd_tee_platform(args: argparse.Namespace) -> int:
    from .tee.simulated import SimulatedPlatform

    existed = args.out.exists()
    print(SimulatedPlatform.load_or_create(args.out).attestation_root.hex())
    print(f"{args.out}: {'an existing' if existed else 'a new'} simulated platform (keep it on this host); the "
          "key printed is its public key, for every party's [tee] trusted_roots", file=sys.stderr)
    return 0


def _cmd_tee_public_key(args: argparse.Namespace) -> int:
    from .tee.key_files import public_key_of

    kind, key = public_key_of(args.file)
    print(key.hex())
    where = "trusted_roots" if kind == "platform" else "identities (at this party's index)"
    print(f"{args.file}: a {kind} file; the key printed is its public key, for every party's [tee] {where}",
          file=sys.stderr)
    return 0


def _cmd_party(args: argparse.Namespace) -> int:
    import dataclasses

    from .deploy.config import load_config

    config = load_config(args.config)
    if args.allow_simulated_tee:
        config.options = dataclasses.replace(config.options, allow_simulated_tee=True)
    if config.role == "passive":
        from .deploy.passive import serve_passive

        served = serve_passive(config, ready_file=args.ready_file)
        print(json.dumps(served) if args.json else _passive_summary(served, args.config))
        return 0
    from .deploy.active import run_training, shutdown_peers

    if args.protocol:
        config.protocol = args.protocol
    progress = _Progress(config.params.n_trees, sys.stderr.isatty() and not args.json)
    try:
        report = run_training(config, transcript=args.transcript, on_tree=progress, resume=args.resume,
                              on_phase=progress.phase)
    finally:
        progress.close()
    if args.shutdown_peers:
        shutdown_peers(config)
    if args.json:
        print(json.dumps(report))
    else:
        _print_report(report)
        print(f"audit log       {config.audit_log}")
    return 0


def _passive_summary(served: dict[str, Any], config: Path) -> str:
    """What a passive party served, printed when it stops."""
    runs = f"{served['runs']} trained" + (f" ({', '.join(served['protocols'])})" if served["protocols"] else "")
    return "\n".join([
        f"party           {served['party']} (passive {served['index']}) stopped; it listened on {served['address']}",
        f"runs            {runs}",
        f"predictions     {served['prediction_batches']} batch(es), {served['prediction_rows']} rows",
        f"refusals        {served['refusals']}",
        f"model dir       {served['model_dir']}",
        f"audit log       {served['audit_log']}  (teeboost audit show --config {config})",
    ])


def _print_spread(reports: list[dict]) -> None:
    """Mean and range over seeds of method (iv), per protocol, model size, column and tolerance."""
    import statistics

    print(f"\nover {len({r['seed'] for r in reports})} seeds: rows guessed within each tolerance, method (iv), "
          "mean [min, max]")
    groups: dict[tuple, list[float]] = {}
    for r in reports:
        for row in r["results"]:
            if row["order"] == "inferred" and row["method"] == "attack_approx" and row["rows"] == "training":
                key = (r["protocol"], f"{r['n_trees']}x{r['max_depth']}", row["feature"], row["tolerance"])
                groups.setdefault(key, []).append(100 * row["accuracy"])
    for (protocol, size, feature, tolerance), values in groups.items():
        print(f"  {protocol:<12} {size:<6} {feature} +-{tolerance:g}: {statistics.mean(values):5.1f}% "
              f"[{min(values):.1f}, {max(values):.1f}]")


def _cmd_attack(args: argparse.Namespace) -> int:
    from .attack.report import write_outputs
    from .attack.run import UPPER_BOUND, AttackTarget, ModelSize, run_sweep

    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()] if args.protocols else [args.protocol]
    for protocol in protocols:
        if protocol not in PROTOCOLS:
            raise DataError(f"protocol {protocol!r} is not implemented (available: {', '.join(sorted(PROTOCOLS))})")
    params = _params(args)
    sizes = ModelSize.parse_list(args.sweep) if args.sweep else [ModelSize(params.n_trees, params.max_depth)]
    if args.repeat < 1:
        raise DataError(f"--repeat {args.repeat} must be >= 1")
    if args.transcript is not None and (len(protocols) > 1 or len(sizes) > 1 or args.repeat > 1):
        raise DataError("--transcript attacks one recorded run: it cannot be combined with --sweep, --repeat or "
                        "several --protocols")
    if args.transcript is not None and not args.transcript.is_file():
        raise DataError(f"{args.transcript}: transcript not found")
    if not 0 < args.known_labels < 1:
        raise DataError(f"--known-labels {args.known_labels} must be a share between 0 and 1")
    if not 0 <= args.known_values < 1:
        raise DataError(f"--known-values {args.known_values} must be a share between 0 and 1")
    targets = [AttackTarget.parse(t) for t in args.target]
    active, passives = _load_parties(args)
    aux, aux_ids = None, None
    if args.aux is not None:
        frame = read_csv(args.aux)
        aux = {}
        for target in targets:
            if target.feature not in frame.columns:
                raise DataError(f"{args.aux}: auxiliary sample has no column {target.feature!r}")
        id_column = args.id_column or (GIVE_ME_SOME_CREDIT_ID if args.data is None and args.active_data is None
                                       else None)
        if id_column and id_column in frame.columns:
            aux_ids = frame[id_column].to_numpy()
            frame = frame.drop(columns=[id_column])
        for name in frame.columns:
            aux[str(name)] = PartyData.from_frame(frame[[name]], source=str(args.aux),
                                                  ).features[:, 0]

    def show(report: dict) -> None:
        if args.json:
            return
        simulated = ", enclaves simulated" if PROTOCOLS[report["protocol"]].uses_enclaves else ""
        print(f"\nattack on {report['protocol']}, {report['n_trees']} trees x depth {report['max_depth']} "
              f"({report['n_attacked_rows']} training rows, {report['max_bin']} bins{simulated}; "
              f"train {report['seconds']['train']:.1f} s, stage 1 {report['seconds']['stage1']:.1f} s)")
        for feature, r in report["recovery"].items():
            print(f"  {feature}: from {r['source']}: exact bin {100 * r['exact_share']:.1f}% "
                  f"({r['wrongly_pinned_rows']} wrongly pinned), Spearman {r['spearman']:.3f}"
                  + (f"; {r['missing_flagged']} of {r['missing_rows']} missing values flagged, "
                     f"{r['present_flagged_missing']} present values flagged as missing (scored as misses)"
                     if r["missing_rows"] or r["present_flagged_missing"] else ""))
        for feature, r in report.get("held_out_recovery", {}).items():
            print(f"  {feature}, {report['n_held_out_rows']} held-out rows (early stopping routes them through every "
                  f"tree): from {r['source']}: Spearman {r['spearman']:.3f}")
        for feature, which in [(f, w) for w in ("training", "held-out") for f in report["recovery"]]:
            rows = [r for r in report["results"] if r["feature"] == feature and r["rows"] == which]
            if not rows:
                continue
            tolerances = sorted({r["tolerance"] for r in rows})
            print(f"  {feature}: share of {rows[0]['scored_rows']} {which} rows with a value guessed within +-"
                  + ", ".join(f"{t:g}" for t in tolerances))
            for order in ("inferred", UPPER_BOUND):
                for method in ("random_minmax", "attack_minmax", "random_approx", "attack_approx"):
                    picked = [r for r in rows if r["order"] == order and r["method"] == method]
                    if picked:
                        label = f"{method} ({order})"
                        print(f"    {label:<52}" + " ".join(f"{100 * r['accuracy']:6.1f}%" for r in picked))
        for row in report["labels"]:
            if row["role"] == "passive":
                print(f"  labels inferred by passive party {row['party']}: AUC "
                      + ", ".join(f"{k[4:].replace('_', ' ')} {v:.3f}" for k, v in row.items()
                                  if k.startswith("auc_") and isinstance(v, float)))

    seeds = [args.random_state + k for k in range(args.repeat)]
    reports = run_sweep(active, passives, targets, params, protocols, sizes, seeds=seeds, on_report=show,
                        options=_options(args),
                        transcript=args.transcript, aux=aux, aux_noise=args.aux_noise, out_dir=args.out,
                        seed=args.random_state, upper_bound=args.upper_bound, known_labels=args.known_labels,
                        known_values=args.known_values, reuse_transcripts=args.reuse_transcripts,
                        aux_ids=aux_ids, validation_size=args.validation_size)
    written = [Path(r["transcript"]) for r in reports if r["transcript_written"]] + write_outputs(reports, args.out)
    reused = [r["transcript"] for r in reports if r.get("transcript_reused")]
    if args.json:
        print(json.dumps({"reports": reports, "files": [str(p) for p in written]}))
        return 0
    if args.repeat > 1:
        _print_spread(reports)
    print("\nassumptions:\n" + "\n".join(f"  - {a}" for a in reports[0]["assumptions"]))
    print("\nwrote:\n" + "\n".join(f"  {p}" for p in written))
    if reused:
        print("read (--reuse-transcripts):\n" + "\n".join(f"  {p}" for p in reused))
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    import shutil

    from .bench.report import write_csv, write_plots, write_report
    from .bench.sweep import plan, run_sweep

    common = dict(n_trees=args.n_trees, passive_parties=args.passive_parties, extra_features=args.extra_features,
                  scheme=args.scheme[0])
    points = plan(args.rows, args.protocols, **common)
    if "secureboost" in args.protocols:  # one more secureboost point per size for each further scheme
        points += [p for scheme in args.scheme[1:] for p in plan(args.rows, ["secureboost"], **{**common, "scheme": scheme})]
    if args.scale:
        scale_protocols = ["xgboost", "plain", "ntee", "onetee", "strict"] + (["secureboost"] if args.with_secureboost else [])
        points += [p for p in plan(args.scale_rows, scale_protocols, **common) if p not in points]
    total = len(points)
    progress = None
    if sys.stderr.isatty():
        from tqdm import tqdm

        progress = tqdm(total=total, unit="point", file=sys.stderr, desc="benchmark")
    state = {"done": 0}

    def on_point(point, entry, cached):
        state["done"] += 1
        if progress is not None:
            progress.update(1)
        if entry is None:
            return
        mb = sum(entry["bytes"].values()) / 1e6
        status = "(already done)" if cached else ""
        message = (f"[{state['done']}/{total}] {point.protocol:<12} {point.rows:>9,} rows: {entry['seconds']:8.2f} s, "
                   f"{mb:9.2f} MB, peak {entry.get('peak_tree_mb', entry['peak_rss_mb']):.0f} MB, "
                   f"AUC {entry['auc']:.4f} {status}")
        (progress.write if progress is not None else lambda m: print(m, file=sys.stderr))(message)

    try:
        results = run_sweep(points, args.out, timeout=args.timeout, on_point=on_point)
    finally:
        if progress is not None:
            progress.close()
    wanted = {p.key() for p in points}
    results = {k: v for k, v in results.items() if k in wanted}
    files = [write_csv(results, args.out / "results.csv"), *write_plots(results, args.out)]
    if args.report is not None:
        figures_dir = args.report.parent / "figures"
        figures_dir.mkdir(parents=True, exist_ok=True)
        figures = []
        for figure in files[1:]:
            target = figures_dir / figure.name
            shutil.copyfile(figure, target)
            figures.append(target)
        command = "teeboost " + " ".join(sys.argv[1:]) if sys.argv[0].endswith("teeboost") else \
            "teeboost bench " + " ".join(a for a in sys.argv[2:])
        files.append(write_report(results, args.report, command, figures))
    print("wrote " + ", ".join(str(f) for f in files))
    return 0


def _party_model(model_dir: Path, party: str | None):
    """One party's model file from a model folder: the active party's, or the passive party
    named ``party`` (its name or index). Without ``party``: the active party's when present,
    else the folder's only passive file (a deployed passive party's folder)."""
    from .model_files import ACTIVE_FILE, load_active, load_passive

    if not model_dir.is_dir():
        raise DataError(f"{model_dir}: no model folder here")
    active_file = model_dir / ACTIVE_FILE
    passive_files = sorted(model_dir.glob("passive-*.json"))
    if party == "active" or (party is None and active_file.exists()):
        return load_active(active_file)
    passives = [load_passive(path) for path in passive_files]
    if party is None:
        if len(passives) == 1:
            return passives[0]
        raise DataError(f"{model_dir}: no {ACTIVE_FILE} and {len(passives)} passive files; say which party with "
                        "--party")
    for model in passives:
        if party in (model.name, str(model.index)):
            return model
    found = ", ".join(["active"] * active_file.exists() + [m.name for m in passives]) or "none"
    raise DataError(f"{model_dir}: no model file of party {party!r} (parties here: {found})")


def _cmd_importance(args: argparse.Namespace) -> int:
    from .explain.importance import ImportanceShare, active_importance, importance_share, passive_importance
    from .explain.plot import plot_importance
    from .model_files import ActiveModel

    model = _party_model(args.model_dir, args.party)
    is_active = isinstance(model, ActiveModel)
    if (args.share_with is None) != (args.out is None):
        raise ConfigError("--share-with NAME and --out FILE go together (the active party writes NAME's share)")
    if args.share_with is not None:
        if not is_active:
            raise ConfigError("--share-with: only the active party holds the trees' gains and covers to share")
        share = importance_share(model, args.share_with)
        share.save(args.out)
        summary = {"share": str(args.out), "party": share.name, "records": len(share.gain)}
        print(json.dumps(summary) if args.json else
              f"wrote the gains and covers of party {share.name}'s {len(share.gain)} splits to {args.out} "
              "(nothing about other parties)")
        return 0
    if args.share is not None and is_active:
        raise ConfigError("--share is for a passive party; the active party holds gains and covers itself")
    if is_active:
        importance = active_importance(model, args.type)
    else:
        importance = passive_importance(model, args.type, None if args.share is None else ImportanceShare.load(args.share))
    if args.plot is not None:
        plot_importance(importance, args.plot)
    if args.json:
        print(json.dumps({**importance.to_dict(), **({"plot": str(args.plot)} if args.plot else {})}))
        return 0
    rows = [(name, value) for name, value in importance.features.items()]
    rows += [(f"party {name} (all its features)", value) for name, value in importance.parties.items()]
    rows.sort(key=lambda row: -row[1])
    width = max([len(name) for name, _ in rows] + [7])
    print(f"importance ({args.type}) as party {importance.party} sees it")
    for name, value in rows:
        print(f"  {name:<{width}}  {value:.6g}")
    if not rows:
        print("  (no splits)")
    if args.plot is not None:
        print(f"plot written to {args.plot}")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from .export.xgboost_json import export_part, merge_parts
    from .model_files import write_atomically

    if args.inputs[0] == "merge":
        if args.out is None or len(args.inputs) < 2 or args.part is not None or args.party is not None:
            raise ConfigError("usage: teeboost export merge PART.json [PART.json ...] --out model.json")
        parts = []
        for path in map(Path, args.inputs[1:]):
            try:
                parts.append(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError) as exc:
                raise DataError(f"{path}: not a readable export part ({exc})") from None
        document = merge_parts(parts)
        write_atomically(args.out, json.dumps(document).encode("utf-8"))
        learner = document["learner"]
        summary = {"out": str(args.out), "trees": len(learner["gradient_booster"]["model"]["trees"]),
                   "features": learner["feature_names"], "objective": learner["objective"]["name"]}
        print(json.dumps(summary) if args.json else
              f"wrote an XGBoost model ({summary['trees']} trees, {len(summary['features'])} features in this order: "
              f"{', '.join(summary['features'])}) to {args.out}")
        return 0
    if len(args.inputs) != 1 or args.part is None or args.out is not None:
        raise ConfigError("usage: teeboost export MODEL_DIR --part OUT.json [--party active|NAME]")
    part = export_part(_party_model(Path(args.inputs[0]), args.party))
    write_atomically(args.part, json.dumps(part, indent=1).encode("utf-8"))
    summary = {"part": str(args.part), "party": part["name"], "records": len(part["records"])}
    print(json.dumps(summary) if args.json else
          f"wrote party {part['name']}'s part ({len(part['records'])} split records with their thresholds: "
          f"handing it over reveals them) to {args.part}")
    return 0


def _add_explain_commands(sub) -> None:
    """``teeboost importance`` and ``teeboost export`` (docs/explain.md)."""
    from .explain.importance import IMPORTANCE_TYPES

    importance = sub.add_parser("importance", help="feature importances as one party sees them (its own features; "
                                                   "the active party also each other party as a whole)")
    importance.add_argument("model_dir", type=Path, metavar="MODEL_DIR", help="folder with the party's model file")
    importance.add_argument("--party", metavar="active|NAME",
                            help="whose view (default: active when its file is there, else the only passive file)")
    importance.add_argument("--type", choices=IMPORTANCE_TYPES, default="weight",
                            help="as XGBoost's get_score: weight (splits), gain/cover (average per split), "
                                 "total_gain/total_cover; a passive party needs --share for all but weight")
    importance.add_argument("--share", type=Path, metavar="FILE",
                            help="passive party: the gains and covers of its splits the active party shared")
    importance.add_argument("--share-with", metavar="NAME",
                            help="active party: write passive party NAME's share (gain and cover per split it owns)")
    importance.add_argument("--out", type=Path, metavar="FILE", help="with --share-with: the share file to write")
    importance.add_argument("--plot", type=Path, metavar="FILE.png", help="also draw the importances as a bar chart")
    importance.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    importance.set_defaults(func=_cmd_importance)
    export = sub.add_parser(
        "export", help="joint XGBoost JSON export: each party writes its part, then merge",
        usage="teeboost export MODEL_DIR --part OUT.json [--party active|NAME] [--json]\n"
              "       teeboost export merge PART.json [PART.json ...] --out model.json [--json]",
        description="Each party writes its part (its split records with feature names and thresholds: handing it "
                    "over is its agreement to reveal them; the active party's part also holds the trees). Merging "
                    "every party's part writes a model xgboost.Booster().load_model() reads, over the joined "
                    "columns: the active party's features first, then each passive party's by index.")
    export.add_argument("inputs", nargs="+", metavar="MODEL_DIR | merge PART",
                        help="a model folder, or 'merge' followed by every party's part")
    export.add_argument("--part", type=Path, metavar="OUT.json", help="the part file to write")
    export.add_argument("--party", metavar="active|NAME",
                        help="whose part (default: active when its file is there, else the only passive file)")
    export.add_argument("--out", type=Path, metavar="model.json", help="merge: the XGBoost model file to write")
    export.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    export.set_defaults(func=_cmd_export)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="teeboost", description="Vertical federated gradient boosting.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}",
                        help="print teeboost's version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    train = sub.add_parser("train", help="train a model across parties (all in this process)")
    _add_training_options(train)
    _add_compute_options(train)
    train.set_defaults(func=_cmd_train)
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
    demo = sub.add_parser("demo", help="every party as its own process over gRPC+mTLS: PSI, all protocols, "
                                       "prediction, one report")
    demo.add_argument("--workdir", type=Path, help="where the demo writes data, certificates, models "
                                                   "(default: a new temporary directory)")
    demo.add_argument("--in-memory", action="store_true", help="run all parties in this process instead")
    demo.add_argument("--model-dir", type=Path, default=Path("teeboost-demo"),
                      help="with --in-memory: where each protocol's model is written")
    demo.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    demo.set_defaults(func=_cmd_demo)
    example = sub.add_parser("example-data", help="write the bundled Give Me Some Credit sample as each party's own "
                                                  "CSV (ids partly shared) and new rows to score, to try a "
                                                  "federation across processes")
    example.add_argument("--out", type=Path, required=True, help="directory for active.csv, passive-1.csv, ... "
                                                                 "and new.csv")
    example.add_argument("--rows", type=int, help="use only the first N rows of the sample (default: all 19,999)")
    example.add_argument("--passive-parties", type=int, default=1, help="split the passive columns among K parties")
    example.add_argument("--new-rows", type=int, default=200,
                         help="customers taken out of active.csv (label dropped) into new.csv, for predict")
    example.add_argument("--force", action="store_true", help="replace files already there")
    example.set_defaults(func=_cmd_example_data)
    attack = sub.add_parser("attack", help="leakage-abuse attack: what the active party can guess of passive values")
    _add_training_options(attack)
    attack.add_argument("--target", action="append", required=True, metavar="FEATURE:TOL,TOL,...",
                        help="a passive column and the tolerances to score, e.g. age:1,2,3,4,5")
    attack.add_argument("--aux", type=Path, help="auxiliary public sample (CSV) for the approximate distribution")
    attack.add_argument("--aux-noise", type=float, default=0.0, help="relative noise added to its deciles")
    attack.add_argument("--out", type=Path, default=Path("teeboost-attack"), help="CSV and PNG output directory")
    attack.add_argument("--sweep", metavar="TxD,TxD,...",
                        help="model sizes to attack in turn, e.g. 5x3,10x4,20x5,50x6 (overrides --n-trees/--max-depth)")
    attack.add_argument("--protocols", metavar="P,P,...", help="attack several protocols in turn (overrides --protocol)")
    attack.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="attack N draws (seeds --random-state, +1, ...: split and training) and report the spread")
    attack.add_argument("--upper-bound", action="store_true",
                        help="also score the true bin order (the leakage profile's upper bound, not an attack)")
    attack.add_argument("--known-labels", type=float, default=0.01, metavar="SHARE",
                        help="share of rows whose labels a passive party attacking labels is assumed to know")
    attack.add_argument("--reuse-transcripts", action="store_true",
                        help="attack transcripts already in --out from an earlier run with the same parameters "
                             "instead of training again (resumes a sweep)")
    attack.add_argument("--known-values", type=float, default=0.01, metavar="SHARE",
                        help="share of rows whose true values of each attacked column the active party is assumed "
                             "to know (names groups of anonymous cuts; 0: blind)")
    attack.set_defaults(func=_cmd_attack)
    bench = sub.add_parser("bench", help="protocols side by side over sample sizes (resumable), CSV, plots, report")
    bench.add_argument("--rows", type=_row_count, nargs="+", default=[10_000, 20_000, 50_000, 100_000, 150_000],
                       metavar="N", help="training sample sizes, e.g. 1e4 2e4 5e4")
    bench.add_argument("--protocols", nargs="+", default=["xgboost", "plain", "secureboost", "ntee", "onetee", "strict"],
                       choices=["xgboost", "plain", "secureboost", "ntee", "onetee", "strict"],
                       help="protocols to compare (xgboost: centralised, the floor)")
    bench.add_argument("--n-trees", type=int, default=5, help="trees per run")
    bench.add_argument("--passive-parties", type=int, default=1, help="split the passive columns among this many parties")
    bench.add_argument("--extra-features", type=int, default=0, help="add noisy copies of passive columns")
    bench.add_argument("--scheme", choices=("paillier", "ou"), nargs="+", default=["paillier"],
                       help="homomorphic scheme(s) of the secureboost runs (e.g. --scheme paillier ou: both, "
                            "the first is the baseline of the ratios)")
    bench.add_argument("--scale", action="store_true", help="also the TEE-only scale run (to 1e6 samples)")
    bench.add_argument("--scale-rows", type=_row_count, nargs="+", default=[250_000, 500_000, 1_000_000],
                       metavar="N", help="sample sizes of the scale run, e.g. 2.5e5 5e5 1e6")
    bench.add_argument("--with-secureboost", action="store_true", help="include SecureBoost in the scale run")
    bench.add_argument("--timeout", type=float, default=3600.0, help="seconds per point")
    bench.add_argument("--out", type=Path, default=Path("teeboost-bench"),
                       help="directory of results (kept between runs: a sweep resumes) and plots")
    bench.add_argument("--report", type=Path, help="write the markdown reproduction report here")
    bench.set_defaults(func=_cmd_bench)
    certs = sub.add_parser("certs", help="TLS certificates: a federation CA, and per-party keys that stay with "
                                         "their party")
    certs_sub = certs.add_subparsers(dest="certs_command", required=True)
    init_ca = certs_sub.add_parser("init-ca", help="CA operator, once: create the federation CA (ca.pem, ca.key)")
    init_ca.add_argument("--out", type=Path, required=True, help="directory for ca.pem and ca.key")
    init_ca.add_argument("--days", type=int, default=3650, help="validity in days (default 3650)")
    init_ca.add_argument("--force", action="store_true",
                         help="replace an existing CA (invalidates every certificate it signed)")
    init_ca.set_defaults(func=_cmd_certs_init_ca)
    request = certs_sub.add_parser("request", help="each party, on its own host: create its key (0600) and a "
                                                   "signing request (NAME.csr) for the CA")
    request.add_argument("--party", required=True, help="this party's name, as in its [party] name")
    request.add_argument("--out", type=Path, default=Path("."), help="directory for NAME.key and NAME.csr")
    request.add_argument("--force", action="store_true", help="re-key: replace an existing key of this party")
    request.set_defaults(func=_cmd_certs_request)
    sign = certs_sub.add_parser("sign", help="CA operator: sign a party's request into its certificate")
    sign.add_argument("--ca", type=Path, required=True, help="directory holding ca.pem and ca.key")
    sign.add_argument("--csr", type=Path, required=True, help="the party's NAME.csr")
    sign.add_argument("--out", type=Path, help="certificate to write (default: <party>.pem beside the request, "
                                                     "named after the party the request names)")
    sign.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    sign.add_argument("--dns", action="append", metavar="NAME", help="extra DNS name for the certificate; repeat")
    sign.add_argument("--ip", action="append", metavar="ADDRESS", help="extra IP address; repeat")
    sign.add_argument("--force", action="store_true", help="replace an existing certificate file (renewal)")
    sign.set_defaults(func=_cmd_certs_sign)
    demo_certs = certs_sub.add_parser("demo", help="LOCAL DEMOS ONLY: a CA and every party's key in one "
                                                   "directory (whoever holds it can pose as any party)")
    demo_certs.add_argument("--out", type=Path, required=True, help="directory to write")
    demo_certs.add_argument("--parties", required=True, help="comma-separated party names, e.g. active,passive-1")
    demo_certs.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    demo_certs.add_argument("--force", action="store_true", help="replace the CA and keys already there")
    demo_certs.set_defaults(func=_cmd_certs_demo)
    audit = sub.add_parser("audit", help="a party's audit log: runs, queries, prediction batches, refusals")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True)
    show = audit_sub.add_parser("show", help="summarise a party's audit log")
    show.add_argument("--log", type=Path, help="the audit log file")
    show.add_argument("--config", type=Path, help="or: the party's config (its [audit] log)")
    show.add_argument("--json", action="store_true", help="print every entry as JSON instead")
    show.set_defaults(func=_cmd_audit_show)
    _add_explain_commands(sub)
    consent = sub.add_parser("consent", help="label owner: let one passive party see its own split records of the "
                                             "saved strict model (they reveal which way labels lean; audited)")
    consent.add_argument("--config", type=Path, required=True, help="the active party's config")
    consent.add_argument("--party", required=True, metavar="NAME|INDEX", help="the passive party")
    consent.add_argument("--out", type=Path, required=True, metavar="FILE", help="the consent file to hand over")
    consent.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    consent.set_defaults(func=_cmd_consent)
    disclose = sub.add_parser("disclose", help="passive party: open its sealed split records of a strict model in "
                                               "its enclave, on the label owner's consent file (audited)")
    disclose.add_argument("--config", type=Path, required=True, help="the passive party's config")
    disclose.add_argument("--consent", type=Path, required=True, metavar="FILE", help="from `teeboost consent`")
    disclose.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    disclose.set_defaults(func=_cmd_disclose)
    party = sub.add_parser("party", help="run one party from its config (the active party drives; "
                                         "passive parties serve)")
    party.add_argument("--config", type=Path, required=True, help="this party's TOML config")
    party.add_argument("--protocol", choices=_CONTRACT_PROTOCOLS, help="active: override [training] protocol")
    party.add_argument("--transcript", type=Path, help="active: record its view of the run")
    party.add_argument("--ready-file", type=Path, help="passive: write host:port here once listening")
    party.add_argument("--shutdown-peers", action="store_true", help="active: stop the passive parties afterwards")
    party.add_argument("--resume", action="store_true",
                       help="active: continue the interrupted run from every party's checkpoint")
    party.add_argument("--allow-simulated-tee", action="store_true",
                       help="accept simulated enclaves and quotes (as [tee] allow_simulated = true)")
    party.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout (active: the run's report; passive: what it served, when it stops)")
    party.set_defaults(func=_cmd_party)
    tee = sub.add_parser("tee", help="enclave set-up: a party's identity key, a simulated platform")
    tee_sub = tee.add_subparsers(dest="tee_command", required=True)
    identity = tee_sub.add_parser("identity", help="create this party's identity key (keep it secret) and print "
                                                   "its public key for every party's [tee] identities")
    identity.add_argument("--out", type=Path, required=True, help="key file to create (mode 0600; never replaced)")
    identity.set_defaults(func=_cmd_tee_identity)
    platform = tee_sub.add_parser("platform", help="create (or read) a simulated platform file and print its "
                                                   "attestation public key for every party's [tee] trusted_roots")
    platform.add_argument("--out", type=Path, required=True, help="platform file (created if missing)")
    platform.set_defaults(func=_cmd_tee_platform)
    public_key = tee_sub.add_parser("public-key", help="print the public key of a platform file (for [tee] "
                                                       "trusted_roots) or of an identity key (for [tee] identities)")
    public_key.add_argument("file", type=Path, help="a platform file or an identity key file")
    public_key.set_defaults(func=_cmd_tee_public_key)
    attestation = sub.add_parser("attestation", help="hardware attestation: verify SGX/TDX DCAP quotes")
    attestation_sub = attestation.add_subparsers(dest="attestation_command", required=True)
    verify = attestation_sub.add_parser("verify", help="verify a DCAP quote against Intel collateral and a policy")
    verify.add_argument("quote", type=Path, help="raw quote file")
    source = verify.add_mutually_exclusive_group(required=True)
    source.add_argument("--collateral", type=Path, help="collateral JSON (PCS/PCCS format)")
    source.add_argument("--pccs-url", help="fetch the collateral from this PCCS (or Intel PCS)")
    verify.add_argument("--now", type=float, help="verify as of this Unix time (default: now)")
    verify.add_argument("--policy", type=Path, help="TOML file with an [attestation] table (see docs/enclaves.md)")
    verify.add_argument("--accept-status", action="append", metavar="STATUS",
                        help="accept this TCB status too (default: UpToDate only); repeat")
    verify.add_argument("--accept-advisory", action="append", metavar="ID", help="accept this advisory id; repeat")
    verify.add_argument("--mrenclave", action="append", metavar="HEX", help="allowed SGX MRENCLAVE; repeat")
    verify.add_argument("--mrsigner", action="append", metavar="HEX:PRODID:MINSVN",
                        help="allowed SGX signer, product id and lowest ISVSVN; repeat")
    verify.add_argument("--mrtd", action="append", metavar="HEX", help="allowed TDX MRTD; repeat")
    verify.add_argument("--rtmr", action="append", metavar="N=HEX",
                        help="TDX RTMR N the quote must carry (with --mrtd); repeat for 1, 2, 3")
    verify.add_argument("--allow-unpinned-rtmrs", action="store_true",
                        help="accept a TDX quote whatever RTMR1-3 hold (they measure kernel and workload)")
    verify.add_argument("--report-data", metavar="HEX", help="report data the quote must carry (exactly 64 bytes)")
    verify.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    verify.set_defaults(func=_cmd_attestation_verify)
    for command in _all_parsers(parser):
        command.formatter_class = _DefaultsHelpFormatter
    return parser


def _all_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parser and every subcommand's parser, depth first (``certs sign`` included)."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found += _all_parsers(child)
    return found


_DEMO_DEFAULTS = argparse.Namespace()


def _init_demo_defaults() -> None:
    probe = argparse.ArgumentParser()
    _add_training_options(probe)
    vars(_DEMO_DEFAULTS).update(vars(probe.parse_args(["--allow-simulated-tee"])))  # the demo says so


_init_demo_defaults()


def _show_data_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Data adjustments (dropped columns, intersected rows) as one plain line each."""
    if issubclass(category, DataWarning):
        print(f"teeboost: warning: {message}", file=sys.stderr)
    else:
        _default_showwarning(message, category, filename, lineno, file, line)


_default_showwarning = warnings.showwarning


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always", DataWarning)
            warnings.showwarning = _show_data_warning
            return args.func(args)
    except TeeboostError as exc:
        print(f"teeboost: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("teeboost: interrupted; nothing was written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
