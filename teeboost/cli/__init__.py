"""``teeboost train | predict | demo | ...``: the command-line face of the same Python API.

Output contract: human-readable lines by default; with ``--json`` exactly one JSON object
on stdout. Errors go to stderr with exit code 2 (bad input) or 1 (anything else), and a
run that fails writes no model and no transcript.

One module per command group (``train``, ``serve``, ``party``, ``certs``, ``tee``, ``audit``, ``attack``,
``bench``, ``explain``, ``disclosure``), ``options`` for the training options they share,
``common`` for what every command shares and ``main_parser`` for the parser. Only what a
command runs imports numpy, pandas or a protocol, inside the command's function.
"""

from __future__ import annotations

from .common import run_command
from .main_parser import _parser

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    return run_command(_parser().parse_args(argv))
