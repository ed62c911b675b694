"""``teeboost predict``: score new rows with a saved model, from one joined source or from
each party's own source (as ``train`` takes them), or (``--config``) as the active party with
its peers online."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import DataError
from .common import DEFAULT_MODEL_DIR
from .options import _add_number_options, _add_party_sources, _id_columns, _number_format

if TYPE_CHECKING:
    import pandas as pd

    from ..data import PartyData
    from ..federation import FederatedModel


def add_predict(sub) -> None:
    predict = sub.add_parser("predict", help="predict with a saved model (one prediction per input row)")
    predict.add_argument("--model-dir", type=Path,
                         help=f"a locally trained model (all parties' files; default: {DEFAULT_MODEL_DIR}, where "
                              "train writes it)")
    predict.add_argument("--config", type=Path, help="the active party's config: predict with parties online")
    data = predict.add_argument_group("data (one joined source, or each party's own; docs/data.md)")
    data.add_argument("--data", metavar="SOURCE",
                      help="CSV or Parquet file (or SQL URL#table=T) with every party's columns")
    _add_party_sources(data)
    data.add_argument("--align", default="auto", choices=("auto", "id", "intersect", "position"),
                      help="how the parties' rows are matched (as for train)")
    _add_number_options(data)
    predict.add_argument("--output", type=Path, required=True, help="CSV to write")
    predict.add_argument("--allow-simulated-tee", action="store_true",
                         help="strict models: route between simulated enclaves (no hardware protection)")
    predict.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    group = predict.add_argument_group("rows the model cannot score (a passive party lacks the customer)")
    group.add_argument("--on-unmatched", choices=("empty", "error", "fallback"),
                       help="leave them empty (with a reason), refuse the whole batch, or score them with "
                            "--fallback-model (default: [serving] on_unmatched of --config, else empty)")
    group.add_argument("--fallback-model", type=Path, metavar="DIR",
                       help="a model trained on the active party's columns only, for --on-unmatched fallback")
    predict.set_defaults(func=_cmd_predict)


def _cmd_predict(args: argparse.Namespace) -> int:
    from ..serving.unmatched_rows import UnmatchedPolicy, write_unmatched

    if (args.data is None) == (args.active_data is None and not args.passive_data):
        raise DataError("give either --data (every party's columns in one source) or --active-data with one "
                        "--passive-data per passive party")
    if args.config is not None:
        from ..deploy.active import run_prediction
        from ..deploy.config import load_config

        if args.data is None:
            raise DataError("--config predicts the active party's own rows: give them with --data")
        config = load_config(args.config)
        summary = run_prediction(config, args.data, args.output, sep=args.sep,
                                 number_format=_number_format(args) if args.decimal != "." or args.thousands
                                 else config.number_format, unmatched=UnmatchedPolicy.from_args(args, config))
        print(json.dumps(summary) if args.json else
              f"wrote {summary['rows']} predictions to {summary['output']} "
              f"({summary['bytes_total']:,} bytes of routing questions on the wire, {summary['round_trips']} round "
              "trips)")
        return 0
    if args.model_dir is None:
        args.model_dir = DEFAULT_MODEL_DIR
        if not args.model_dir.exists():
            raise DataError(f"no model in {args.model_dir}, where 'teeboost train' writes one by default: train "
                            "first, or give --model-dir (a local model) or --config (the active party's config, "
                            "parties online)")
    from types import SimpleNamespace

    import numpy as np

    from ..config import ProtocolOptions
    from ..estimator import party_features
    from ..federation import FederatedModel
    from ..parties.active import ensemble_digest

    policy = UnmatchedPolicy.from_args(args)
    model = FederatedModel.load(args.model_dir, ProtocolOptions(allow_simulated_tee=args.allow_simulated_tee))
    every, reasons, active, passives = _joined(args, model) if args.data is not None else _per_party(args, model)
    active_x, passive_x = party_features(model, active, passives)
    margin, traffic = model.predict_margin(active_x, passive_x) if active.n_rows else (None, {"bytes_total": 0})
    scored = _predictions(model, model.active.ensemble.loss.predict(margin) if margin is not None else
                          np.zeros(0), active)
    out = _all_rows(scored, every, reasons, model)
    out = write_unmatched(out, reasons, every, policy, SimpleNamespace(
        label=f"model@{ensemble_digest(model.active.ensemble)[:16]}", objective=model.active.ensemble.objective,
        classes=model.active.ensemble.classes), args.allow_simulated_tee)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.output.with_name(args.output.name + ".partial")
    out.to_csv(tmp, index=False)
    tmp.replace(args.output)
    summary = {"rows": len(out), "output": str(args.output), "bytes_total": traffic["bytes_total"]}
    print(json.dumps(summary) if args.json else
          f"wrote {len(out)} predictions to {args.output} ({traffic['bytes_total']:,} bytes of routing questions)")
    return 0


def _party_names(model: FederatedModel) -> list[tuple[str, object]]:
    """(how messages name each party, its model part)."""
    return [("active party", model.active),
            *((f"passive party {m.index} (passive-{m.index})", m) for m in model.passives)]


def _joined(args: argparse.Namespace, model: FederatedModel) -> tuple[PartyData, list[PartyData]]:
    """Every party's columns from one source; a party whose columns are missing is named."""
    import numpy as np

    from ..data import PartyData
    from ..data_sources import DataSource, read_source

    source = DataSource.parse(args.data)
    id_column = args.active_id or args.id_column or model.active.id_column
    frame = read_source(source, id_column=id_column, sep=args.sep, number_format=_number_format(args),
                        text_columns=[n for _, m in _party_names(model) for n in m.vocabularies])
    if id_column is not None and id_column not in frame.columns:
        if args.active_id or args.id_column:
            raise DataError(f"{source}: id column {id_column!r} not found (columns: {', '.join(frame.columns)})")
        id_column = None
    for who, m in _party_names(model):
        missing = [n for n in m.feature_names if n not in frame.columns]
        if missing:
            raise DataError(f"{source}: the model's {who} needs column(s) {', '.join(map(repr, missing))}, "
                            f"missing from this source (its columns: {', '.join(frame.columns)}); give every "
                            "party's columns, or each party's own source with --active-data and --passive-data")
    keep = [id_column] if id_column else []
    parties = [PartyData.from_frame(frame[keep + list(m.feature_names)], id_column=id_column, name="active" if m is model.active else m.name,
                                    source=f"{source} ({who})") for who, m in _party_names(model)]
    # a row with none of a passive party's columns is a customer that party does not hold (as
    # teeboost serve reads a request row), not one whose values are all missing
    reasons: list = [None] * parties[0].n_rows
    for party, m in zip(parties[1:], model.passives):
        for i in np.flatnonzero(np.isnan(party.features).all(axis=1)) if party.features.shape[1] else []:
            reasons[i] = reasons[i] or f"the row has none of passive party {m.name!r}'s columns (it does not hold " \
                                       "this customer)"
    held = np.array([r is None for r in reasons], dtype=bool)
    return parties[0], reasons, parties[0].take(np.flatnonzero(held)), [p.take(np.flatnonzero(held))
                                                                        for p in parties[1:]]


