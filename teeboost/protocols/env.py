"""What the TEE protocols share on the host side: each party's platform, identity and the
run's pinned identities, the enclave code every party runs, and the run's attested init.

All parties run the same enclave program, so each enclave's allow-list is its own
measurement; the trusted platform roots and whether simulated quotes are accepted are part
of the measured configuration. The run's parameters and every party's identity key go to the
enclave in its one init message, whose hash its quotes bind. ``ProtocolEnv`` is what a
party's side of a protocol is built from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from teeboost.compute import ComputeBackend, LocalBackend
from teeboost.config import ProtocolOptions
from teeboost.errors import AttestationError, ConfigError
from teeboost.tee.code import EnclaveCode, module_source
from teeboost.tee.identity import PartyIdentity
from teeboost.tee.simulated import SimulatedBackend, SimulatedPlatform
from teeboost.transport import serde
from teeboost.protocols.enclave import messages as em

__all__ = ["ProtocolEnv", "enclave_code", "init_message", "check_party_keys", "run_context_of", "criteria_tuple"]

SIMULATED_HINT = ("only the simulated enclave backend is available here, and it gives no hardware protection; "
                  "accept it explicitly with --allow-simulated-tee, [tee] allow_simulated = true, or "
                  "allow_simulated_tee=True")


@dataclass
class ProtocolEnv:
    """Per-party settings of a protocol run (options, and for TEE protocols the platform,
    this party's identity and every party's pinned identity key by index)."""

    options: ProtocolOptions = field(default_factory=ProtocolOptions)
    platform: SimulatedPlatform | None = None
    trusted_roots: tuple[bytes, ...] = ()
    identity: PartyIdentity | None = None
    party_keys: tuple[bytes, ...] = ()
    run_id: str = ""  # set by the active party for the run it starts
    # relying-party check of hardware quotes ([attestation]); None: the simulated backend's roots
    hardware_verifier: Any = field(default=None, kw_only=True)
    # told when a slow step begins ("generating Paillier keys"), for progress displays; never prints
    on_phase: Callable[[str], None] | None = field(default=None, kw_only=True)
    # where this party's heavy host-side loops run ([compute]); None: this machine's processes.
    # Party-local: never sent, and never used for work inside an enclave
    compute: ComputeBackend | None = field(default=None, kw_only=True)

    def compute_backend(self) -> ComputeBackend:
        return self.compute if self.compute is not None else LocalBackend(self.options.crypto_workers)

    def backend(self) -> SimulatedBackend:
        if not self.options.allow_simulated_tee:
            raise ConfigError(SIMULATED_HINT)
        return SimulatedBackend(self.platform or SimulatedPlatform.create())

    def require_identity(self, index: int) -> PartyIdentity:
        if self.identity is None:
            raise ConfigError(f"party {index} has no identity key: set [tee] identity (a file written by "
                              "'teeboost tee identity --out FILE')")
        if len(self.party_keys) < 2:
            raise ConfigError("[tee] identities must list every party's identity public key, by party index")
        if index >= len(self.party_keys) or self.party_keys[index] != self.identity.public_key:
            raise ConfigError(f"[tee] identities[{index}] is not the public half of this party's identity key")
        return self.identity

    def keys_array(self) -> np.ndarray:
        return np.frombuffer(b"".join(self.party_keys), dtype=np.uint8).reshape(len(self.party_keys), 32)


def check_party_keys(env: ProtocolEnv, offered: np.ndarray, who: str) -> None:
    """A peer's run must pin exactly the identities this party was configured with."""
    mine = env.keys_array()
    if offered.shape != mine.shape or not np.array_equal(offered, mine):
        raise AttestationError(f"{who} pins other party identity keys than this party's [tee] identities")


def enclave_code(program: str, trusted_roots: tuple[bytes, ...], options: ProtocolOptions) -> EnclaveCode:
    """``program``: the module of an enclave program (``teeboost.protocols.<family>.enclave.program``)."""
    source = module_source(program)
    config = {"trusted_roots": sorted(r.hex() for r in trusted_roots), "aes_bits": options.aes_bits,
              "allow_simulated": options.allow_simulated_tee}
    return EnclaveCode.from_source(f"{program.split('.')[-3]}_enclave", source, config)


def init_message(protocol: str, role: str, party: int, criteria, max_bin: int, env: ProtocolEnv,
                 run_id: str) -> bytes:
    return serde.encode(em.EnclaveInit(
        role, party, criteria.reg_lambda, criteria.min_child_weight, criteria.min_samples_leaf,
        criteria.min_split_gain, bool(criteria.category_subsets), max_bin, protocol, run_id,
        float(criteria.reg_alpha), float(criteria.max_delta_step), float(criteria.colsample_bytree),
        int(criteria.column_seed), bool(criteria.weighted), env.keys_array(), bool(criteria.monotone),
        int(criteria.constraints), np.frombuffer(criteria.rules, dtype=np.uint8)))


def criteria_tuple(criteria) -> tuple:
    return criteria.as_tuple()


def run_context_of(env: ProtocolEnv, protocol: str, run_id: str, max_bin: int, criteria) -> bytes:
    """The run context an enclave initialised with these parameters binds."""
    return em.run_context(protocol, run_id, max_bin, env.options.aes_bits, env.keys_array(), criteria_tuple(criteria))
