"""Which defaults a run's training parameters came from, and the demo's smaller settings.

The defaults are XGBoost's (100 trees of depth 6, learning rate 0.3, subsample 1, 256 bins), so
a reader of a run report can tell a model trained "at the defaults" from one whose settings
were chosen: the report names the defaults and lists the parameters changed from them. The
demo trains every protocol in about a minute, so it passes the seed paper's small setting
explicitly and says so.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .config import BoostParams

__all__ = ["DEFAULTS", "DEMO_SETTINGS", "DEMO_SETTINGS_TEXT", "demo_flags", "params_report"]

#: Whose defaults ``BoostParams``, the estimators, the CLI and party configs share.
DEFAULTS = "xgboost"

#: The demo's settings (the seed paper's): 20-50x less work than the defaults.
DEMO_SETTINGS = {"n_trees": 5, "max_depth": 3, "subsample": 0.8, "max_bin": 32}
DEMO_SETTINGS_TEXT = ("5 trees x depth 3 x 32 bins, subsample 0.8 (small demo settings; "
                      "defaults are XGBoost's 100 x 6 x 256, subsample 1)")


def demo_flags() -> list[str]:
    """``DEMO_SETTINGS`` as ``teeboost train`` flags."""
    return [arg for name, value in DEMO_SETTINGS.items() for arg in (f"--{name.replace('_', '-')}", str(value))]


def params_report(params: BoostParams) -> dict[str, Any]:
    """``{"defaults": "xgboost", "changed": {name: value}, "at_default": [names]}``: the
    parameters this run set (by ``BoostParams`` field) and those it left at XGBoost's defaults."""
    default = BoostParams()
    changed, at_default = {}, []
    for field in dataclasses.fields(BoostParams):
        value = getattr(params, field.name)
        if value == getattr(default, field.name):
            at_default.append(field.name)
        else:
            changed[field.name] = list(value) if isinstance(value, tuple) else value
    return {"defaults": DEFAULTS, "changed": changed, "at_default": at_default}
