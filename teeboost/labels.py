"""The active party's label column -> numeric targets, the objective and the class list."""

from __future__ import annotations

from typing import Any

import numpy as np

from .core.loss import infer_objective
from .data import PartyData
from .errors import DataError

__all__ = ["encode_labels", "encode_with_classes", "check_targets", "CHECKED_TARGETS"]

#: Objectives whose labels have a lower bound, and what they need (XGBoost refuses the same labels).
CHECKED_TARGETS = {
    "poisson": (False, "non-negative counts"),  # (zero refused?, what the objective needs)
    "tweedie": (False, "non-negative amounts"),
    "gamma": (True, "positive amounts (> 0)"),
}


def _plain(value: Any) -> Any:
    """numpy scalar -> JSON-friendly Python value (ints stay ints)."""
    if isinstance(value, (np.floating, float)):
        return int(value) if float(value).is_integer() else float(value)
    if isinstance(value, np.integer):
        return int(value)
    return str(value)


def encode_labels(party: PartyData, objective: str | None,
                  positive_class: str | None = None) -> tuple[np.ndarray, list | None, str]:
    """Targets, classes (class k is code k) and the objective. ``positive_class``: the label
    value that is class 1 of a binary task (default: the larger of the two)."""
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
    if objective in ("regression", "pseudohuber"):
        if not numeric:
            raise DataError(f"{party.source}: label column {column!r} is text; objective {objective!r} needs numbers")
        return labels.astype(np.float64), None, objective
    if objective in CHECKED_TARGETS:
        return check_targets(party, labels, objective), None, objective
    if objective == "binary" and distinct.size != 2:
        raise DataError(
            f"{party.source}: objective 'binary' needs 2 label values in {column!r}, found {distinct.size}"
        )
    if positive_class is not None:
        return _with_positive(party, labels, distinct, objective, str(positive_class))
    classes = [_plain(v) for v in distinct]
    y = np.searchsorted(distinct, labels).astype(np.float64)
    return y, classes, objective


def _with_positive(party: PartyData, labels: np.ndarray, distinct: np.ndarray, objective: str,
                   positive: str) -> tuple[np.ndarray, list, str]:
    column = party.label_name
    if objective != "binary":
        raise DataError(f"{party.source}: --positive-class {positive} applies to binary classification, but label "
                        f"column {column!r} has {distinct.size} values (objective {objective!r})")
    match = [v for v in distinct if str(_plain(v)) == positive or str(v) == positive]
    if not match:
        raise DataError(f"{party.source}: --positive-class {positive!r} is not a value of label column {column!r} "
                        f"(its values: {', '.join(repr(_plain(v)) for v in distinct)})")
    other = next(v for v in distinct if v != match[0])
    return (labels == match[0]).astype(np.float64), [_plain(other), _plain(match[0])], objective


def check_targets(party: PartyData, labels: np.ndarray, objective: str) -> np.ndarray:
    """Targets of a count or amount objective (``CHECKED_TARGETS``) as float64; the first value
    out of range is named with its data row."""
    column = party.label_name
    positive, needs = CHECKED_TARGETS[objective]
    if labels.dtype == object:
        raise DataError(f"{party.source}: label column {column!r} is text; objective {objective!r} needs "
                        f"numbers ({needs})")
    values = labels.astype(np.float64)
    bad = np.flatnonzero(values <= 0 if positive else values < 0)
    if bad.size:
        value = values[bad[0]]
        kind = "negative value" if value < 0 else "value"
        raise DataError(f"{party.source}: label column {column!r} has {kind} {_plain(value)!r} "
                        f"in data row {bad[0] + 1}; objective {objective!r} needs {needs}")
    return values


def encode_with_classes(party: PartyData, classes: list | None) -> np.ndarray:
    """Labels of held-out or validation rows, encoded with the training run's classes."""
    if party.labels is None:
        raise DataError(f"{party.source}: these rows have no label column")
    if classes is None:
        if party.labels.dtype == object:
            raise DataError(f"{party.source}: label column {party.label_name!r} is text; regression needs numbers")
        return party.labels.astype(np.float64)
    lookup = {str(c): i for i, c in enumerate(classes)}
    encoded = np.empty(party.labels.size, dtype=np.float64)
    for position, value in enumerate(party.labels):
        key = str(_plain(value)) if not isinstance(value, str) else value
        if key not in lookup:
            raise DataError(
                f"{party.source}: label value {value!r} in data row {position + 1} "
                "does not occur in the training labels"
            )
        encoded[position] = lookup[key]
    return encoded
