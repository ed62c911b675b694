"""Who holds which constrained column: each party resolves the run's constraints (by name)
over its own columns, and the active party checks that every name is held by someone.

A passive party tells the active party, in its hello, the public direction and interaction
sets of each of its columns (they are parameters of the run, not data); in N-TEE, 1-TEE and
strict mode, where the active host does not learn which passive column a split uses, what it
learns from these is which direction and sets the winning column has (docs/constraints.md).
"""

from __future__ import annotations

import json

import numpy as np

from .config import BoostParams
from .core.constraints import PartyConstraints, RunConstraints
from .errors import ConfigError, ProtocolError
from .policy import PolicyRefused

__all__ = ["checked_constraints", "party_constraints", "check_declared_directions"]


def checked_constraints(params: BoostParams, data, columns=None) -> RunConstraints:
    """The run's constraints, checked against one party's columns: a monotone constraint on a
    categorical column is refused (as XGBoost does), naming it."""
    constraints = params.constraints
    if columns is not None and constraints.has_monotone:
        for j, name in enumerate(data.feature_names):
            if constraints.monotone.get(name) and columns.bins.is_categorical(j):
                raise ConfigError(f"monotone_constraints: column {name!r} of party {data.name!r} is categorical; "
                                  "a monotone constraint needs an ordered (numeric) column")
    return constraints


def check_declared_directions(party: str, declared: dict[str, int], params: BoostParams, columns) -> None:
    """A passive party's own declaration (``[party] monotone_constraints``): a run must
    constrain each of its declared columns the declared way, or is refused naming the column."""
    unknown = sorted(set(declared) - set(columns))
    if unknown:
        raise ConfigError(f"party {party!r} declares monotone constraints for {', '.join(unknown)}, which are not "
                          "among its columns")
    run = params.constraints.monotone
    for name, direction in sorted(declared.items()):
        if run.get(name) != direction:
            raise PolicyRefused(party, "monotone_constraints", f"it declares column {name!r} monotone {direction:+d}; "
                                f"the run has {run.get(name, 0):+d}: add {name}:{direction} to the run's "
                                "monotone_constraints")


def party_constraints(params: BoostParams, active_names: list[str], hello: dict) -> dict[int, PartyConstraints]:
    """Per party (0: active), its columns under the run's constraints; {} without any. Every
    constrained name must be held by exactly one party."""
    constraints = params.constraints
    if not constraints.any:
        return {}
    held = {name: 0 for name in active_names if name in constraints.names()}
    out = {0: constraints.for_party(active_names)}
    for party, reply in sorted(hello.items()):
        n = reply.n_value_bins.size
        try:
            names = json.loads(reply.constrained)
        except ValueError:
            names = None
        if (not isinstance(names, list) or reply.directions.shape != (n,) or reply.membership.shape != (n,)
                or np.any(np.abs(reply.directions) > 1)):
            raise ProtocolError(f"party {party} ({reply.name}) described its columns' constraints wrongly")
        for name in names:
            if name not in constraints.names() or name in held:
                raise ProtocolError(f"party {party} ({reply.name}) claims constrained column {name!r}, which "
                                    f"{'is not constrained' if name not in constraints.names() else 'another party holds'}")
            held[name] = party
        claimed = constraints.for_party(names)  # the classes its named columns must show, whatever their order
        shown = sorted((int(d), int(m)) for d, m in zip(reply.directions, reply.membership) if d or m)
        if shown != sorted(zip(claimed.directions.tolist(), claimed.membership.tolist())):
            raise ProtocolError(f"party {party} ({reply.name}) described its columns' constraints other than the run's "
                                f"for the columns it names ({', '.join(names) or 'none'})")
        out[party] = PartyConstraints(reply.directions.astype(np.int8), reply.membership.astype(np.int64),
                                      constraints.has_monotone, bool(constraints.interaction))
    try:
        constraints.check_held(set(held))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return out
