"""What every command shares: how a command runs (errors, warnings, exit codes), the help
formatter, the training report and progress bar.

Light by design: building the parser and ``teeboost --version`` import this module, so
nothing here imports numpy, pandas or a protocol at module level.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import DataWarning
from ..errors import TeeboostError

if TYPE_CHECKING:
    from ..core.boosting import TreeProgress

_CONTRACT_PROTOCOLS = ("plain", "secureboost", "ntee", "onetee", "strict")
DEFAULT_MODEL_DIR = Path("teeboost-model")  # train writes here and predict reads here unless told otherwise


def _version() -> str:
    """The installed distribution's version; the package's own when run from a source tree."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("teeboost")
    except PackageNotFoundError:
        from .. import __version__

        return __version__


def _row_count(text: str) -> int:
    """A number of rows as people write it: 10000, 10_000, 1e4, 1.5e5 (but not 1.5)."""
    from decimal import Decimal, InvalidOperation

    try:
        value = Decimal(text.strip().replace("_", ""))
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of rows (write e.g. 10000, 10_000 or 1e4)") from None
    if not value.is_finite() or value != value.to_integral_value():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of rows")
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: need at least 1 row")
    return int(value)


class _DefaultsHelpFormatter(argparse.HelpFormatter):
    """Appends each option's default to its help, unless the help already names one or there
    is none worth showing (options that are unset unless given). Flags (options that take no
    value) show none: a flag is off unless given, and ``--no-X``'s stored default (True, for
    X) printed after "do not X" read as if the flag were on by default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if "default" in text or not action.option_strings or action.nargs == 0 \
                or any(default is v for v in (None, False, argparse.SUPPRESS)):
            return text
        if isinstance(default, (list, tuple)):
            shown = " ".join(str(item) for item in default).replace("%", "%%")
            return f"{text} (default: {shown})"
        return f"{text} (default: %(default)s)"


def _show_data_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Data adjustments (dropped columns, intersected rows) as one plain line each."""
    if issubclass(category, DataWarning):
        print(f"teeboost: warning: {message}", file=sys.stderr)
    else:
        _default_showwarning(message, category, filename, lineno, file, line)


_default_showwarning = warnings.showwarning


def run_command(args: argparse.Namespace) -> int:
    """Run the parsed command: its exit code, 2 for a TeeboostError (bad input, said on stderr),
    130 when interrupted."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always", DataWarning)
            warnings.showwarning = _show_data_warning
            return args.func(args)
    except TeeboostError as exc:
        print(f"teeboost: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("teeboost: interrupted; nothing was written", file=sys.stderr)
        return 130


class _Progress:
    """A progress bar per tree on a terminal; silent otherwise."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.bar = None
        if enabled:
            import shutil

            from tqdm import tqdm

            size = shutil.get_terminal_size((100, 20))  # some terminals report 0 columns and rows
            self.bar = tqdm(total=total, unit="tree", file=sys.stderr, desc="training", leave=False, ncols=size.columns,
                            nrows=size.lines, mininterval=0)  # redraw on every tree: trees are slow

    def __call__(self, item: TreeProgress) -> None:
        if self.bar is not None:
            postfix = {"leaves": item.n_leaves}
            if item.valid_metric is not None:
                postfix["valid"] = f"{item.valid_metric:.4f}"
            self.bar.set_postfix(postfix)
            self.bar.update(1)

    def phase(self, text: str) -> None:
        """A slow step within a tree (key generation, encryption) names itself, so the bar
        never sits silent for seconds."""
        if self.bar is not None:
            self.bar.set_description_str(f"training: {text}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _params_line(params: dict[str, Any]) -> str:
    """"XGBoost's defaults except n_trees=5, max_depth=3": what a reader compares with XGBoost."""
    whose = "XGBoost's defaults" if params["defaults"] == "xgboost" else f"{params['defaults']} defaults"
    if not params["changed"]:
        return whose
    return f"{whose} except " + ", ".join(f"{k}={v}" for k, v in params["changed"].items())


def _print_report(report: dict[str, Any]) -> None:
    value = "n/a (no held-out rows)" if report["value"] is None else f"{report['value']:.4f}"
    print(f"protocol        {report['protocol']}")
    if report.get("enclaves"):
        print(f"enclaves        {report['enclaves']}")
    if report.get("compute"):
        print(f"compute         {report['compute']}")
    print(f"objective       {report['objective']}  ({report['n_samples']} training rows, {report['n_test']} held out)")
    for name, columns in (report.get("parties") or {}).items():  # a deployed party knows only its own columns
        if columns is not None:
            print(f"  {name:<13} {len(columns)} features: {', '.join(columns)}")
    print(f"trees           {report['n_trees']}")
    if report.get("params"):
        print(f"parameters      {_params_line(report['params'])}")
    print(f"held-out {report['metric']:<6} {value}")
    print(f"train time      {report['train_seconds']:.3f} s")
    if report.get("phases"):
        print("  phases        " + ", ".join(f"{k} {v:.2f} s" for k, v in report["phases"].items()))
    print(f"bytes           {report['bytes_total']:,} total: "
          f"{report['bytes']['active_to_passive']:,} active->passive, "
          f"{report['bytes']['passive_to_active']:,} passive->active ({report['messages']} messages)")
    if report.get("round_trips_per_tree") is not None:  # what a link's latency multiplies
        print(f"round trips     {report['round_trips']} ({report['round_trips_per_tree']:g} per tree)")
    print(f"model files     {', '.join(report['model_files'])}")
    if report.get("transcript"):
        print(f"transcript      {report['transcript']}")
    if report.get("psi"):  # deployed runs: ids aligned by PSI over the network
        psi = report["psi"]
        print(f"PSI             {psi['intersection']} shared rows of {psi['active_ids']} active ids, "
              f"{psi['seconds']:.2f} s, {psi['bytes']:,} bytes")
    if report.get("tls"):  # deployed runs: over the network
        print(f"transport       {report['transport'].replace('grpc', 'gRPC')}, {report['tls']}")
