"""Rows across parties: matched into one order, so that row i is the same customer at every
party (``--align``: by id, by the ids every party holds, or by position), then split into
training and held-out rows.

Apart from ``teeboost.data`` because it is about several parties at once: each party's
columns are read and validated on their own first, and only then are their rows matched.
Row ids are compared as strings; when two parties wrote the same number differently the
error says so.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .config import ALIGN_MODES, DataWarning, user_stacklevel
from .data import PartyData
from .errors import DataError

__all__ = ["match_rows", "align_parties", "train_test_rows"]


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


def match_rows(active: PartyData, passives: list[PartyData], how: str = "auto") -> tuple[PartyData, list[PartyData]]:
    """Every party's rows in one order, so that row i is the same customer everywhere.

    ``id``: all parties hold the same ids; ``intersect``: keep the ids every party holds (a
    local stand-in for private set intersection), saying how many; ``position``: row i is
    row i (the user says so). ``auto``: by id when there are id columns (intersecting when
    the id sets differ), else by position, unless two parties share a column name: that is
    usually a forgotten id column, and matching by position would silently pair strangers.
    """
    if how not in ALIGN_MODES:
        raise DataError(f"--align {how!r} must be one of {', '.join(ALIGN_MODES)}")
    have_ids = [p.ids is not None for p in [active, *passives]]
    if how == "position" or (how == "auto" and not any(have_ids)):
        if how == "auto":
            _refuse_shared_columns(active, passives)
        for party in passives:
            if party.n_rows != active.n_rows:
                raise DataError(f"{party.source}: {party.n_rows} rows, but the active party has {active.n_rows} "
                                "(rows are matched by position)")
        return active, passives
    if not all(have_ids):
        missing = [p for p, has in zip([active, *passives], have_ids) if not has]
        raise DataError(f"{missing[0].source}: no id column; matching rows by id needs one in every party's data "
                        "(give --id, or --align position if row i is the same customer in every file)")
    if how == "id":
        return active, align_parties(active, passives)
    common = pd.Index(active.ids)
    for party in passives:
        common = common.intersection(pd.Index(party.ids), sort=False)
    if common.size == active.n_rows and all(p.n_rows == common.size for p in passives):
        return active, align_parties(active, passives)
    if common.size == 0:
        raise DataError(f"no id is held by every party ({active.source}: {active.n_rows} ids, "
                        + ", ".join(f"{p.source}: {p.n_rows}" for p in passives) + ")"
                        + (_same_number_hint(passives[0].ids, active.ids) if passives else ""))
    warnings.warn(f"aligned by id: {common.size:,} rows have ids held by every party and are used (active party: "
                  f"{common.size:,} of {active.n_rows:,}; "
                  + ", ".join(f"{p.name}: {common.size:,} of {p.n_rows:,}" for p in passives) + ")",
                  DataWarning, stacklevel=user_stacklevel())
    active = active.take(np.sort(pd.Index(active.ids).get_indexer(common)))
    return active, [party.take(pd.Index(party.ids).get_indexer(active.ids)) for party in passives]


def _refuse_shared_columns(active: PartyData, passives: list[PartyData]) -> None:
    for party in passives:
        shared = [n for n in party.feature_names if n in active.feature_names]
        if shared:
            raise DataError(
                f"{party.source}: column {shared[0]!r} is also in the active party's data ({active.source}); "
                f"if it is the row id, give --id {shared[0]} (id_column=...), so rows are matched by id; "
                "if row i is the same customer in every file, say --align position (and rename the column)")


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
