"""Attested secure channels: X25519 bound to quotes, HKDF-SHA256, AES-GCM records.

Three handshake messages between an initiator and a responder (an enclave, or a party's
host for 1-TEE, or two enclaves for N-TEE):

1. initiator -> responder: nonce_i
2. responder -> initiator: nonce_r, ephemeral X25519 key e_r, quote(report_data =
   H("responder" | e_r | nonce_r), freshness nonce = nonce_i)
3. initiator -> responder: e_i, quote(H("initiator" | e_i | nonce_i), nonce_r) or no quote
   when the initiator is a plain party (then its identity comes from mutual TLS)

Each side verifies the other's quote (if it requires one), so the shared secret X25519(e_i, e_r)
is known only to the attested code. Keys: HKDF-SHA256 over it, salted with a hash of the whole
handshake, one AES-GCM key per direction (128-bit by default as in the seed paper, 256
optional). Records carry a sequence number that must be exactly the next one expected;
replayed, reordered, truncated or tampered records and a stream cut before its close record
all raise the same ``IntegrityError``.
"""

from __future__ import annotations

import hashlib
import os
import struct
from typing import Callable

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ..errors import AttestationError, ConfigError, IntegrityError
from .quote import NONCE_BYTES, Quote, QuoteVerifier

__all__ = ["ChannelInitiator", "ChannelResponder", "SecureChannel", "Attester", "party_statement",
           "verify_party_signature"]

Attester = Callable[[bytes, bytes], bytes]  # (report_data, nonce) -> quote bytes

_DATA, _CLOSE = 0, 1
_SEQ = struct.Struct(">QB")
_TAG = 16  # AES-GCM tag bytes


def _pack(*parts: bytes) -> bytes:
    return b"".join(len(p).to_bytes(4, "big") + p for p in parts)


def _unpack(data: bytes, count: int) -> list[bytes]:
    parts, position = [], 0
    for _ in range(count):
        if position + 4 > len(data):
            raise AttestationError()
        length = int.from_bytes(data[position:position + 4], "big")
        position += 4
        if position + length > len(data):
            raise AttestationError()
        parts.append(bytes(data[position:position + length]))  # from any bytes-like frame
        position += length
    if position != len(data):
        raise AttestationError()
    return parts


def _public_bytes(key: X25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _binding(role: bytes, public: bytes, nonce: bytes, context: bytes) -> bytes:
    """Report data binding an ephemeral key to this handshake and to the run the enclave was
    initialised for (``context``: hash of its attested run parameters), 64 bytes."""
    return hashlib.sha512(b"teeboost-channel-v2|" + role + b"|" + public + b"|" + nonce + b"|" + context).digest()


def party_statement(role: str, party: int, context: bytes, handshake_hash: bytes) -> bytes:
    """What a party's long-term identity key signs for one channel: its role and index in the
    run, the run's context and the hash of the whole handshake (so it cannot be replayed into
    another handshake, run or slot)."""
    if role not in ("initiator", "responder"):
        raise ValueError(f"role {role!r}")
    return b"teeboost-party-handshake-v1|" + role.encode() + b"|" + party.to_bytes(4, "big") + b"|" + context + \
        b"|" + handshake_hash


def verify_party_signature(public_key: bytes, signature: bytes, statement: bytes) -> None:
    """``AttestationError`` unless ``signature`` is the pinned party key's over ``statement``."""
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, statement)
    except (InvalidSignature, ValueError):
        raise AttestationError() from None


def _key_bytes(bits: int) -> int:
    if bits not in (128, 256):
        raise ConfigError(f"aes_bits={bits} must be 128 or 256")
    return bits // 8


