"""What one party brings to the federation: its feature columns, row ids, maybe the label.

All checks of user data happen here, before any training or writing starts, and every
error names the file (or party), the column and the offending value. Row ids are compared
as strings, so "0042" in one file and "0042" in another match however each was typed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import DataError

__all__ = ["PartyData", "read_csv", "split_columns", "align_parties", "train_test_rows"]


def read_csv(path: str | Path, *, id_column: str | None = None) -> pd.DataFrame:
    """Read a CSV with ``NA``/empty as missing; ids are kept as text."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    try:
        frame = pd.read_csv(path, dtype={id_column: str} if id_column else None,
                            keep_default_na=True)
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: the file is empty") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not a readable CSV file ({exc})") from None
    return frame


def _numeric_column(column: pd.Series, source: str) -> np.ndarray:
    """Column -> float64; names the first value that is not a number. Infinities are
    refused (they are almost always a division by zero upstream); finite values of any
    magnitude are fine, since bins are ranks and thresholds are data values."""
    if pd.api.types.is_bool_dtype(column):
        return column.to_numpy(dtype=np.float64)
    if pd.api.types.is_numeric_dtype(column):
        values = column.to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        converted = pd.to_numeric(column, errors="coerce")
        bad = converted.isna() & column.notna()
        if bad.any():
            position = int(np.flatnonzero(bad.to_numpy())[0])
            raise DataError(
                f"{source}: column {column.name!r} has non-numeric value "
                f"{column.iloc[position]!r} in data row {position + 1}"
            )
        values = converted.to_numpy(dtype=np.float64, na_value=np.nan)
    infinite = np.isinf(values)
    if infinite.any():
        position = int(np.flatnonzero(infinite)[0])
        raise DataError(f"{source}: column {column.name!r} has infinite value {values[position]} in data row "
                        f"{position + 1} (leave the cell empty if the value is missing)")
    return values


def _same_number_hint(mine: np.ndarray, theirs: np.ndarray) -> str:
    """Ids are text; say so when two parties wrote the same number differently ('7', '007', '7.0')."""
    def as_number(text):
        try:
            return float(text)
        except ValueError:
            return None

    numbers = {as_number(t): t for t in theirs[:10_000]}
    for text in mine[:10_000]:
        number = as_number(text)
        if number is not None and number in numbers:
            return (f"; ids are compared as text, and {str(text)!r} here and {str(numbers[number])!r} at the active party "
                    "are the same number written differently: write ids the same way in every party's file")
    return ""


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

    @property
    def n_rows(self) -> int:
        return self.features.shape[0]

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
        check_constant: bool = True,
    ) -> "PartyData":
        source = source or f"party {name!r}"
        if frame.shape[0] == 0:
            raise DataError(f"{source}: no data rows")
        columns = [str(c) for c in frame.columns]
        for role, column in (("id", id_column), ("label", label)):
            if column is not None and column not in columns:
                raise DataError(
                    f"{source}: {role} column {column!r} not found (columns: {', '.join(columns)})"
                )
        if require_label and label is None:
            raise DataError(f"{source}: the active party needs a label column")
        feature_names = [c for c in columns if c not in (id_column, label)]
        if not feature_names:
            raise DataError(f"{source}: no feature columns besides the id and label columns")
        if len(set(feature_names)) != len(feature_names):
            raise DataError(f"{source}: duplicate column names")
        frame = frame.copy()
        frame.columns = columns
        features = np.column_stack([_numeric_column(frame[c], source) for c in feature_names])
        if check_constant:
            for j, column in enumerate(feature_names):
                present = features[~np.isnan(features[:, j]), j]
                if present.size == 0:
                    raise DataError(f"{source}: column {column!r} is empty (every value is missing); drop it")
                if present.min() == present.max():
                    raise DataError(
                        f"{source}: column {column!r} is constant ({present[0]:g} in every row "
                        "that has a value); it cannot be split on, drop it"
                    )
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
        return cls(name, source, features, tuple(feature_names), ids, labels, label)

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
    ) -> "PartyData":
        frame = read_csv(path, id_column=id_column)
        return cls.from_frame(frame, id_column=id_column, label=label, name=name,
                              source=str(path), require_label=require_label)

    def take(self, rows: np.ndarray) -> "PartyData":
        """The same party restricted to ``rows`` (in that order)."""
        return replace(
            self,
            features=self.features[rows],
            ids=None if self.ids is None else self.ids[rows],
            labels=None if self.labels is None else self.labels[rows],
        )


