from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from teeboost.data import PartyData, split_columns
from teeboost.datasets import (
    GIVE_ME_SOME_CREDIT_ID, GIVE_ME_SOME_CREDIT_LABEL, GIVE_ME_SOME_CREDIT_PASSIVE, load_give_me_some_credit,
)
from tests.serial import pytest_runtest_protocol  # noqa: F401  (timed tests run alone under -n 2)


@pytest.fixture(scope="session")
def credit_frame() -> pd.DataFrame:
    return load_give_me_some_credit()


@pytest.fixture(scope="session")
def credit_parties(credit_frame) -> tuple[PartyData, list[PartyData]]:
    return split_columns(credit_frame, [GIVE_ME_SOME_CREDIT_PASSIVE], label=GIVE_ME_SOME_CREDIT_LABEL,
                         id_column=GIVE_ME_SOME_CREDIT_ID)


@pytest.fixture(scope="session")
def small_credit(credit_parties) -> tuple[PartyData, list[PartyData]]:
    """3,000 rows: fast enough for protocol equality tests, real missing values included."""
    active, passives = credit_parties
    rows = np.arange(3000)
    return active.take(rows), [p.take(rows) for p in passives]