def _per_party(args: argparse.Namespace, model: FederatedModel) -> tuple:
    """Each party's rows from its own source, matched by their ids (or by position); the
    active party's rows a passive party's source does not hold are named with why."""
    import numpy as np

    from ..data import PartyData
    from ..data_sources import DataSource, read_source
    from ..row_matching import match_rows

    specs = [args.active_data, *(args.passive_data or [])]
    if args.active_data is None or len(specs) != 1 + len(model.passives):
        raise DataError(f"the model in {args.model_dir} has {len(model.passives)} passive part(ies): give "
                        f"--active-data and {len(model.passives)} --passive-data, in the order of the training run")
    active_id, passive_ids = _id_columns(args, len(model.passives))
    ids = [active_id or model.active.id_column,
           *(i or model.active.id_column for i in passive_ids)]
    parties = []
    for (who, m), spec, id_column in zip(_party_names(model), specs, ids):
        source = DataSource.parse(spec)
        frame = read_source(source, id_column=id_column, sep=args.sep, number_format=_number_format(args),
                            text_columns=list(m.vocabularies))
        if id_column is not None and id_column not in frame.columns:
            raise DataError(f"{source}: id column {id_column!r} not found (columns: {', '.join(frame.columns)}); "
                            f"name this party's own with --{who.split()[0]}-id")
        missing = [n for n in m.feature_names if n not in frame.columns]
        if missing:
            raise DataError(f"{source}: the model's {who} needs column(s) {', '.join(map(repr, missing))} "
                            f"(this source's columns: {', '.join(frame.columns)})")
        keep = [id_column] if id_column else []
        parties.append(PartyData.from_frame(frame[keep + list(m.feature_names)], id_column=id_column, name="active" if m is model.active else m.name,
                                            source=str(source)))
    every = parties[0]
    reasons: list = [None] * every.n_rows
    if args.align in ("auto", "intersect") and all(p.ids is not None for p in parties):
        for party, m in zip(parties[1:], model.passives):
            known = set(map(str, party.ids))
            for i, row_id in enumerate(every.ids):
                if reasons[i] is None and str(row_id) not in known:
                    reasons[i] = f"passive party {m.name!r}'s source ({party.source}) does not hold this id"
    held = np.flatnonzero([r is None for r in reasons])
    if held.size == 0:
        return every, reasons, every.take(held), [p.take(np.zeros(0, dtype=np.int64)) for p in parties[1:]]
    active, passives = match_rows(every.take(held), parties[1:], args.align)
    return every, reasons, active, passives


def _all_rows(scored: pd.DataFrame, every: PartyData, reasons: list, model: FederatedModel) -> pd.DataFrame:
    """The scored rows' predictions in the order of every input row, empty where not scored."""
    import numpy as np

    import pandas as pd

    held = np.flatnonzero([r is None for r in reasons])
    if held.size == len(reasons):
        return scored
    out = pd.DataFrame()
    if every.ids is not None:
        out[model.active.id_column or "id"] = every.ids.astype(str)
    for column in scored.columns:
        if column in out.columns:
            continue
        values = np.full(len(reasons), np.nan, dtype=object if scored[column].dtype == object else np.float64)
        if values.dtype == object:
            values[:] = None
        values[held] = scored[column].to_numpy()
        out[column] = values
    return out


def _predictions(model: FederatedModel, prediction, active: PartyData) -> pd.DataFrame:
    """One row per scored row: its id, the probability of each class (binary: of class 1, the
    positive class) and the prediction."""
    import numpy as np
    import pandas as pd

    out = pd.DataFrame()
    if active.ids is not None:
        out[model.active.id_column or "id"] = active.ids.astype(str)
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
    return out
