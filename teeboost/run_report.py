"""The JSON report of a training run, one schema wherever the run happened.

``teeboost train --json`` (every party in one process) and ``teeboost party --config
active.toml --json`` (the deployed active party) both build their report here, so a script
written against one reads the other: the same keys, null where a key does not apply (no PSI in
one process, no TLS, a passive party's column names that stay with it). Keys that only some
runs have (enclaves, early stopping) are present under the same conditions in both. ``params``
says whose defaults the run's parameters came from (XGBoost's) and which it changed.
"""

from __future__ import annotations

from typing import Any

from .param_defaults import params_report

__all__ = ["REPORT_KEYS", "OPTIONAL_KEYS", "EARLY_STOPPING_KEYS", "training_report", "early_stopping"]

#: In every report.
REPORT_KEYS = ("protocol", "objective", "n_samples", "n_test", "n_trees", "metric", "value", "train_seconds",
               "bytes_total", "bytes", "bytes_by_message", "messages", "round_trips", "round_trips_per_tree",
               "parties", "model_files", "transcript",
               "phases", "per_tree", "protection", "psi", "transport", "tls", "params")

#: With early stopping (``early_stopping_rounds`` set): whether it ended the run and the round kept.
EARLY_STOPPING_KEYS = ("early_stopping_rounds", "stopped_early", "rounds_run", "best_round")

#: Present when they apply: enclaves (TEE protocols), compute (where the heavy loops ran), options
#: (the protocol's settings, when it reads any) and early stopping.
OPTIONAL_KEYS = ("enclaves", "compute", "options", *EARLY_STOPPING_KEYS)


def early_stopping(params, run, best_round: int | None) -> dict[str, Any]:
    """Whether early stopping ended the run before ``n_trees`` rounds, and the best round (from
    0, as in the model file) the model was cut back to: fewer trees than asked for, unexplained,
    look like a bug. Empty without early stopping."""
    if params.early_stopping_rounds is None:
        return {}
    rounds_run = 1 + max((t.round_index for t in run.trees), default=-1)
    return {"early_stopping_rounds": params.early_stopping_rounds, "stopped_early": rounds_run < params.n_trees,
            "rounds_run": rounds_run, "best_round": None if best_round is None else int(best_round)}


def training_report(values: dict[str, Any], *, params, run, best_round: int | None, protection: dict[str, Any]) \
        -> dict[str, Any]:
    """``values`` (every key of ``REPORT_KEYS`` but protection) completed with what both kinds of
    run report alike: the protection, the options read, enclaves, compute and early stopping. A
    key missing or not in the schema is a bug, named here rather than found by a user's script."""
    report = {**values, "protection": protection["protection"], "params": params_report(params)}
    if protection["options"]:
        report["options"] = protection["options"]
    if run.enclaves:
        report["enclaves"] = run.enclaves
    if run.compute:
        report["compute"] = run.compute
    report.update(early_stopping(params, run, best_round))
    missing = [k for k in REPORT_KEYS if k not in report]
    extra = [k for k in report if k not in REPORT_KEYS and k not in OPTIONAL_KEYS]
    if missing or extra:
        raise RuntimeError(f"training report: missing {missing}, not in the schema {extra} (teeboost/run_report.py)")
    return {k: report[k] for k in (*REPORT_KEYS, *OPTIONAL_KEYS) if k in report}