def split_columns(
    frame: pd.DataFrame,
    passive_columns: list[list[str]],
    *,
    label: str,
    id_column: str | None = None,
    source: str = "<DataFrame>",
) -> tuple[PartyData, list[PartyData]]:
    """One joined table -> the active party (label + remaining columns) and passive parties."""
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
            if column in (label, id_column):
                raise DataError(f"{source}: column {column!r} is the label or id and cannot be a passive feature")
            if column in taken:
                raise DataError(f"{source}: column {column!r} is assigned to passive parties {taken[column]} and {index}")
            taken[column] = index
    keep = [id_column] if id_column else []
    active_columns = [c for c in columns if c not in taken]
    active = PartyData.from_frame(frame[active_columns], id_column=id_column, label=label,
                                  name="active", source=f"{source} (active party)", require_label=True)
    passives = [
        PartyData.from_frame(frame[keep + group], id_column=id_column, name=f"passive-{i}",
                             source=f"{source} (passive party {i})")
        for i, group in enumerate(passive_columns, start=1)
    ]
    return active, passives


def align_parties(active: PartyData, passives: list[PartyData]) -> list[PartyData]:
    """Reorder every passive party's rows to the active party's id order.

    All parties must hold exactly the same ids (private set intersection, which relaxes
    this, runs before this step in a deployment). Without id columns, rows align by position.
    """
    aligned = []
    for party in passives:
        if (active.ids is None) != (party.ids is None):
            raise DataError(
                f"{party.source}: either every party has an id column or none does "
                f"(active: {'yes' if active.ids is not None else 'no'}, this party: "
                f"{'yes' if party.ids is not None else 'no'})"
            )
        if active.ids is None:
            if party.n_rows != active.n_rows:
                raise DataError(
                    f"{party.source}: {party.n_rows} rows, but the active party has {active.n_rows} "
                    "(without id columns rows are matched by position)"
                )
            aligned.append(party)
            continue
        position = pd.Index(party.ids).get_indexer(active.ids)
        unknown_here = active.ids[position < 0]
        extra_here = np.setdiff1d(party.ids.astype(str), active.ids.astype(str))
        if unknown_here.size or extra_here.size:
            examples = [*unknown_here[:2].tolist(), *extra_here[:2].tolist()]
            raise DataError(
                f"{party.source}: ids do not match the active party's: {unknown_here.size} active id(s) "
                f"missing here and {extra_here.size} id(s) here unknown to the active party "
                f"(e.g. {', '.join(repr(e) for e in examples)})"
                + _same_number_hint(extra_here, unknown_here)
            )
        aligned.append(party.take(position))
    return aligned


def train_test_rows(n_rows: int, test_size: float, random_state: int) -> tuple[np.ndarray, np.ndarray]:
    """Random held-out split of aligned row positions (sorted within each part)."""
    if not 0.0 <= test_size < 1.0:
        raise DataError(f"test_size={test_size} must be in [0, 1)")
    rng = np.random.default_rng([random_state, 0x7E57])
    order = rng.permutation(n_rows)
    n_test = int(round(n_rows * test_size))
    if test_size > 0 and (n_test == 0 or n_test == n_rows):
        raise DataError(f"test_size={test_size} leaves no rows to train or test on ({n_rows} rows)")
    return np.sort(order[n_test:]), np.sort(order[:n_test])
