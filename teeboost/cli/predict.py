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
    predict.set_defaults(func=_cmd_predict)


def _cmd_predict(args: argparse.Namespace) -> int:
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
                                 else config.number_format)
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
    from ..config import ProtocolOptions
    from ..estimator import party_features
    from ..federation import FederatedModel

    model = FederatedModel.load(args.model_dir, ProtocolOptions(allow_simulated_tee=args.allow_simulated_tee))
    active, passives = _joined(args, model) if args.data is not None else _per_party(args, model)
    active_x, passive_x = party_features(model, active, passives)
    margin, traffic = model.predict_margin(active_x, passive_x)
    out = _predictions(model, model.active.ensemble.loss.predict(margin), active)
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
    return parties[0], parties[1:]


def _per_party(args: argparse.Namespace, model: FederatedModel) -> tuple[PartyData, list[PartyData]]:
    """Each party's rows from its own source, matched by their ids (or by position)."""
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
    return match_rows(parties[0], parties[1:], args.align)


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
