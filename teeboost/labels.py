"""The active party's label column -> numeric targets, the objective and the class list."""

from __future__ import annotations

from typing import Any

import numpy as np

from .core.loss import infer_objective
from .data import PartyData
from .errors import DataError

__all__ = ["encode_labels"]


def _plain(value: Any) -> Any:
    """numpy scalar -> JSON-friendly Python value (ints stay ints)."""
    if isinstance(value, (np.floating, float)):
        return int(value) if float(value).is_integer() else float(value)
    if isinstance(value, np.integer):
        return int(value)
    return str(value)


def encode_labels(party: PartyData, objective: str | None) -> tuple[np.ndarray, list | None, str]:
    labels = party.labels
    if labels is None:
        raise DataError(f"{party.source}: the active party has no label column")
    numeric = labels.dtype != object
    column = party.label_name
    distinct = np.unique(labels)
    if distinct.size < 2:
        raise DataError(
            f"{party.source}: label column {column!r} has a single value ({_plain(distinct[0])!r}); "
            "there is nothing to learn"
        )
    if objective is None:
        objective = infer_objective(labels) if numeric else ("binary" if distinct.size == 2 else "multiclass")
    if objective == "regression":
        if not numeric:
            raise DataError(f"{party.source}: label column {column!r} is text; regression needs numbers")
        return labels.astype(np.float64), None, objective
    if objective == "binary" and distinct.size != 2:
        raise DataError(
            f"{party.source}: objective 'binary' needs 2 label values in {column!r}, found {distinct.size}"
        )
    classes = [_plain(v) for v in distinct]
    y = np.searchsorted(distinct, labels).astype(np.float64)
    return y, classes, objective
