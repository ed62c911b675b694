"""Protocol name -> how to build its active and passive sides."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..config import BoostParams, ProtocolOptions
from ..core.columns import PartyColumns
from ..core.grower import SplitFinder
from ..core.split import SplitCriteria
from ..errors import ConfigError
from ..transport.base import Channel
from . import plain, secureboost

__all__ = ["ProtocolSpec", "PROTOCOLS", "get_protocol"]


@dataclass(frozen=True)
class ProtocolSpec:
    name: str
    summary: str
    make_active: Callable[[Channel, PartyColumns, SplitCriteria, dict[int, np.ndarray], BoostParams,
                           ProtocolOptions], SplitFinder]
    make_passive: Callable[[PartyColumns, BoostParams, ProtocolOptions], Any]


PROTOCOLS: dict[str, ProtocolSpec] = {
    "plain": ProtocolSpec(
        "plain",
        "no protection: gradients and histograms in the clear (reference and floor)",
        lambda channel, columns, criteria, bins, params, options: plain.PlainActive(
            channel, columns, criteria, bins, params.max_bin),
        lambda columns, params, options: plain.PlainPassive(columns),
    ),
    "secureboost": ProtocolSpec(
        "secureboost",
        "Paillier: encrypted gradients, the active party decrypts every passive bin sum",
        lambda channel, columns, criteria, bins, params, options: secureboost.SecureBoostActive(
            channel, columns, criteria, bins, params.max_bin, options),
        lambda columns, params, options: secureboost.SecureBoostPassive(columns, options),
    ),
}


def get_protocol(name: str) -> ProtocolSpec:
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ConfigError(
            f"protocol={name!r} is not available; choose one of {', '.join(sorted(PROTOCOLS))}"
        ) from None
