"""The training options ``train`` and ``attack`` share, and what they become: parameters,
protocol options, compute options and the parties' data.

Building the options imports only the light ``teeboost.config``; reading the data (pandas) is
done inside the functions that do it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import ALIGN_MODES, METRICS, OBJECTIVE_ALIASES, OBJECTIVES, BoostParams, ProtocolOptions
from ..core.constraints import parse_interactions, parse_monotone
from ..errors import ConfigError, DataError
from .common import _CONTRACT_PROTOCOLS, DEFAULT_MODEL_DIR

if TYPE_CHECKING:
    import pandas as pd

    from ..compute import ComputeOptions
    from ..data import PartyData


def _add_training_options(parser: argparse.ArgumentParser) -> None:
    data = parser.add_argument_group("data (default: the bundled Give Me Some Credit sample and its default split)")
    data.add_argument("--data", metavar="SOURCE",
                      help="one CSV or Parquet file (or SQL URL#table=T) with every party's columns (a Give Me Some "
                           "Credit file such as Kaggle's cs-training.csv needs nothing else); sources: docs/data.md")
    data.add_argument("--label", help="label column (held by the active party)")
    data.add_argument("--weight-column", metavar="COLUMN",
                      help="column of per-row sample weights (held by the active party, not a feature); weights "
                           "scale the gradients before they are encrypted, masked or sealed")
    data.add_argument("--passive-columns", action="append", metavar="A,B,...",
                      help="columns of one passive party; repeat for more passive parties")
    _add_party_sources(data)
    data.add_argument("--align", choices=ALIGN_MODES, default="auto",
                      help="how rows of the parties' files are matched: by id (the same ids everywhere), intersect "
                           "(the ids every party holds; the count is printed), position (row i is the same customer "
                           "in every file); auto: by id when there are id columns, intersecting when the id sets "
                           "differ, else by position unless two files share a column name")
    _add_number_options(data)
    data.add_argument("--categorical", action="append", metavar="A,B,...",
                      help="columns to treat as categories even though they hold numbers (e.g. codes); "
                           "text columns are categorical anyway")
    train = parser.add_argument_group("training (defaults are XGBoost's)")
    train.add_argument("--protocol", default="plain", choices=_CONTRACT_PROTOCOLS,
                       help="how the parties protect what they exchange: plain (not at all, the reference), "
                            "secureboost (homomorphic encryption), ntee, onetee, strict (enclaves)")
    defaults = BoostParams()
    train.add_argument("--objective", choices=(*OBJECTIVES, *OBJECTIVE_ALIASES), metavar="OBJECTIVE",
                       help="loss to fit: binary, multiclass, regression, poisson, tweedie, gamma or pseudohuber, "
                            "or XGBoost's names (binary:logistic, multi:softprob, reg:squarederror, count:poisson, "
                            "reg:tweedie, reg:gamma, reg:pseudohubererror); default: inferred from the label column")
    train.add_argument("--tweedie-variance-power", type=float, default=defaults.tweedie_variance_power,
                       help="reg:tweedie's variance power in [1, 2): near 1 Poisson-like, near 2 gamma-like")
    train.add_argument("--huber-slope", type=float, default=defaults.huber_slope,
                       help="reg:pseudohubererror's (and the mphe metric's) slope: errors beyond it count linearly")
    train.add_argument("--monotone-constraints", metavar="COLUMN:DIRECTION,...",
                       help="columns whose effect may only rise (1) or fall (-1), any party's, e.g. "
                            "age:1,MonthlyIncome:-1 (XGBoost's monotone_constraints; docs/constraints.md)")
    train.add_argument("--interaction-constraints", metavar="A,B;C,D",
                       help="sets of columns allowed to interact along a tree's paths, sets separated by ';' "
                            '(or XGBoost\'s JSON form [["A","B"],["C","D"]]; docs/constraints.md)')
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
                            "last (default by objective: auc, accuracy, rmse, poisson-nloglik, "
                            "tweedie-nloglik@<power>, gamma-deviance, mphe)")
    train.add_argument("--positive-class", metavar="VALUE",
                       help="binary classification: the label value that is class 1 (its probability is predicted; "
                            "default: the larger value, e.g. 1 of 0/1)")
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


def _add_party_sources(group) -> None:
    """Each party's own source and id column (``train`` and ``predict`` alike)."""
    group.add_argument("--active-data", metavar="SOURCE",
                       help="the active party's own CSV, Parquet file or SQL URL#table=T (with --passive-data)")
    group.add_argument("--passive-data", action="append", metavar="SOURCE",
                       help="one passive party's CSV, Parquet file or SQL URL#table=T; repeat for more passive parties")
    group.add_argument("--id", dest="id_column", help="row id column of every party's data (unless named per party)")
    group.add_argument("--active-id", metavar="COLUMN", help="the active party's id column, when it has its own name")
    group.add_argument("--passive-id", action="append", metavar="COLUMN",
                       help="a passive party's id column, one per --passive-data in the same order")


def _add_number_options(group) -> None:
    group.add_argument("--sep", help="column separator of the CSV files (default: sniffed from the first lines: "
                                     "comma, semicolon, tab or pipe)")
    group.add_argument("--decimal", choices=(".", ","), default=".",
                       help="decimal mark of numbers written as text (102,0 needs --decimal ,); without it such "
                            "columns are refused, never read as categories")
    group.add_argument("--thousands", metavar="CHAR",
                       help="thousands separator of numbers written as text (1.234,5 needs --decimal , --thousands .)")


