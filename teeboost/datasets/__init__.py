"""The bundled sample of Kaggle's Give Me Some Credit data, and its default vertical split.

``give_me_some_credit_sample.csv`` holds the first 19,999 rows of ``cs-training.csv``
(label ``SeriousDlqin2yrs``, 10 features, ``NA`` = missing), the dataset of the SecureBoost
papers. ``load_give_me_some_credit(path)`` reads the full Kaggle file the same way.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pandas as pd

from ..data import read_csv
from ..errors import DataError

__all__ = [
    "GIVE_ME_SOME_CREDIT_LABEL", "GIVE_ME_SOME_CREDIT_PASSIVE", "GIVE_ME_SOME_CREDIT_ID",
    "bundled_path", "load_give_me_some_credit",
]

GIVE_ME_SOME_CREDIT_LABEL = "SeriousDlqin2yrs"
GIVE_ME_SOME_CREDIT_ID = "id"
#: Default passive party: the demographic and account columns, as in the seed paper.
GIVE_ME_SOME_CREDIT_PASSIVE = [
    "age", "MonthlyIncome", "NumberOfDependents",
    "NumberOfOpenCreditLinesAndLoans", "NumberRealEstateLoansOrLines",
]


def bundled_path() -> Path:
    return Path(str(resources.files(__package__).joinpath("give_me_some_credit_sample.csv")))


def load_give_me_some_credit(path: str | Path | None = None) -> pd.DataFrame:
    """Bundled sample (or the Kaggle file at ``path``) with its unnamed index column as ``id``."""
    source = Path(path) if path is not None else bundled_path()
    frame = read_csv(source)
    first = str(frame.columns[0])
    if first.startswith("Unnamed") or first == "":
        frame = frame.rename(columns={frame.columns[0]: GIVE_ME_SOME_CREDIT_ID})
    missing = [c for c in [GIVE_ME_SOME_CREDIT_LABEL, *GIVE_ME_SOME_CREDIT_PASSIVE] if c not in frame.columns]
    if missing:
        raise DataError(f"{source}: not a Give Me Some Credit file (missing {', '.join(missing)})")
    if GIVE_ME_SOME_CREDIT_ID in frame.columns:
        frame[GIVE_ME_SOME_CREDIT_ID] = frame[GIVE_ME_SOME_CREDIT_ID].astype(str)
    return frame
