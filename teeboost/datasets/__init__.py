"""The bundled sample of Kaggle's Give Me Some Credit data, and its default vertical split.

``give_me_some_credit_sample.csv`` holds the first 19,999 rows of ``cs-training.csv``
(label ``SeriousDlqin2yrs``, 10 features, ``NA`` = missing), the dataset of the SecureBoost
papers. ``load_give_me_some_credit(path)`` reads the full Kaggle file the same way.

``diamonds.csv.gz`` is the diamonds table of ggplot2 (53,940 diamonds; MIT licence, as
shipped with plotnine): a real dataset with text categories (cut, color, clarity), for
categorical features. ``load_diamonds()`` adds the label ``expensive_for_size``: price per
carat above the median.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pandas as pd

from ..data import read_csv
from ..errors import DataError

__all__ = [
    "GIVE_ME_SOME_CREDIT_LABEL", "GIVE_ME_SOME_CREDIT_PASSIVE", "GIVE_ME_SOME_CREDIT_ID",
    "bundled_path", "load_give_me_some_credit", "load_diamonds", "DIAMONDS_LABEL", "DIAMONDS_PASSIVE",
]

DIAMONDS_LABEL = "expensive_for_size"
#: Passive party of the diamonds split: the grading lab's text grades.
DIAMONDS_PASSIVE = ["color", "clarity"]

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
    """Bundled sample (or the Kaggle file at ``path``: CSV, Parquet or a SQL source, as
    ``teeboost.data_sources`` reads them) with its unnamed index column as ``id``."""
    if path is None:
        source = bundled_path()
        frame = read_csv(source)
    else:
        from ..data_sources import read_source

        source = path
        frame = read_source(path)
    first = str(frame.columns[0])
    if first.startswith("Unnamed") or first == "":
        frame = frame.rename(columns={frame.columns[0]: GIVE_ME_SOME_CREDIT_ID})
    missing = [c for c in [GIVE_ME_SOME_CREDIT_LABEL, *GIVE_ME_SOME_CREDIT_PASSIVE] if c not in frame.columns]
    if missing:
        raise DataError(f"{source}: not a Give Me Some Credit file (missing {', '.join(missing)})")
    if GIVE_ME_SOME_CREDIT_ID in frame.columns:
        frame[GIVE_ME_SOME_CREDIT_ID] = frame[GIVE_ME_SOME_CREDIT_ID].astype(str)
    return frame


def load_diamonds() -> pd.DataFrame:
    """The diamonds table with an ``id`` column and the label ``expensive_for_size``."""
    frame = read_csv(Path(str(resources.files(__package__).joinpath("diamonds.csv.gz"))))
    frame.insert(0, "id", [str(i) for i in range(len(frame))])
    per_carat = frame["price"] / frame["carat"]
    frame[DIAMONDS_LABEL] = (per_carat > per_carat.median()).astype(int)
    return frame.drop(columns=["price", "x", "y", "z"])