def _number_format(args: argparse.Namespace):
    from ..number_format import NumberFormat

    return NumberFormat.of(args.decimal, args.thousands)


def _id_columns(args: argparse.Namespace, n_passive: int) -> tuple[str | None, list[str | None]]:
    """The active party's id column and each passive party's (``--active-id``/``--passive-id``,
    else ``--id``)."""
    named = args.passive_id or []
    if named and len(named) != n_passive:
        raise DataError(f"--passive-id was given {len(named)} time(s) for {n_passive} --passive-data source(s): "
                        "give one per passive party, in the same order")
    return args.active_id or args.id_column, [named[i] if named else args.id_column for i in range(n_passive)]


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
        positive_class=args.positive_class, tweedie_variance_power=args.tweedie_variance_power,
        huber_slope=args.huber_slope, monotone_constraints=_monotone(args.monotone_constraints),
        interaction_constraints=_interactions(args.interaction_constraints),
    )


def _monotone(text: str | None) -> dict[str, int] | None:
    try:
        return parse_monotone(text, where="--monotone-constraints") or None
    except ValueError as exc:
        raise ConfigError(f"{exc} (give column:direction pairs, e.g. age:1,MonthlyIncome:-1)") from None


def _interactions(text: str | None) -> tuple | None:
    if text is None or not text.strip():
        return None
    if not text.strip().startswith("["):  # A,B;C,D
        text = json.dumps([[n.strip() for n in group.split(",") if n.strip()] for group in text.split(";")])
    try:
        return parse_interactions(text, where="--interaction-constraints") or None
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _options(args: argparse.Namespace) -> ProtocolOptions:
    return ProtocolOptions(scheme=args.scheme, key_bits=args.key_bits, insecure_key_bits=args.insecure_key_bits,
                           pack_gradients=not args.no_pack_gradients, pack_bins=not args.no_pack_bins,
                           crypto_workers=args.crypto_workers, aes_bits=args.aes_bits,
                           short_randomizer=args.short_randomizer, precompute_randomizers=args.precompute_randomizers,
                           onetee_bins_once=args.onetee_bins_once, allow_simulated_tee=args.allow_simulated_tee)


def _compute(args: argparse.Namespace) -> ComputeOptions:
    from ..compute import ComputeOptions

    if args.compute == "local" and args.ray_address != "local":
        raise ConfigError(f"--ray-address {args.ray_address} needs --compute ray")
    return ComputeOptions(backend=args.compute, address=args.ray_address, workers=args.compute_workers)


def _categorical_in(args: argparse.Namespace, frame: pd.DataFrame) -> list[str]:
    """The --categorical columns this file holds (each party's file holds some of them)."""
    return [c for c in _split_names(args.categorical) if c in frame.columns]


def _split_names(values: list[str] | None) -> list[str]:
    return [name.strip() for value in values or [] for name in value.split(",") if name.strip()]


def _load_parties(args: argparse.Namespace) -> tuple[PartyData, list[PartyData]]:
    from ..data import PartyData, split_columns
    from ..data_sources import DataSource, read_source
    from ..datasets import (GIVE_ME_SOME_CREDIT_ID, GIVE_ME_SOME_CREDIT_LABEL, GIVE_ME_SOME_CREDIT_PASSIVE,
                            bundled_path, load_give_me_some_credit)

    number_format = _number_format(args)
    if args.active_data or args.passive_data:
        if args.data or args.passive_columns:
            raise DataError("give either --data with --passive-columns, or --active-data with --passive-data")
        if not (args.active_data and args.passive_data and args.label):
            raise DataError("--active-data needs --label and at least one --passive-data")
        active_id, passive_ids = _id_columns(args, len(args.passive_data))
        args.id_column = active_id  # the name the model keeps for prediction
        source = DataSource.parse(args.active_data)
        active_frame = read_source(source, id_column=active_id, sep=args.sep, number_format=number_format)
        active = PartyData.from_frame(active_frame, id_column=active_id, label=args.label, name="active",
                                      source=str(source), require_label=True,
                                      categorical=_categorical_in(args, active_frame),
                                      weight_column=args.weight_column)
        passives = []
        for i, (spec, id_column) in enumerate(zip(args.passive_data, passive_ids), start=1):
            source = DataSource.parse(spec)
            frame = read_source(source, id_column=id_column, sep=args.sep, number_format=number_format)
            passives.append(PartyData.from_frame(frame, id_column=id_column, name=f"passive-{i}",
                                                 source=str(source), categorical=_categorical_in(args, frame)))
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
    frame = read_source(args.data, id_column=args.id_column, sep=args.sep, number_format=number_format)
    groups = [[c.strip() for c in spec.split(",") if c.strip()] for spec in args.passive_columns]
    return split_columns(frame, groups, label=args.label, id_column=args.id_column, source=str(args.data),
                         categorical=_categorical_in(args, frame), weight_column=args.weight_column)


def _demo_defaults() -> argparse.Namespace:
    """Every training option at its default but the demo's small settings, as ``demo
    --in-memory`` trains (it says so)."""
    from ..param_defaults import demo_flags

    probe = argparse.ArgumentParser()
    _add_training_options(probe)
    return probe.parse_args(["--allow-simulated-tee", *demo_flags()])  # the demo says so
