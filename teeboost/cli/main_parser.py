"""The ``teeboost`` parser: every command module adds its commands, in the order ``teeboost
--help`` lists them.

Building it imports the command modules but none of what their commands run (numpy, pandas,
the protocols): ``teeboost --version`` and ``teeboost COMMAND --help`` stay fast.
"""

from __future__ import annotations

import argparse

from . import attack, audit, bench, certs, disclosure, explain, party, predict, serve, tee, train
from .common import _DefaultsHelpFormatter, _version


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="teeboost", description="Vertical federated gradient boosting.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}",
                        help="print teeboost's version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    train.add_train(sub)
    predict.add_predict(sub)
    serve.add_serve(sub)
    party.add_demo(sub)
    party.add_example_data(sub)
    attack.add_attack(sub)
    bench.add_bench(sub)
    certs.add_certs(sub)
    audit.add_audit(sub)
    explain.add_importance(sub)
    explain.add_export(sub)
    disclosure.add_consent(sub)
    disclosure.add_disclose(sub)
    party.add_party(sub)
    tee.add_tee(sub)
    tee.add_attestation(sub)
    for command in _all_parsers(parser):
        command.formatter_class = _DefaultsHelpFormatter
    return parser


def _all_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parser and every subcommand's parser, depth first (``certs sign`` included)."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found += _all_parsers(child)
    return found