class SecureChannel:
    """One attested session: ``seal`` outgoing records, ``open`` incoming ones."""

    def __init__(self, send_key: bytes, recv_key: bytes, peer_quote: Quote | None, handshake_hash: bytes = b"") -> None:
        self.handshake_hash = handshake_hash  # SHA-256 of the whole handshake, the same at both ends
        self._send = AESGCM(send_key)
        self._recv = AESGCM(recv_key)
        self._recv_key = recv_key
        self._send_seq = 0
        self._recv_seq = 0
        self._peer_closed = False
        self._closed = False
        self.peer_quote = peer_quote  # None when the peer is an unattested party

    @property
    def peer_measurement(self) -> bytes | None:
        return None if self.peer_quote is None else self.peer_quote.measurement

    def _record(self, kind: int, data: bytes) -> bytes:
        if self._closed:
            raise IntegrityError("channel already closed")
        header = _SEQ.pack(self._send_seq, kind)
        nonce = b"\0\0\0\0" + header[:8]
        self._send_seq += 1
        if not hasattr(self._send, "encrypt_into"):  # cryptography < 44
            return header + self._send.encrypt(nonce, data, header)
        record = bytearray(_SEQ.size + len(memoryview(data).cast("B")) + _TAG)
        record[:_SEQ.size] = header
        self._send.encrypt_into(nonce, data, header, memoryview(record)[_SEQ.size:])
        return record

    def seal(self, data: bytes) -> bytes:
        """One record of ``data`` (any bytes-like object), encrypted straight into the record:
        a bytes-like object, the one copy of a large frame."""
        return self._record(_DATA, data)

    def seal_close(self) -> bytes:
        record = self._record(_CLOSE, b"")
        self._closed = True
        return record

    def open(self, record: bytes) -> bytes | None:
        """Plaintext of the next record (None for the peer's close record)."""
        return self._open(record, in_place=False)

    def open_in_place(self, record: bytearray) -> memoryview | None:
        """``open`` that decrypts the record in its own buffer (the plaintext overwrites the
        ciphertext, whose tag was checked): a large record never exists twice. Returns a view
        of ``record``."""
        return self._open(record, in_place=True)

    def _open(self, record, in_place: bool):
        if self._peer_closed or len(record) < _SEQ.size + _TAG:
            raise IntegrityError()
        seq, kind = _SEQ.unpack_from(record)
        if seq != self._recv_seq or kind not in (_DATA, _CLOSE):
            raise IntegrityError()
        header = bytes(record[:_SEQ.size])
        nonce, body = b"\0\0\0\0" + header[:8], memoryview(record)[_SEQ.size:]
        try:
            if in_place:
                data = body[:len(body) - _TAG]
                _decrypt_in_place(self._recv_key, nonce, header, data, bytes(body[len(body) - _TAG:]))
            else:
                data = self._recv.decrypt(nonce, body, header)
        except InvalidTag:
            raise IntegrityError() from None
        self._recv_seq += 1
        if kind == _CLOSE:
            self._peer_closed = True
            return None
        return data

    def require_closed(self) -> None:
        """The peer's stream must have ended with its close record (else it was truncated)."""
        if not self._peer_closed:
            raise IntegrityError()


_CHUNK = 1 << 20


def _decrypt_in_place(key: bytes, nonce: bytes, header: bytes, data: memoryview, tag: bytes) -> None:
    """AES-GCM decryption of ``data`` over itself, a MiB at a time through one scratch buffer
    (cryptography 51 refuses ``decrypt_into`` a buffer that overlaps what it reads): a large
    record never exists twice. The tag is checked at the end (InvalidTag), and a record that
    fails it is thrown away by the caller, half decrypted."""
    decryptor = Cipher(algorithms.AES(key), modes.GCM(nonce, tag)).decryptor()
    decryptor.authenticate_additional_data(header)
    scratch = memoryview(bytearray(min(len(data), _CHUNK) + 15))  # update_into wants a block's slack
    for at in range(0, len(data), _CHUNK):
        done = decryptor.update_into(data[at:at + _CHUNK], scratch)
        data[at:at + done] = scratch[:done]  # GCM is a stream mode: a chunk's plaintext is as long as it
    decryptor.finalize()


