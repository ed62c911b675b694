"""One joined table, as scikit-learn hands it over, cut into the parties' columns.

``cross_val_score``, ``GridSearchCV`` and ``Pipeline`` pass an estimator one table ``X`` and
one label vector ``y``. A federation in one process (a study, a test, a tuning run before
deployment) cuts that table by a column-to-party mapping: each passive party named with its
columns, the active party holding the label and every column no one else claimed.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from .data import PartyData
from .errors import DataError

__all__ = ["JoinedLayout", "as_frame"]

ACTIVE = "active"


def as_frame(X: Any, what: str = "X") -> pd.DataFrame:
    """A DataFrame of ``X`` (DataFrame, 2-D array or nested lists); array columns are named
    by position, as scikit-learn does for arrays without names."""
    if isinstance(X, pd.DataFrame):
        return X
    if isinstance(X, pd.Series):
        raise DataError(f"{what} is one column (a Series); give a table with one row per sample")
    if hasattr(X, "tocsr") or hasattr(X, "toarray"):
        raise DataError(f"{what} is a sparse matrix; sparse input is not supported, because its absent entries "
                        "would be read as zeros where XGBoost reads them as missing: pass X.toarray() "
                        "(zeros) or a DataFrame with NaN for missing")
    try:
        array = np.asarray(X)
    except Exception as exc:  # noqa: BLE001  (ragged lists and the like)
        raise DataError(f"{what} is not a table: {exc}") from None
    if array.ndim != 2:
        raise DataError(f"{what} must be 2-dimensional (rows x columns), got shape {array.shape}. Reshape your "
                        "data: X.reshape(-1, 1) for one feature, X.reshape(1, -1) for one sample")
    if array.dtype.kind == "c":
        raise DataError(f"{what} holds complex numbers: Complex data not supported")
    if array.shape[1] == 0:
        raise DataError(f"{what} has 0 feature(s) (shape={array.shape}) while a minimum of 1 is required.")
    if array.dtype == object:
        for value in array.ravel():
            if not (value is None or isinstance(value, (str, numbers.Number))):
                raise TypeError(f"{what} holds a {type(value).__name__} value: each cell's argument must be "
                                "a string or a number")
    return pd.DataFrame(array, columns=[str(i) for i in range(array.shape[1])])


@dataclass(frozen=True)
class JoinedLayout:
    """Which columns of the joined table each party holds (the active party first)."""

    columns: tuple[str, ...]  # of the joined table, in its order
    parties: tuple[tuple[str, tuple[str, ...]], ...]  # (name, columns) per party, active first

    @classmethod
    def of(cls, columns: Sequence[Any], parties: Mapping[str, Sequence[Any]] | None) -> "JoinedLayout":
        """``parties`` maps party name -> its columns. The active party (``"active"``, or the
        first name if every column is claimed) keeps the unclaimed columns. None: one party."""
        names = [str(c) for c in columns]
        if len(set(names)) != len(names):
            raise DataError("X has duplicate column names")
        if parties is None:
            return cls(tuple(names), ((ACTIVE, tuple(names)),))
        if not isinstance(parties, Mapping) or not parties:
            raise DataError(f"parties={parties!r} must map each party's name to its columns")
        claimed: dict[str, str] = {}
        groups: list[tuple[str, tuple[str, ...]]] = []
        for party, held in parties.items():
            if isinstance(held, (str, bytes)) or not isinstance(held, Sequence) or not held:
                raise DataError(f"party {party!r} must be given a non-empty list of columns, got {held!r}")
            group = []
            for column in held:
                column = str(column)
                if column not in names:
                    raise DataError(f"party {party!r} holds column {column!r}, which X does not have "
                                    f"(columns: {', '.join(names)})")
                if column in claimed:
                    raise DataError(f"column {column!r} is given to both {claimed[column]!r} and {party!r}")
                claimed[column] = str(party)
                group.append(column)
            groups.append((str(party), tuple(group)))
        rest = tuple(c for c in names if c not in claimed)
        named = dict(groups)
        if ACTIVE in named:
            if rest:
                raise DataError(f"column(s) {', '.join(rest)} belong to no party; give them to one, "
                                f"or leave {ACTIVE!r} out so that it keeps the rest")
            active = (ACTIVE, named[ACTIVE])
            passives = [g for g in groups if g[0] != ACTIVE]
        elif rest:
            active, passives = (ACTIVE, rest), groups
        else:
            active, passives = groups[0], groups[1:]
        return cls(tuple(names), (active, *passives))

    @property
    def active_name(self) -> str:
        return self.parties[0][0]

    def split(self, X: pd.DataFrame, y: np.ndarray | None, what: str = "X",
              estimator: str = "the model") -> tuple[PartyData, list[PartyData]]:
        """Each party's PartyData over the same rows (aligned by position); ``y`` goes to the
        active party."""
        frame = self.check_columns(X, what, estimator)
        label = _free_name("label", frame.columns)
        parts = []
        for index, (party, held) in enumerate(self.parties):
            columns = frame.loc[:, list(held)]
            if index == 0 and y is not None:
                columns = columns.assign(**{label: np.asarray(y)})
            parts.append(PartyData.from_frame(
                columns.reset_index(drop=True), label=label if index == 0 and y is not None else None,
                name=party, source=f"{what} (party {party!r})", require_label=index == 0 and y is not None))
        return parts[0], parts[1:]

    def check_columns(self, X: Any, what: str, estimator: str = "the model") -> pd.DataFrame:
        frame = as_frame(X, what)
        names = [str(c) for c in frame.columns]
        if isinstance(X, pd.DataFrame):
            missing = [c for c in self.columns if c not in names]
            if missing:
                raise DataError(f"{what} lacks column(s) {', '.join(missing)} the model was fitted with")
            frame = frame.set_axis(names, axis=1)
        elif len(names) != len(self.columns):
            raise DataError(f"{what} has {len(names)} features, but {estimator} is expecting {len(self.columns)} "
                            "features as input")
        else:
            frame = frame.set_axis(list(self.columns), axis=1)
        return frame


def _free_name(base: str, taken) -> str:
    taken = {str(t) for t in taken}
    name = base
    while name in taken:
        name = f"_{name}"
    return name
