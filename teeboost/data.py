"""What one party brings to the federation: its feature columns, row ids, maybe the label.

All checks of a party's own data happen here, before any training or writing starts, and
every error names the file (or party), the column and the offending value. Row ids are kept
as strings, so "0042" in one file and "0042" in another match however each was typed. Matching
the parties' rows is ``teeboost.row_matching``; which columns training uses,
``teeboost.training_columns``.
"""

from __future__ import annotations

import csv
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from .categories import CategoricalColumn, Vocabulary, check_vocabulary_size
from .config import DataWarning, user_stacklevel
from .errors import DataError
from .number_format import NumberFormat, apply_number_format, misread_numbers

__all__ = ["PartyData", "DataWarning", "read_csv", "check_weights", "split_columns"]


def read_csv(path: str | Path, *, id_column: str | None = None, sep: str | None = None,
             text_columns: list[str] | tuple[str, ...] = (),
             number_format: NumberFormat = NumberFormat()) -> pd.DataFrame:
    """Read a CSV with ``NA``/empty as missing; ids (and ``text_columns``: a model's categorical
    features, whose '01' must not become 1) are kept as text. Without ``sep`` the delimiter
    (comma, semicolon, tab or pipe) is sniffed from the first lines. With a ``number_format``
    (decimal comma, thousands separator) every other column is read as text first and taken
    as numbers only where every value is written that way: pandas' own ``thousands`` would
    read "1.5" as 15."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    if sep is None:
        sep = sniff_separator(path)
    try:
        text = {name: str for name in [*([id_column] if id_column else []), *text_columns]}
        frame = pd.read_csv(path, sep=sep, dtype=str if not number_format.plain else text or None,
                            keep_default_na=True)
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: the file is empty") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not a readable CSV file ({exc}); if its columns are separated by something "
                        "other than a comma, give --sep") from None
    if frame.shape[1] == 1 and frame.shape[0] > 0:
        (only,) = frame.columns
        for other in (";", "\t", "|"):
            if other in str(only):
                raise DataError(f"{path}: one column {str(only)[:60]!r} was read; the file seems separated by "
                                f"{other!r}: give --sep {other!r}")
    if not number_format.plain:
        frame = apply_number_format(frame, number_format, set(text))
        for name in frame.columns:  # plain numbers (a label of 0 and 1) as pandas would have read them
            if name not in text and not pd.api.types.is_numeric_dtype(frame[name]):
                numbers = pd.to_numeric(frame[name], errors="coerce")
                if numbers.notna().sum() == frame[name].notna().sum():
                    frame[name] = numbers
    return frame


def read_csv_header(path: str | Path, sep: str | None = None) -> list[str]:
    """The column names of a CSV file."""
    path = Path(path)
    try:
        return [str(c) for c in pd.read_csv(path, sep=sep or sniff_separator(path), nrows=0).columns]
    except (OSError, pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError):
        return []


def sniff_separator(path: Path) -> str:
    """The delimiter of a CSV file, from its first lines: the candidate that splits every
    line into the same number (> 1) of fields, preferring the comma."""
    if path.suffix in (".gz", ".bz2", ".xz", ".zip", ".zst"):
        return ","  # compressed: pandas reads it; the comma is the convention
    with open(path, encoding="utf-8", errors="replace") as handle:
        lines = [line.rstrip("\r\n") for _, line in zip(range(20), handle) if line.strip()]
    if not lines:
        return ","
    best, best_fields = ",", 1
    for candidate in (",", ";", "\t", "|"):
        fields = {len(_split_line(line, candidate)) for line in lines}
        if len(fields) == 1 and (n := fields.pop()) > best_fields:
            best, best_fields = candidate, n
    return best


def _split_line(line: str, separator: str) -> list[str]:
    """Fields of one CSV line, quotes respected."""
    return next(csv.reader([line], delimiter=separator))


def _infinite_check(values: np.ndarray, column: pd.Series, source: str) -> np.ndarray:
    """Infinities are refused (they are almost always a division by zero upstream); finite
    values of any magnitude are fine, since bins are ranks and thresholds are data values."""
    infinite = np.isinf(values)
    if infinite.any():
        position = int(np.flatnonzero(infinite)[0])
        raise DataError(f"{source}: column {column.name!r} has infinite value {values[position]} in data row "
                        f"{position + 1} (leave the cell empty if the value is missing)")
    return values


def _canonical_number_text(text: str) -> bool:
    try:
        return bool(np.isfinite(float(text)))
    except ValueError:
        return False


def _warn_if_mostly_unknown(party: "PartyData", name: str, column: CategoricalColumn, codes: np.ndarray,
                            vocabulary: Vocabulary) -> None:
    """Categories a model never saw count as missing (or "other"): say so when they are most of them."""
    if vocabulary.other:  # rare categories of training share that code too: nothing to tell apart
        return
    present = column.index >= 0
    unknown = present & np.isnan(codes)
    if present.sum() >= 5 and unknown.sum() > present.sum() / 2:
        warnings.warn(f"{party.source}: {int(unknown.sum())} of {int(present.sum())} values of column {name!r} are "
                      f"categories the model never saw (e.g. {str(column.levels[column.index[unknown][0]])!r}); "
                      "they are scored as missing", DataWarning, stacklevel=user_stacklevel())


def _is_text(column: pd.Series) -> bool:
    return not (pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column)
                or pd.api.types.is_datetime64_any_dtype(column))


def _looks_like_dates(text: pd.Series) -> bool:
    """Text such as '2024-01-31' or '31/01/2024 10:00' that pandas reads as dates."""
    sample = text.dropna().astype(str).head(200)
    if sample.empty or not sample.str.contains(r"\d[-/.:]\d", regex=True).all():
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parsed = pd.to_datetime(sample, errors="coerce", format="mixed")
    return bool(parsed.notna().all())


def _read_column(column: pd.Series, source: str, categorical: bool) -> np.ndarray | CategoricalColumn:
    """One feature column -> float64 values, or a categorical column. Text is a category
    unless every value is a number; a column of numbers with a stray word or two is refused
    (more likely a typo than categories); dates are refused with a hint."""
    name = column.name
    if pd.api.types.is_datetime64_any_dtype(column) or pd.api.types.is_timedelta64_dtype(column):
        raise DataError(f"{source}: column {name!r} holds dates or times; convert it to a number "
                        "(e.g. days since some date, or the month) or drop it")
    if categorical or isinstance(column.dtype, pd.CategoricalDtype):
        return CategoricalColumn.from_series(column)
    if pd.api.types.is_bool_dtype(column):
        return column.to_numpy(dtype=np.float64)
    if pd.api.types.is_numeric_dtype(column):
        return _infinite_check(column.to_numpy(dtype=np.float64, na_value=np.nan), column, source)
    present = column.notna()
    text = column[present].astype(str).str.strip()
    converted = pd.to_numeric(text, errors="coerce")
    bad = converted.isna() & (text != "")
    if not bad.any():
        values = pd.to_numeric(column.where(present & (column.astype(str).str.strip() != "")), errors="coerce")
        return _infinite_check(values.to_numpy(dtype=np.float64, na_value=np.nan), column, source)
    misread = misread_numbers(text)
    if misread is not None:  # never silently categories: say which option reads them
        example, formats = misread
        written = ", or with ".join(f.describe() for f in formats[:2])
        options = ", or ".join(f.options() for f in formats[:2])
        raise DataError(f"{source}: column {name!r} holds numbers written with {written} (e.g. {example!r}), "
                        f"which would be read as text categories: give {options}; if they are categories, declare "
                        f"the column categorical (--categorical {name}, categorical=[{name!r}])")
    if _looks_like_dates(text):
        example = text[bad].iloc[0]
        raise DataError(f"{source}: column {name!r} holds dates (e.g. {example!r}); convert it to a number "
                        "(e.g. days since some date, or the month) or drop it")
    if bad.sum() <= max(1, 0.01 * text.size) and text.size >= 20:
        stripped = column.astype(str).str.strip()
        words = column.notna() & pd.to_numeric(stripped, errors="coerce").isna() & (stripped != "")
        position = int(np.flatnonzero(words.to_numpy())[0])
        raise DataError(
            f"{source}: column {name!r} holds numbers but also non-numeric value {column.iloc[position]!r} "
            f"in data row {position + 1}; fix the value, or declare the column categorical "
            f"(--categorical {name}, categorical=[{name!r}])"
        )
    return CategoricalColumn.from_series(column)


def check_weights(weights, n_rows: int, source: str, what: str = "sample_weight") -> np.ndarray:
    """One finite, non-negative weight per row, not all zero -> float64; errors name the
    count, or the value and its (1-based) data row."""
    try:
        values = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(f"{source}: {what} must be numbers") from None
    if values.ndim != 1 or values.size != n_rows:
        raise DataError(f"{source}: {what} has {values.size} value(s) for {n_rows} row(s); give one weight per row")
    bad = np.flatnonzero(~np.isfinite(values) | (values < 0))
    if bad.size:
        raise DataError(f"{source}: {what} has {'negative' if values[bad[0]] < 0 else 'non-finite'} value "
                        f"{values[bad[0]]} in data row {bad[0] + 1}; weights must be finite and >= 0")
    if not np.any(values > 0):
        raise DataError(f"{source}: every {what} is zero; at least one row must count")
    return values


@dataclass(frozen=True)
class PartyData:
    """Validated columns of one party (rows in the party's own order until aligned)."""

    name: str
    source: str
    features: np.ndarray  # float64 (n_rows, n_features), NaN = missing
    feature_names: tuple[str, ...]
    ids: np.ndarray | None = None  # str ids, unique
    labels: np.ndarray | None = None  # raw label values (numeric or text)
    label_name: str | None = None
    # categorical features: their text (to code them again) and the vocabulary coding them
    # in ``features`` (category codes 0, 1, ... as floats, most frequent first)
    categorical: dict[str, CategoricalColumn] = field(default_factory=dict, compare=False)
    vocabularies: dict[str, Vocabulary] = field(default_factory=dict, compare=False)
    # the active party's sample weights (one per row, float64), carried along when rows are
    # taken or matched; they scale gradients and never leave the party in the clear
    weights: np.ndarray | None = field(default=None, compare=False)

    @property
    def n_rows(self) -> int:
        return self.features.shape[0]

    @property
    def categorical_mask(self) -> np.ndarray:
        """Per feature: category codes (True) or numbers."""
        return np.array([n in self.vocabularies for n in self.feature_names], dtype=bool)

    def with_vocabularies(self, vocabularies: dict[str, Vocabulary]) -> "PartyData":
        """The same rows with the named features coded by these vocabularies (a model's, so
        that prediction codes categories as training did); other features unchanged."""
        if not vocabularies:
            return self
        features = self.features.copy()
        categorical = dict(self.categorical)
        for j, name in enumerate(self.feature_names):
            if name not in vocabularies:
                continue
            column = categorical.get(name)
            if column is None:  # read as numbers here: name them as training named numbers
                lost = vocabularies[name].text_only_names()
                if lost:
                    raise DataError(f"{self.source}: column {name!r} was read as numbers, but its categories include "
                                    f"{lost[0]!r}, which numbers cannot spell: read it as text "
                                    f"(categorical=[{name!r}], or dtype=str)")
                column = CategoricalColumn.from_series(pd.Series(self.features[:, j], name=name))
                categorical[name] = column
            features[:, j] = vocabularies[name].codes(column)
            _warn_if_mostly_unknown(self, name, column, features[:, j], vocabularies[name])
        merged = {**{n: v for n, v in self.vocabularies.items() if n not in vocabularies},
                  **{n: v for n, v in vocabularies.items() if n in self.feature_names}}
        return replace(self, features=features, categorical=categorical, vocabularies=merged)

    def conform(self, feature_names: list[str], vocabularies: dict[str, Vocabulary], who: str) -> "PartyData":
        """These rows as a model expects them: its features, by name and in its order, with
        categories coded by its vocabularies (extra columns are ignored)."""
        missing = [n for n in feature_names if n not in self.feature_names]
        if missing:
            raise DataError(f"{self.source}: {who} needs column(s) {', '.join(map(repr, missing))}")
        for name in feature_names:
            if name not in vocabularies and name in self.vocabularies:
                column = self.categorical[name]
                words = [str(v) for v in column.levels if not _canonical_number_text(str(v))]
                raise DataError(f"{self.source}: column {name!r} holds text (e.g. {(words or list(column.levels))[0]!r}), but {who} "
                                "learnt it as numbers; fix the value (leave the cell empty if it is missing)")
        return self.with_vocabularies(vocabularies).select(list(feature_names))

    def select(self, names: list[str]) -> "PartyData":
        """Only the named features, in that order."""
        position = {n: i for i, n in enumerate(self.feature_names)}
        return replace(self, features=self.features[:, [position[n] for n in names]], feature_names=tuple(names),
                       categorical={n: c for n, c in self.categorical.items() if n in names},
                       vocabularies={n: v for n, v in self.vocabularies.items() if n in names})

    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        *,
        id_column: str | None = None,
        label: str | None = None,
        name: str = "party",
        source: str | None = None,
        require_label: bool = False,
        categorical: list[str] | tuple[str, ...] = (),
        weight_column: str | None = None,
    ) -> "PartyData":
        """Validated columns of a DataFrame. Text columns (and pandas categoricals, and the
        columns named in ``categorical``) become categorical features; constant columns are
        kept here and dropped, with a warning, only when training (one row is constant).
        ``weight_column``: the active party's sample weights, taken out of the features."""
        source = source or f"party {name!r}"
        if frame.shape[0] == 0:
            raise DataError(f"{source}: no data rows")
        columns = [str(c) for c in frame.columns]
        for role, column in (("id", id_column), ("label", label), ("weight", weight_column)):
            if column is not None and column not in columns:
                raise DataError(
                    f"{source}: {role} column {column!r} not found (columns: {', '.join(columns)})"
                )
        if weight_column is not None and weight_column in (id_column, label):
            raise DataError(f"{source}: weight column {weight_column!r} is also the id or label column")
        if require_label and label is None:
            raise DataError(f"{source}: the active party needs a label column")
        feature_names = [c for c in columns if c not in (id_column, label, weight_column)]
        if not feature_names:
            raise DataError(f"{source}: no feature columns besides the id and label columns")
        if len(set(feature_names)) != len(feature_names):
            raise DataError(f"{source}: duplicate column names")
        unknown = [c for c in categorical if c not in feature_names]
        if unknown:
            raise DataError(f"{source}: categorical column(s) {', '.join(map(repr, unknown))} not among the "
                            f"feature columns ({', '.join(feature_names)})")
        frame = frame.copy()
        frame.columns = columns
        features = np.empty((frame.shape[0], len(feature_names)), dtype=np.float64)
        text_columns: dict[str, CategoricalColumn] = {}
        vocabularies: dict[str, Vocabulary] = {}
        for j, column in enumerate(feature_names):
            values = _read_column(frame[column], source, column in categorical)
            if not isinstance(values, CategoricalColumn) and _is_text(frame[column]):
                text_columns[column] = CategoricalColumn.from_series(frame[column])  # its text, should a
                # model hold the column as categories ('01' is not '1')
            if isinstance(values, CategoricalColumn):
                if column not in categorical:
                    check_vocabulary_size(column, values, source, frame.shape[0])
                text_columns[column] = values
                vocabularies[column] = Vocabulary.fit(values)
                values = vocabularies[column].codes(values)
            features[:, j] = values
        ids = None
        if id_column is not None:
            raw_ids = frame[id_column]
            if raw_ids.isna().any():
                position = int(np.flatnonzero(raw_ids.isna().to_numpy())[0])
                raise DataError(f"{source}: id column {id_column!r} is empty in data row {position + 1}")
            ids = raw_ids.astype(str).str.strip().to_numpy(dtype=object)
            duplicated = pd.Series(ids).duplicated()
            if duplicated.any():
                first = ids[int(np.flatnonzero(duplicated.to_numpy())[0])]
                raise DataError(
                    f"{source}: id column {id_column!r} has {int(duplicated.sum())} duplicate id(s), "
                    f"e.g. {first!r}"
                )
        labels = None
        if label is not None:
            labels = cls._check_labels(frame[label], source)
        weights = None if weight_column is None else cls._check_weight_column(frame[weight_column], source)
        return cls(name, source, features, tuple(feature_names), ids, labels, label, text_columns, vocabularies,
                   weights)

    @staticmethod
    def _check_weight_column(column: pd.Series, source: str) -> np.ndarray:
        if pd.api.types.is_bool_dtype(column) or not pd.api.types.is_numeric_dtype(column):
            numbers = pd.to_numeric(column.astype(str).str.strip(), errors="coerce")
            bad = np.flatnonzero(numbers.isna().to_numpy() & column.notna().to_numpy())
            if pd.api.types.is_bool_dtype(column) or bad.size:
                position = int(bad[0]) if bad.size else 0
                raise DataError(f"{source}: weight column {column.name!r} has non-numeric value "
                                f"{column.iloc[position]!r} in data row {position + 1}")
            column = numbers.rename(column.name)
        values = column.to_numpy(dtype=np.float64, na_value=np.nan)
        missing = np.flatnonzero(np.isnan(values))
        if missing.size:
            raise DataError(f"{source}: weight column {column.name!r} is empty in data row {missing[0] + 1}")
        return check_weights(values, values.size, source, f"weight column {column.name!r}")

    @staticmethod
    def _check_labels(column: pd.Series, source: str) -> np.ndarray:
        missing = column.isna().to_numpy()
        if missing.any():
            raise DataError(
                f"{source}: label column {column.name!r} is missing in {int(missing.sum())} row(s), "
                f"first in data row {int(np.flatnonzero(missing)[0]) + 1}"
            )
        if pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column):
            values = column.to_numpy(dtype=np.float64)
            if not np.all(np.isfinite(values)):
                position = int(np.flatnonzero(~np.isfinite(values))[0])
                raise DataError(
                    f"{source}: label column {column.name!r} has non-finite value "
                    f"{values[position]} in data row {position + 1}"
                )
            return values
        return column.astype(str).to_numpy(dtype=object)

    @classmethod
    def from_csv(
        cls,
        path: str | Path,
        *,
        id_column: str | None = None,
        label: str | None = None,
        name: str = "party",
        require_label: bool = False,
        sep: str | None = None,
        categorical: list[str] | tuple[str, ...] = (),
        weight_column: str | None = None,
    ) -> "PartyData":
        """``weight_column``: a column of sample weights (the active party's), not a feature."""
        frame = read_csv(path, id_column=id_column, sep=sep, text_columns=categorical)
        return cls.from_frame(frame, id_column=id_column, label=label, name=name, source=str(path),
                              require_label=require_label, categorical=categorical, weight_column=weight_column)

    def take(self, rows: np.ndarray) -> "PartyData":
        """The same party restricted to ``rows`` (in that order)."""
        return replace(
            self,
            features=self.features[rows],
            ids=None if self.ids is None else self.ids[rows],
            labels=None if self.labels is None else self.labels[rows],
            categorical={n: c.take(rows) for n, c in self.categorical.items()},
            weights=None if self.weights is None else self.weights[rows],
        )

    def with_weights(self, weights) -> "PartyData":
        """The same rows with these sample weights (checked: one per row, finite, >= 0, not all 0)."""
        return replace(self, weights=check_weights(weights, self.n_rows, self.source))


