"""Small models trained once per session (the bundled credit sample, a diamonds sample with text
categories, an active-only credit model) and a running ``teeboost serve`` process serving them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from teeboost.datasets import DIAMONDS_LABEL, DIAMONDS_PASSIVE, load_diamonds

from .helpers import active_only_credit, start_service, train


@pytest.fixture(scope="session")
def models(tmp_path_factory) -> SimpleNamespace:
    root = tmp_path_factory.mktemp("served-models")
    diamonds = load_diamonds().iloc[:3000]
    diamonds_csv = root / "diamonds.csv"
    diamonds.to_csv(diamonds_csv, index=False)
    return SimpleNamespace(
        root=root,
        credit=train(root / "credit"),
        credit_v2=train(root / "credit-v2", "--random-state", "7", "--learning-rate", "0.2"),
        credit_active=active_only_credit(root / "credit-active"),
        diamonds=train(root / "diamonds", "--data", str(diamonds_csv), "--label", DIAMONDS_LABEL, "--id", "id",
                       "--passive-columns", ",".join(DIAMONDS_PASSIVE)),
    )


@pytest.fixture(scope="session")
def service(models, tmp_path_factory):
    """credit (two versions, falling back to credit-active), diamonds (no fallback); 200 rows a request."""
    served = start_service(tmp_path_factory.mktemp("service"),
                           "--model", f"credit={models.credit}", "--model", f"credit={models.credit_v2}",
                           "--model", f"diamonds={models.diamonds}",
                           "--fallback", f"credit-active={models.credit_active}", "--fallback-for", "credit",
                           "--max-rows", "200")
    yield served
    assert served.stop() == 0, served.log.read_text()
