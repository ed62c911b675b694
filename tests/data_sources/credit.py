"""The bundled Give Me Some Credit sample as users write it: a ``;``-separated file with
decimal commas and a text column, and the same rows as clean CSV; split between an active
party (label, debt columns, the text column) and a passive party (the demographic columns)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from teeboost.datasets import GIVE_ME_SOME_CREDIT_LABEL, GIVE_ME_SOME_CREDIT_PASSIVE, load_give_me_some_credit

LABEL = GIVE_ME_SOME_CREDIT_LABEL
PASSIVE = GIVE_ME_SOME_CREDIT_PASSIVE


def credit(rows: int = 6000) -> pd.DataFrame:
    """The first ``rows`` rows, ids as text, with a text column (a region that goes with age)."""
    frame = load_give_me_some_credit().head(rows).copy()
    regions = np.array(["north", "south", "east", "west"])
    frame.insert(1, "region", regions[(frame["age"].to_numpy() // 17).astype(int) % 4])
    return frame


def with_decimal_commas(frame: pd.DataFrame, skip: tuple[str, ...] = ("id", "region")) -> pd.DataFrame:
    """Every number written as text with a decimal comma ("102,0"); missing stays missing."""
    out = frame.copy()
    for name in out.columns:
        if name in skip or name == LABEL:
            continue
        out[name] = [None if pd.isna(v) else repr(float(v)).replace(".", ",") for v in out[name]]
    return out


def split(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    active = frame[[c for c in frame.columns if c not in PASSIVE]]
    passive = frame[["id", *PASSIVE]]
    return active, passive
