"""What the TEE protocols share on the host side: each party's simulated platform and
enclave, the enclave code every party runs, and relaying attestation handshakes.

All parties run the same enclave program, so each enclave's allow-list is its own
measurement; the trusted roots (every party's platform key) are part of the measured
configuration. ``ProtocolEnv`` is what a party's side of a protocol is built from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources

from ..config import ProtocolOptions
from ..tee.code import EnclaveCode
from ..tee.simulated import SimulatedBackend, SimulatedPlatform

__all__ = ["ProtocolEnv", "enclave_code", "ENCLAVE_LIBRARIES"]

#: Trusted modules the enclave programs import; their sources enter the measurement.
ENCLAVE_LIBRARIES = (
    "teeboost.tee.channel", "teeboost.tee.quote", "teeboost.transport.serde",
    "teeboost.core.split", "teeboost.core.histogram", "teeboost.core.nodes", "teeboost.core.gradients",
    "teeboost.protocols.intcodec", "teeboost.protocols.enclave_messages", "teeboost.protocols.partition",
    "teeboost.errors", "teeboost.protocols.ring",
)


@dataclass
class ProtocolEnv:
    """Per-party settings of a protocol run (options, and for TEE protocols the platform)."""

    options: ProtocolOptions = field(default_factory=ProtocolOptions)
    platform: SimulatedPlatform | None = None
    trusted_roots: tuple[bytes, ...] = ()

    def backend(self) -> SimulatedBackend:
        return SimulatedBackend(self.platform or SimulatedPlatform.create())


def enclave_code(program: str, trusted_roots: tuple[bytes, ...], aes_bits: int = 128) -> EnclaveCode:
    source = resources.files("teeboost.tee.programs").joinpath(program).read_bytes()
    config = {"trusted_roots": sorted(r.hex() for r in trusted_roots), "aes_bits": aes_bits}
    return EnclaveCode(program.removesuffix(".py"), source, ENCLAVE_LIBRARIES, config)
