"""Request rows -> the matrix a scorer takes, every value checked against the model's columns.

A row is an id and ``{column: value}``. A numeric column takes a JSON number, or null for a
missing value; a categorical column takes text (or a number, naming the category written so),
or null. Categories are coded by the model's own vocabulary exactly as ``PartyData.conform``
codes a file's column (``teeboost.categories``): a category the model never saw takes its
"other" code, or counts as missing when it has none, and the row's notes say so. Nothing is
guessed: text in a numeric column is refused rather than parsed, and an absent column is an
error rather than a missing value (null says "missing"). Errors name the row's index and the
column, as ``rows[3].features.age``.

One exception: a scorer whose rows carry several parties' columns (``party_columns``) reads a
row giving none of a passive party's columns as a row that party does not hold; it is left
unscored with that reason, for the fallback policy to answer (``teeboost.serving.fallback``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..categories import CategoricalColumn, number_text
from .scorer import Scorer

__all__ = ["Encoded", "FieldProblem", "RowsRejected", "check_ids", "encode", "MAX_PROBLEMS"]

#: Problems listed in one 422 answer (the first names the field in ``detail``).
MAX_PROBLEMS = 20


@dataclass(frozen=True)
class FieldProblem:
    field: str  # "rows[3].features.age"
    message: str


class RowsRejected(Exception):
    """The request's rows do not fit the model: answered 422 with every problem (up to
    ``MAX_PROBLEMS``), the first in ``detail``."""

    def __init__(self, problems: list[FieldProblem]) -> None:
        super().__init__(f"{problems[0].field}: {problems[0].message}")
        self.problems = problems[:MAX_PROBLEMS]


@dataclass(frozen=True)
class Encoded:
    """``features``: (rows, columns) float64 in the scorer's column order, NaN = missing;
    ``unheld[i]``: why row i cannot go to the scorer (None: it can); ``notes[i]``: what was
    done with row i's values that a reader should know (unseen categories)."""

    features: np.ndarray
    unheld: list[str | None]
    notes: list[list[str]]


def check_ids(ids: list[str]) -> list[str]:
    """Ids stripped as ``PartyData`` strips them; an empty or repeated id is refused (the
    answer is matched to the request by id, and a passive party matches rows by id)."""
    problems, seen, out = [], {}, []
    for i, raw in enumerate(ids):
        text = raw.strip()
        if not text:
            problems.append(FieldProblem(f"rows[{i}].id", "is empty; every row needs an id"))
        elif text in seen:
            problems.append(FieldProblem(f"rows[{i}].id", f"{text!r} repeats rows[{seen[text]}].id; ids must be "
                                                          "unique within a request"))
        seen.setdefault(text, i)
        out.append(text)
    if problems:
        raise RowsRejected(problems)
    return out


def _kind(value) -> str:
    if isinstance(value, bool):
        return "true/false"
    return {dict: "an object", list: "a list"}.get(type(value), type(value).__name__)


def _number(value, column: str, model: str) -> float | str:
    """A numeric column's value, or what is wrong with it."""
    if value is None:
        return math.nan
    if isinstance(value, bool):
        return f"{str(value).lower()} is not a number: {model} takes {column!r} as a number (give 1 or 0)"
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:
            return f"{value} is out of range of a 64-bit float"
        if not math.isfinite(number):
            return f"{value!r} is not a finite number (give null for a missing value)"
        return number
    if isinstance(value, str):
        return (f"text {value[:40]!r}, but {model} takes {column!r} as a number (write it as a JSON number; "
                "null for a missing value)")
    return f"{_kind(value)} is not a number (a JSON number, or null for a missing value)"


def _category(value, column: str, model: str) -> str | None | tuple[str]:
    """A categorical column's value as category text (None: missing), or (what is wrong,)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip() or None  # an empty cell of a file is missing too
    if isinstance(value, bool):
        return (f"true/false is not a category of {column!r}: give the category as text",)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return (f"{value!r} is not a category (give null for a missing value)",)
        return number_text(value) if isinstance(value, float) else str(value)
    return (f"{_kind(value)} is not a category of {column!r} (text, or null for a missing value)",)


def _absent_parties(absent: set[str], scorer: Scorer) -> tuple[set[str], str | None]:
    """Absent columns left after taking out whole passive parties the row leaves out, and why
    such a row cannot be scored (None: it gives every party's columns)."""
    parties = getattr(scorer, "party_columns", None) or []
    unheld = None
    for index, (party, columns) in enumerate(parties):
        if index > 0 and columns and absent.issuperset(columns):
            absent = absent - set(columns)
            unheld = unheld or (f"the row gives none of passive party {index} ({party})'s columns: that party holds "
                                "no such row")
    return absent, unheld


def encode(ids: list[str], rows: list[dict], scorer: Scorer, *, model: str, extra_ok: bool = False) -> Encoded:
    """The rows as ``scorer`` takes them. ``extra_ok``: columns the scorer does not take are
    ignored (a fallback model reads the few it knows from rows checked against the main one)."""
    names = list(scorer.feature_names)
    position = {name: j for j, name in enumerate(names)}
    vocabularies = scorer.vocabularies
    features = np.full((len(rows), len(names)), np.nan)
    texts: dict[str, list] = {name: [None] * len(rows) for name in names if name in vocabularies}
    problems: list[FieldProblem] = []
    unheld: list[str | None] = [None] * len(rows)
    for i, values in enumerate(rows):
        if not extra_ok:
            for column in values:
                if column not in position:
                    shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
                    problems.append(FieldProblem(f"rows[{i}].features.{column}",
                                                 f"unknown column {column!r}: {model} takes {shown}"))
        absent = {name for name in names if name not in values}
        if absent and not extra_ok:
            absent, unheld[i] = _absent_parties(absent, scorer)
        for name, value in values.items():
            if name not in position:
                continue
            if name in texts:
                got = _category(value, name, model)
                if isinstance(got, tuple):
                    problems.append(FieldProblem(f"rows[{i}].features.{name}", got[0]))
                else:
                    texts[name][i] = got
            else:
                got = _number(value, name, model)
                if isinstance(got, str):
                    problems.append(FieldProblem(f"rows[{i}].features.{name}", got))
                else:
                    features[i, position[name]] = got
        for name in sorted(absent, key=position.get):  # after what the row got wrong in what it gave
            problems.append(FieldProblem(f"rows[{i}].features.{name}",
                                         f"missing column {name!r} (give null for a missing value)"))
        if len(problems) >= MAX_PROBLEMS:
            break
    if problems:
        raise RowsRejected(problems)
    notes: list[list[str]] = [[] for _ in rows]
    for name, column_texts in texts.items():
        vocabulary = vocabularies[name]
        column = CategoricalColumn.from_series(pd.Series(column_texts, dtype=object, name=name))
        codes = vocabulary.codes(column)
        features[:, position[name]] = codes
        for i, text in enumerate(column_texts):
            if text is None:
                continue
            if np.isnan(codes[i]):
                notes[i].append(f"{name}: category {text!r} was not seen in training; scored as missing")
            elif vocabulary.other and codes[i] == len(vocabulary.names):
                notes[i].append(f"{name}: category {text!r} is not among the model's {len(vocabulary.names)} "
                                "categories; scored as its 'other' category")
    return Encoded(features, unheld, notes)