def split_columns(
    frame: pd.DataFrame,
    passive_columns: list[list[str]],
    *,
    label: str,
    id_column: str | None = None,
    source: str = "<DataFrame>",
    categorical: list[str] | tuple[str, ...] = (),
    weight_column: str | None = None,
) -> tuple[PartyData, list[PartyData]]:
    """One joined table -> the active party (label + remaining columns, ``weight_column`` as
    its sample weights) and passive parties."""
    columns = [str(c) for c in frame.columns]
    frame = frame.copy()
    frame.columns = columns
    if label not in columns:
        raise DataError(f"{source}: label column {label!r} not found (columns: {', '.join(columns)})")
    if id_column is not None and id_column not in columns:
        raise DataError(f"{source}: id column {id_column!r} not found (columns: {', '.join(columns)})")
    if not passive_columns:
        raise DataError(f"{source}: give at least one passive party's columns")
    taken: dict[str, int] = {}
    for index, group in enumerate(passive_columns, start=1):
        if not group:
            raise DataError(f"{source}: passive party {index} has no columns")
        for column in group:
            if column not in columns:
                raise DataError(
                    f"{source}: passive party {index} column {column!r} not found "
                    f"(columns: {', '.join(columns)})"
                )
            if column in (label, id_column, weight_column):
                raise DataError(f"{source}: column {column!r} is the label, id or weight column and cannot be a "
                                "passive feature")
            if column in taken:
                raise DataError(f"{source}: column {column!r} is assigned to passive parties {taken[column]} and {index}")
            taken[column] = index
    keep = [id_column] if id_column else []
    active_columns = [c for c in columns if c not in taken]
    active = PartyData.from_frame(frame[active_columns], id_column=id_column, label=label,
                                  name="active", source=f"{source} (active party)", require_label=True,
                                  categorical=[c for c in categorical if c in active_columns and c != label],
                                  weight_column=weight_column)
    passives = [
        PartyData.from_frame(frame[keep + group], id_column=id_column, name=f"passive-{i}",
                             source=f"{source} (passive party {i})", categorical=[c for c in categorical if c in group])
        for i, group in enumerate(passive_columns, start=1)
    ]
    return active, passives