def _derive(shared: bytes, transcript: bytes, key_bytes: int) -> tuple[bytes, bytes]:
    keys = HKDF(algorithm=hashes.SHA256(), length=2 * key_bytes, salt=hashlib.sha256(transcript).digest(),
                info=b"teeboost channel keys v1").derive(shared)
    return keys[:key_bytes], keys[key_bytes:]  # (initiator -> responder, responder -> initiator)


class ChannelInitiator:
    """``context``: the run context the responder's quote must bind (and this side's, if it
    attests too)."""

    def __init__(self, *, verifier: QuoteVerifier, attester: Attester | None = None, aes_bits: int = 128,
                 context: bytes = b"") -> None:
        self.verifier = verifier
        self.attester = attester
        self.context = context
        self.key_bytes = _key_bytes(aes_bits)
        self._nonce = os.urandom(NONCE_BYTES)

    def hello(self) -> bytes:
        return _pack(b"teeboost-hello-v1", self._nonce)

    def finish(self, reply: bytes) -> tuple[bytes, SecureChannel]:
        nonce_r, responder_public, responder_quote = _unpack(reply, 3)
        if len(nonce_r) != NONCE_BYTES or len(responder_public) != 32:
            raise AttestationError()
        quote = self.verifier.verify(responder_quote, nonce=self._nonce,
                                     report_data=_binding(b"responder", responder_public, nonce_r, self.context))
        ephemeral = X25519PrivateKey.generate()
        public = _public_bytes(ephemeral)
        own_quote = b""
        if self.attester is not None:
            own_quote = self.attester(_binding(b"initiator", public, self._nonce, self.context), nonce_r)
        shared = ephemeral.exchange(X25519PublicKey.from_public_bytes(responder_public))
        transcript = _pack(self._nonce, nonce_r, responder_public, responder_quote, public, own_quote)
        send, recv = _derive(shared, transcript, self.key_bytes)
        return _pack(public, own_quote), SecureChannel(send, recv, quote, hashlib.sha256(transcript).digest())


class ChannelResponder:
    """The attested side (an enclave). ``verifier=None`` accepts an unattested initiator."""

    def __init__(self, *, attester: Attester, verifier: QuoteVerifier | None = None, aes_bits: int = 128,
                 context: bytes = b"") -> None:
        self.attester = attester
        self.verifier = verifier
        self.context = context
        self.key_bytes = _key_bytes(aes_bits)
        self._state: tuple[bytes, bytes, X25519PrivateKey, bytes, bytes] | None = None

    def respond(self, hello: bytes) -> bytes:
        label, nonce_i = _unpack(hello, 2)
        if label != b"teeboost-hello-v1" or len(nonce_i) != NONCE_BYTES:
            raise AttestationError()
        nonce_r = os.urandom(NONCE_BYTES)
        ephemeral = X25519PrivateKey.generate()
        public = _public_bytes(ephemeral)
        quote = self.attester(_binding(b"responder", public, nonce_r, self.context), nonce_i)
        self._state = (nonce_i, nonce_r, ephemeral, public, quote)
        return _pack(nonce_r, public, quote)

    def finish(self, final: bytes) -> SecureChannel:
        if self._state is None:
            raise AttestationError()
        nonce_i, nonce_r, ephemeral, public, own_quote = self._state
        self._state = None  # one handshake per responder state
        initiator_public, initiator_quote = _unpack(final, 2)
        if len(initiator_public) != 32:
            raise AttestationError()
        peer = None
        if self.verifier is not None:
            peer = self.verifier.verify(initiator_quote, nonce=nonce_r,
                                        report_data=_binding(b"initiator", initiator_public, nonce_i, self.context))
        shared = ephemeral.exchange(X25519PublicKey.from_public_bytes(initiator_public))
        transcript = _pack(nonce_i, nonce_r, public, own_quote, initiator_public, initiator_quote)
        to_responder, to_initiator = _derive(shared, transcript, self.key_bytes)
        return SecureChannel(to_initiator, to_responder, peer, hashlib.sha256(transcript).digest())
