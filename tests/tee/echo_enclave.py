"""TEST-ONLY enclave program used by the runtime tests (loaded as source into a simulated
enclave). Unlike the production programs it exposes quoting and sealing as entry points, so
tests can exercise the runtime's primitives; no production program does.

Attestation policy: peers must run this same code (its own measurement) on a platform whose
root is in the measured configuration.
"""

import hashlib
import os

from teeboost.tee.channel import ChannelInitiator, ChannelResponder
from teeboost.tee.quote import QuoteVerifier


def _verifier(rt):
    roots = [bytes.fromhex(r) for r in rt.config["trusted_roots"]]
    extra = [bytes.fromhex(m) for m in rt.config.get("allowed_measurements", [])]
    return QuoteVerifier(roots, [rt.measurement, *extra], allow_simulated=True)


def ecall_echo(rt, payload):
    return payload


def ecall_crash(rt, payload):
    os._exit(3)


def ecall_fail(rt, payload):
    raise ValueError("deliberate failure")


def ecall_respond(rt, hello):
    """Responder step 2; the initiator must itself be attested iff payload starts with b'A'."""
    require_peer_quote = hello[:1] == b"A"
    verifier = _verifier(rt) if require_peer_quote else None
    rt.state["responder"] = ChannelResponder(attester=rt.quote, verifier=verifier)
    return rt.state["responder"].respond(hello[1:])


def ecall_finish_responder(rt, final):
    rt.state["channel"] = rt.state.pop("responder").finish(final)
    return b""


def ecall_hello(rt, payload):
    rt.state["initiator"] = ChannelInitiator(verifier=_verifier(rt), attester=rt.quote)
    return rt.state["initiator"].hello()


def ecall_finish_initiator(rt, reply):
    final, rt.state["channel"] = rt.state.pop("initiator").finish(reply)
    return final


def ecall_reply(rt, record):
    """Open one record and answer it on the same channel."""
    data = rt.state["channel"].open(record)
    return rt.state["channel"].seal(b"echo:" + data)


def ecall_share_secret(rt, payload):
    """Active-enclave role: generate the session secret once; give it only over the attested
    channel, and only if the peer proved it runs allowed code."""
    channel = rt.state["channel"]
    if channel.peer_measurement is None:
        raise PermissionError("the session secret goes only to attested enclaves")
    secret = rt.state.setdefault("session_secret", os.urandom(32))
    return channel.seal(secret)


def ecall_take_secret(rt, record):
    rt.state["session_secret"] = rt.state["channel"].open(record)
    return b""


def ecall_secret_digest(rt, payload):
    return hashlib.sha256(rt.state["session_secret"]).digest()


def _context_split(payload):
    n = int.from_bytes(payload[:4], "big")
    return payload[4:4 + n], payload[4 + n:]


def ecall_test_quote(rt, payload):
    """nonce (32 bytes) | report data"""
    return rt.quote(payload[32:], payload[:32])


def ecall_test_seal(rt, payload):
    context, data = _context_split(payload)
    return rt.seal(data, context)


def ecall_test_unseal(rt, payload):
    context, blob = _context_split(payload)
    return rt.unseal(blob, context)
