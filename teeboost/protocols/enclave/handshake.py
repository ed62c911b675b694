"""Enclave-side attested-channel setup shared by the programs where every party has an
enclave (N-TEE, strict): the active enclave initiates, each passive enclave responds, both
attest, and each party's pinned identity key signs the handshake before the channel counts.

Programs import these ``ecall_`` functions into their own namespace, which is what makes
them entry points; this module is measured with them.
"""

from __future__ import annotations

from teeboost.errors import ProtocolError
from teeboost.tee.channel import ChannelInitiator, ChannelResponder
from teeboost.tee.quote import QuoteVerifier
from teeboost.transport import serde
from teeboost.protocols.enclave import messages as m
from teeboost.protocols.enclave.session import session, start_session

__all__ = ["verifier", "expect", "role", "init_session", "ecall_hello", "ecall_finish_initiator", "ecall_confirm",
           "ecall_respond", "ecall_finish_responder"]


def verifier(rt):
    """Peers must run this very program (same measurement) on a trusted platform."""
    roots = [bytes.fromhex(r) for r in rt.config["trusted_roots"]]
    return QuoteVerifier(roots, [rt.measurement], allow_simulated=bool(rt.config.get("allow_simulated", False)))


def expect(frame, cls):
    msg = serde.decode(frame)
    if not isinstance(msg, cls):
        raise ProtocolError(f"expected {cls.__name__}, got {type(msg).__name__}")
    return msg


def role(rt, wanted):
    current = session(rt)
    if current.role != wanted:
        raise ProtocolError(f"this enclave serves the {current.role} role")
    return current


def init_session(rt, payload, protocol):
    """The one init: party 0 is the active role, every other party passive."""
    init = expect(payload, m.EnclaveInit)
    if init.role not in ("active", "passive") or (init.role == "active") != (init.party == 0):
        raise ProtocolError(f"role {init.role!r} does not fit party {init.party}")
    return start_session(rt, init, protocol)


def ecall_hello(rt, payload):
    current = role(rt, "active")
    peer = int.from_bytes(payload, "big")
    current.begin(peer)
    initiator = ChannelInitiator(verifier=verifier(rt), attester=rt.quote, aes_bits=current.aes_bits,
                                 context=current.context)
    rt.state.setdefault("initiators", {})[peer] = initiator
    return initiator.hello()


def ecall_finish_initiator(rt, payload):
    """-> final handshake message and the handshake hash the active host signs."""
    current = role(rt, "active")
    peer = int.from_bytes(payload[:4], "big")
    initiator = rt.state.get("initiators", {}).pop(peer, None)
    if initiator is None:
        raise ProtocolError(f"no handshake with party {peer} is under way")
    final, channel = initiator.finish(payload[4:])
    current.established(peer, channel)
    return m.pack_records({0: final, 1: channel.handshake_hash})


def ecall_confirm(rt, payload):
    """The passive party's signature over the handshake: only then the channel counts."""
    peer = int.from_bytes(payload[:4], "big")
    role(rt, "active").confirm(peer, "responder", payload[4:])
    return b""


def ecall_respond(rt, hello):
    current = role(rt, "passive")
    current.begin(0)
    rt.state["responder"] = ChannelResponder(attester=rt.quote, verifier=verifier(rt), aes_bits=current.aes_bits,
                                             context=current.context)
    return rt.state["responder"].respond(hello)


def ecall_finish_responder(rt, payload):
    """final handshake message + the active party's signature -> the handshake hash this
    party's host signs in turn."""
    current = role(rt, "passive")
    responder = rt.state.pop("responder", None)
    if responder is None:
        raise ProtocolError("no handshake is under way")
    parts = m.unpack_records(payload)
    channel = responder.finish(parts.get(0, b""))
    current.established(0, channel)
    current.confirm(0, "initiator", parts.get(1, b""))
    return channel.handshake_hash
