"""``teeboost importance`` and ``teeboost export``: a model explained from one party's seat
(docs/explain.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..config import IMPORTANCE_TYPES
from ..errors import ConfigError, DataError


def add_importance(sub) -> None:
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


def add_export(sub) -> None:
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


def _party_model(model_dir: Path, party: str | None):
    """One party's model file from a model folder: the active party's, or the passive party
    named ``party`` (its name or index). Without ``party``: the active party's when present,
    else the folder's only passive file (a deployed passive party's folder)."""
    from ..model_files import ACTIVE_FILE, load_active, load_passive

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
    from ..explain.importance import ImportanceShare, active_importance, importance_share, passive_importance
    from ..explain.plot import plot_importance
    from ..model_files import ActiveModel

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
    from ..export.xgboost_json import export_part, merge_parts
    from ..model_files import write_atomically

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
        categorical = [f for f, t in zip(learner["feature_names"], learner["feature_types"]) if t == "c"]
        summary = {"out": str(args.out), "trees": len(learner["gradient_booster"]["model"]["trees"]),
                   "features": learner["feature_names"], "objective": learner["objective"]["name"],
                   "categorical": categorical}
        print(json.dumps(summary) if args.json else
              f"wrote an XGBoost model ({summary['trees']} trees, {len(summary['features'])} features in this order: "
              f"{', '.join(summary['features'])}) to {args.out}" + (
                  f"\ncategorical features {', '.join(categorical)} carry their category names: give XGBoost pandas "
                  "category columns (xgboost >= 3.1 refuses names it was not given) or pass the frame through "
                  "teeboost.export.recode(frame, 'model.json') first" if categorical else ""))
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
