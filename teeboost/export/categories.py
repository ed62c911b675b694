"""Categories by name in the XGBoost export, so that a user's own frame cannot be mis-coded.

teeboost codes a categorical feature by frequency (its vocabulary); a pandas ``category``
column codes by its own category order. An export that held codes only was therefore read
with the frame's codes and silently mispredicted (issue #35: 61% of predictions changed).
XGBoost >= 3.1 keeps the training categories in the model (``cats``) and, given a DataFrame,
re-codes its categories **by name**, refusing a name it was not given. We write each
vocabulary there, so XGBoost itself maps the user's categories to teeboost's codes:

- names in code order; with rare categories, one more name, ``<other>``, for their shared code;
- names beyond ASCII are written escaped (``M\\xfcnchen``): xgboost 3.2 measures a pandas
  category's length in characters but copies its UTF-8 bytes, so it mangles such names; escaped,
  they can only fail to match (refused), never match the wrong code;
- a category XGBoost was not given (rare, unseen, spaced differently, numbers for text) is
  refused by XGBoost, naming it. :func:`recode` turns any frame (text or category columns)
  into exactly what federated prediction reads, rare and unseen categories included.

The learner attribute ``teeboost_categories`` keeps the vocabularies as teeboost holds them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..categories import Vocabulary
from ..data import PartyData
from ..errors import DataError, ModelFileError

__all__ = ["ATTRIBUTE", "category_names", "category_container", "recode"]

ATTRIBUTE = "teeboost_categories"
OTHER = "<other>"


def xgboost_name(name: str) -> str:
    """The name XGBoost is given: ASCII as is, anything else escaped (see module docstring)."""
    return name if name.isascii() else name.encode("ascii", "backslashreplace").decode("ascii")


def category_names(features: list[str], vocabularies: dict[str, tuple[list[str], bool]]) -> dict[str, dict[str, Any]]:
    """Per categorical feature (joined order): its categories in code order and the name of the
    shared "other" code (None without one) -- the value of the ``teeboost_categories`` attribute."""
    named: dict[str, dict[str, Any]] = {}
    for feature in features:
        if feature not in vocabularies:
            continue
        names, other = vocabularies[feature]
        given = [xgboost_name(n) for n in names]
        clash = sorted({g for g in given if given.count(g) > 1})
        if clash:
            raise ModelFileError(f"feature {feature!r}: categories {[n for n in names if xgboost_name(n) in clash]} "
                                 "would have one name in XGBoost; rename one of them")
        sentinel = None
        if other:
            sentinel = OTHER
            while sentinel in given:
                sentinel = f"<{sentinel}>"
        named[feature] = {"categories": list(names), "other": sentinel}
    return named


def _given_names(entry: dict[str, Any]) -> list[str]:
    names = [xgboost_name(n) for n in entry["categories"]]
    return names + [entry["other"]] if entry["other"] is not None else names


def category_container(features: list[str], named: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """XGBoost's ``cats``: per feature the names as UTF-8 bytes (int8, as XGBoost saves them)
    with offsets, the running count of names, and each feature's names in sorted order."""
    if not named:
        return {"enc": [], "feature_segments": [], "sorted_idx": []}
    enc, segments, sorted_idx = [], [0], []
    for feature in features:
        names = _given_names(named[feature]) if feature in named else []
        encoded = [n.encode("utf-8") for n in names]
        enc.append({"offsets": [int(v) for v in np.cumsum([0, *map(len, encoded)])] if names else [],
                    "values": [b - 256 if b > 127 else b for b in b"".join(encoded)]})
        segments.append(segments[-1] + len(names))
        sorted_idx.extend(sorted(range(len(names)), key=lambda i: encoded[i]))
    return {"enc": enc, "feature_segments": segments, "sorted_idx": sorted_idx}


def _decoded(cats: dict[str, Any], position: int) -> list[str]:
    entry = cats["enc"][position]
    raw = bytes(v % 256 for v in entry["values"])
    offsets = entry["offsets"]
    return [raw[a:b].decode("utf-8") for a, b in zip(offsets, offsets[1:])]


def _document(model: Any) -> dict[str, Any]:
    if hasattr(model, "save_raw"):  # an xgboost.Booster
        return json.loads(bytes(model.save_raw("json")))
    if isinstance(model, (str, Path)):
        try:
            return json.loads(Path(model).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelFileError(f"{model}: cannot read the XGBoost model: {exc}") from None
    if isinstance(model, dict):
        return model
    raise ModelFileError(f"recode needs the exported model (a dict, a model.json path or an xgboost.Booster), "
                         f"got {type(model).__name__}")


def recode(frame: pd.DataFrame, model: Any) -> pd.DataFrame:
    """The user's frame as the exported model must be given it: its feature columns in the
    model's order, numbers as float64, categories (text or pandas categories) read and coded as
    federated prediction codes them (rare and unseen ones as "other" or missing), as pandas
    categoricals with exactly the model's category names. Feed the result to
    ``xgb.DMatrix(..., enable_categorical=True)`` or ``inplace_predict``."""
    document = _document(model)
    try:
        learner = document["learner"]
        features = [str(f) for f in learner["feature_names"]]
        attribute = learner.get("attributes", {}).get(ATTRIBUTE)
        if attribute is None:
            raise ModelFileError(f"not a teeboost export (no {ATTRIBUTE!r} attribute): its categories are unknown")
        named = json.loads(attribute)
        cats = learner["gradient_booster"]["model"].get("cats", {"enc": []})
        vocabularies = {f: Vocabulary(tuple(e["categories"]), e["other"] is not None) for f, e in named.items()}
        for feature in named:
            if feature not in features:
                raise ModelFileError(f"categorical feature {feature!r} is not a feature of the model")
            given = _decoded(cats, features.index(feature)) if len(cats["enc"]) == len(features) else None
            if given != _given_names(named[feature]):
                raise ModelFileError(f"the model's XGBoost categories of {feature!r} ({given}) are not teeboost's "
                                     f"({_given_names(named[feature])}): the model was edited; export it again")
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise ModelFileError(f"malformed exported model: {exc!r}") from None
    if not isinstance(frame, pd.DataFrame):
        raise DataError(f"recode needs a pandas DataFrame, got {type(frame).__name__}")
    missing = [f for f in features if f not in frame.columns]
    if missing:
        raise DataError(f"the exported model needs column(s) {', '.join(map(repr, missing))}")
    data = PartyData.from_frame(frame[features], name="export", source="recode",
                                categorical=[f for f in features if f in named])
    coded = data.conform(features, vocabularies, "the exported model")
    columns: dict[str, Any] = {}
    for j, feature in enumerate(features):
        values = coded.features[:, j]
        if feature not in named:
            columns[feature] = values
            continue
        codes = np.where(np.isnan(values), -1, values).astype(np.int64)
        columns[feature] = pd.Categorical.from_codes(codes, categories=_given_names(named[feature]))
    return pd.DataFrame(columns, index=frame.index)
