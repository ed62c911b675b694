"""Which of the parties' columns a training run can use: columns no split can use (every value
missing, or one value in every row) are dropped with one warning, as XGBoost ignores them, and
a feature name held by two parties is refused, since prediction would feed one party's column
to both.

Apart from ``teeboost.data`` because these are training's rules, checked across the parties'
validated columns once their rows are matched; reading a party's data keeps every column.
"""

from __future__ import annotations

import warnings

import numpy as np

from .config import DataWarning, user_stacklevel
from .data import PartyData
from .errors import DataError

__all__ = ["unusable_columns", "drop_unusable_columns", "check_distinct_feature_names"]


def unusable_columns(party: PartyData) -> dict[str, str]:
    """Columns no split can use: every value missing, or one value in every row."""
    found = {}
    for j, name in enumerate(party.feature_names):
        column = party.features[:, j]
        missing = np.isnan(column)
        if missing.all():
            found[name] = "every value missing"
        elif not missing.any() and np.all(column == column[0]):
            shown = party.vocabularies[name].names[int(column[0])] if name in party.vocabularies else f"{column[0]:g}"
            found[name] = f"constant {shown!r}" if name in party.vocabularies else f"constant {shown}"
    return found


def drop_unusable_columns(parties: list[PartyData]) -> list[PartyData]:
    """Training data without constant and all-missing columns (as XGBoost ignores them),
    with one warning that lists them per party; they stay out of the model."""
    kept, notes = [], []
    for party in parties:
        dropped = unusable_columns(party)
        if not dropped:
            kept.append(party)
            continue
        if len(dropped) == len(party.feature_names):
            raise DataError(f"{party.source}: every feature column is constant or empty "
                            f"({', '.join(f'{n!r}: {why}' for n, why in dropped.items())}); nothing to train on")
        notes.append(f"{party.source}: " + ", ".join(f"{n!r} ({why})" for n, why in dropped.items()))
        kept.append(party.select([n for n in party.feature_names if n not in dropped]))
    if notes:
        warnings.warn("dropped columns no split can use, they stay out of the model: " + "; ".join(notes),
                      DataWarning, stacklevel=user_stacklevel())
    return kept


def check_distinct_feature_names(parties: list[PartyData]) -> None:
    """A feature name held by two parties would make prediction feed one party's column to
    both: refuse it at training, naming both parties."""
    owner: dict[str, PartyData] = {}
    for party in parties:
        for name in party.feature_names:
            if name in owner:
                raise DataError(
                    f"feature column {name!r} is held by party {owner[name].name!r} ({owner[name].source}) and by "
                    f"party {party.name!r} ({party.source}); rename one of them (or, if it is the row id, "
                    "pass it as the id column)")
            owner[name] = party
