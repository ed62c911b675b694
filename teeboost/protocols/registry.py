"""Protocol name -> how to build its active and passive sides."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..config import BoostParams
from ..core.columns import PartyColumns
from ..core.grower import SplitFinder
from ..core.split import SplitCriteria
from ..errors import ConfigError
from ..transport.base import Channel
from teeboost.protocols.ntee import hosts as ntee
from teeboost.protocols.onetee import hosts as onetee
from teeboost.protocols.scoring import plain
from teeboost.protocols.scoring import secureboost
from teeboost.protocols.strict import hosts as strict
from teeboost.protocols.env import ProtocolEnv

__all__ = ["ProtocolSpec", "PROTOCOLS", "get_protocol"]


@dataclass(frozen=True)
class ProtocolSpec:
    name: str
    summary: str
    make_active: Callable[[Channel, PartyColumns, SplitCriteria, dict[int, np.ndarray], dict[int, np.ndarray],
                           BoostParams, ProtocolEnv], SplitFinder]
    make_passive: Callable[[PartyColumns, BoostParams, ProtocolEnv, int], Any]
    uses_enclaves: bool = False
    trains_in_enclave: bool = False  # the whole boosting run happens inside the active enclave (strict)


PROTOCOLS: dict[str, ProtocolSpec] = {
    "plain": ProtocolSpec(
        "plain",
        "no protection: gradients and histograms in the clear (reference and floor)",
        lambda channel, columns, criteria, bins, categorical, params, env: plain.PlainActive(
            channel, columns, criteria, bins, categorical, params.max_bin),
        lambda columns, params, env, index: plain.PlainPassive(columns),
    ),
    "secureboost": ProtocolSpec(
        "secureboost",
        "Paillier: encrypted gradients, the active party decrypts every passive bin sum",
        lambda channel, columns, criteria, bins, categorical, params, env: secureboost.SecureBoostActive(
            channel, columns, criteria, bins, categorical, params.max_bin, env.options, env.on_phase,
            subsample=params.subsample, backend=env.compute_backend()),
        lambda columns, params, env, index: secureboost.SecureBoostPassive(
            columns, env.options, backend=env.compute_backend()),
    ),
    "ntee": ProtocolSpec(
        "ntee",
        "an enclave at every party: passive enclaves return only their best score and a handle",
        lambda channel, columns, criteria, bins, categorical, params, env: ntee.NteeActive(
            channel, columns, criteria, bins, categorical, params.max_bin, env),
        lambda columns, params, env, index: ntee.NteePassive(columns, params, env, index),
        uses_enclaves=True,
    ),
    "onetee": ProtocolSpec(
        "onetee",
        "one enclave at the active party: one-time-pad masked sums, unmasked and scored inside it",
        lambda channel, columns, criteria, bins, categorical, params, env: onetee.OneTeeActive(
            channel, columns, criteria, bins, categorical, params.max_bin, env),
        lambda columns, params, env, index: onetee.OneTeePassive(columns, env, index),
        uses_enclaves=True,
    ),
    "strict": ProtocolSpec(
        "strict",
        "an enclave at every party, and the whole run inside them: the active party learns only the model",
        lambda channel, columns, criteria, bins, categorical, params, env: strict.StrictActive(
            channel, columns, criteria, bins, categorical, params, env),
        lambda columns, params, env, index: strict.StrictPassive(columns, params, env, index),
        uses_enclaves=True,
        trains_in_enclave=True,
    ),
}


def get_protocol(name: str) -> ProtocolSpec:
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ConfigError(
            f"protocol={name!r} is not available; choose one of {', '.join(sorted(PROTOCOLS))}"
        ) from None
