"""Inside an enclave: the run it was initialised for, the parties' pinned identities, and
one attested channel per party per run.

Identity is pinned, never learned: the init message names every party's Ed25519 identity
key by index, and its hash (the run context) is bound into every quote the enclave makes, so
a peer that accepts the quote has also checked those keys. A channel to party k counts only
once party k's key has signed the handshake; a second handshake for k, one for a party the
run does not have, or a second init are refused with ``AttestationError``.
"""

from __future__ import annotations

import numpy as np

from teeboost.core.constraints import RunConstraints
from teeboost.core.split import SplitCriteria
from teeboost.errors import AttestationError, ProtocolError
from teeboost.protocols.enclave.messages import EnclaveInit, run_context
from teeboost.tee.channel import SecureChannel, party_statement, verify_party_signature

__all__ = ["EnclaveSession", "start_session", "session"]


class EnclaveSession:
    def __init__(self, init: EnclaveInit, aes_bits: int) -> None:
        self.role = init.role
        self.party = int(init.party)
        self.run_id = init.run_id
        self.max_bin = int(init.max_bin)
        self.aes_bits = aes_bits
        self.keys = [bytes(k) for k in np.asarray(init.party_keys, dtype=np.uint8)]
        self.criteria = SplitCriteria(init.reg_lambda, init.min_child_weight, init.min_samples_leaf,
                                      init.min_split_gain, bool(init.category_subsets), init.reg_alpha,
                                      init.max_delta_step, init.colsample_bytree, init.column_seed,
                                      bool(init.weighted), bool(init.monotone), int(init.constraints))
        if not self.criteria.in_range() or not 1 <= self.max_bin <= 65535:
            raise ProtocolError(f"split criteria {self.criteria.as_tuple()} or max_bin {self.max_bin} are out of range")
        try:  # the constraints this enclave applies are the ones the run context binds
            self.constraints = RunConstraints.decode(np.asarray(init.rules, dtype=np.uint8).tobytes())
        except ValueError as exc:
            raise ProtocolError(str(exc)) from None
        if self.constraints.digest() != self.criteria.constraints \
                or self.constraints.has_monotone != self.criteria.monotone:
            raise ProtocolError("the constraints given do not match the digest the run binds")
        self.context = run_context(init.protocol, init.run_id, self.max_bin, aes_bits, init.party_keys,
                                   self.criteria.as_tuple())
        self.channels: dict[int, SecureChannel] = {}
        self._pending: dict[int, SecureChannel] = {}
        self._begun: set[int] = set()
        if not 0 <= self.party < len(self.keys):
            raise ProtocolError(f"party {self.party} is not a party of this run")

    @property
    def peers(self) -> list[int]:
        return [p for p in range(len(self.keys)) if p != self.party]

    def begin(self, party: int) -> None:
        """A handshake with ``party`` starts: allowed once per run, for a party of the run."""
        if party not in self.peers or party in self._begun:
            raise AttestationError(f"a channel to party {party} was already set up in this run, or it is not a peer")
        self._begun.add(party)

    def established(self, party: int, channel: SecureChannel) -> None:
        self._pending[party] = channel

    def confirm(self, party: int, role: str, signature: bytes) -> SecureChannel:
        """The channel counts once ``party``'s pinned key signed this very handshake."""
        channel = self._pending.pop(party, None)
        if channel is None:
            raise AttestationError(f"no handshake with party {party} is waiting for its signature")
        verify_party_signature(self.keys[party], signature,
                               party_statement(role, party, self.context, channel.handshake_hash))
        self.channels[party] = channel
        return channel

    def channel(self, party: int) -> SecureChannel:
        try:
            return self.channels[party]
        except KeyError:
            raise ProtocolError(f"party {party} has no attested channel in this run") from None

    def require_all_peers(self) -> None:
        missing = [p for p in self.peers if p not in self.channels]
        if missing:
            raise ProtocolError(f"parties {missing} have no attested channel yet")


def start_session(rt, init: EnclaveInit, protocol: str, role: str | None = None) -> EnclaveSession:
    """Handle the one init of an enclave's life."""
    if "session" in rt.state:
        raise AttestationError("this enclave was already initialised for a run")
    if init.protocol != protocol or (role is not None and init.role != role):
        raise ProtocolError(f"this enclave runs {protocol}, not {init.protocol} as {init.role}")
    current = EnclaveSession(init, int(rt.config.get("aes_bits", 128)))
    rt.state["session"] = current
    return current


def session(rt) -> EnclaveSession:
    current = rt.state.get("session")
    if current is None:
        raise ProtocolError("the enclave has not been initialised")
    return current
