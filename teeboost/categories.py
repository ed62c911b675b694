"""Categorical columns: text categories -> stable integer codes every protocol can bin.

A party's categorical column is kept as its distinct levels plus a level index per row, so it
can be coded again with another vocabulary (the model's, at prediction). The vocabulary
fitted at training keeps the most frequent categories, each with its own code, up to a cap;
the rest share one "other" code, and so does a category first seen at prediction (or, when
training had no rare categories, it counts as missing). Only the owning party ever holds a
vocabulary: other parties see bins and masks, never category names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .core.split import MAX_CATEGORY_BINS
from .errors import DataError, ModelFileError

__all__ = ["CategoricalColumn", "Vocabulary", "MAX_CATEGORIES", "number_text"]

#: Codes per categorical feature: the most frequent categories and, when there are more, "other".
MAX_CATEGORIES = MAX_CATEGORY_BINS


def number_text(value: float) -> str:
    """How a number forced to be a category is named: '3' for 3.0, else its shortest repr."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


@dataclass(frozen=True)
class CategoricalColumn:
    """One column's distinct categories (sorted text) and each row's index into them (-1: missing)."""

    levels: np.ndarray  # object array of str
    index: np.ndarray  # int32 per row

    @classmethod
    def from_series(cls, column: pd.Series) -> "CategoricalColumn":
        present = column.notna().to_numpy()
        if pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column):
            text = pd.Series([number_text(v) if ok else None for v, ok in zip(column.to_numpy(), present)],
                             dtype=object)
        else:
            text = column.astype(object).where(column.notna(), None).map(
                lambda v: None if v is None else str(v).strip())
        codes, levels = pd.factorize(text, sort=True, use_na_sentinel=True)
        return cls(np.asarray(levels, dtype=object), codes.astype(np.int32))

    def take(self, rows: np.ndarray) -> "CategoricalColumn":
        return CategoricalColumn(self.levels, self.index[rows])

    def counts(self) -> np.ndarray:
        present = self.index[self.index >= 0]
        return np.bincount(present, minlength=self.levels.size)


@dataclass(frozen=True)
class Vocabulary:
    """Category names in code order; with ``other``, code ``len(names)`` is every other category."""

    names: tuple[str, ...]
    other: bool

    @classmethod
    def fit(cls, column: CategoricalColumn, cap: int = MAX_CATEGORIES) -> "Vocabulary":
        counts = column.counts()
        order = sorted(range(column.levels.size), key=lambda i: (-counts[i], column.levels[i]))
        order = [i for i in order if counts[i] > 0]
        if len(order) <= cap:
            return cls(tuple(str(column.levels[i]) for i in order), False)
        return cls(tuple(str(column.levels[i]) for i in order[: cap - 1]), True)

    @property
    def n_codes(self) -> int:
        return len(self.names) + self.other

    def codes(self, column: CategoricalColumn) -> np.ndarray:
        """float64 code per row: NaN for missing, the "other" code (or NaN) for unknown categories.
        A name that is a number also matches that number written another way ('2.0' is '2')."""
        position = {name: i for i, name in enumerate(self.names)}
        as_number = {_canonical_number(name): i for i, name in enumerate(self.names) if _canonical_number(name)}
        unknown = float(len(self.names)) if self.other else np.nan
        lookup = np.array([position.get(str(level), as_number.get(_canonical_number(str(level)), unknown))
                           for level in column.levels] + [np.nan], dtype=np.float64)
        return lookup[column.index]  # index -1 picks the trailing NaN

    def text_only_names(self) -> list[str]:
        """Names that read as numbers would lose ('01', '1.50'): such a column must be read as text."""
        return [name for name in self.names if _canonical_number(name) and _canonical_number(name) != name]

    def describe(self, mask: int) -> list[str]:
        """Names of the categories a split's code mask sends left (for people reading a model)."""
        names = [name for code, name in enumerate(self.names) if (mask >> code) & 1]
        if self.other and (mask >> len(self.names)) & 1:
            names.append("<other>")
        return names

    def to_dict(self) -> dict[str, Any]:
        return {"categories": list(self.names), "other": self.other}

    @classmethod
    def from_dict(cls, data: Any, feature: str) -> "Vocabulary":
        try:
            names = tuple(str(n) for n in data["categories"])
            other = bool(data["other"])
        except (KeyError, TypeError) as exc:
            raise ModelFileError(f"malformed categories of feature {feature!r}: {exc}") from None
        if len(set(names)) != len(names) or len(names) + other > MAX_CATEGORIES:
            raise ModelFileError(f"categories of feature {feature!r} repeat or exceed {MAX_CATEGORIES}")
        return cls(names, other)


def _canonical_number(text: str) -> str:
    """'2.0' -> '2', '01' -> '1'; '' for text that is not a finite number."""
    try:
        value = float(text)
    except ValueError:
        return ""
    return number_text(value) if np.isfinite(value) else ""


def check_vocabulary_size(name: str, column: CategoricalColumn, source: str, n_rows: int) -> None:
    """A text column with a new value in nearly every row is an identifier, not a category."""
    if n_rows >= 100 and column.levels.size >= 0.9 * n_rows:
        raise DataError(f"{source}: column {name!r} has {column.levels.size} distinct text values in {n_rows} rows: "
                        f"it looks like an identifier, not a category (pass it as the id column: --id {name}, "
                       f"id_column={name!r}; or drop it)")
