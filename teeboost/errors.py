"""One exception family, so callers can catch everything teeboost raises with one clause.

Messages always name the thing that is wrong (file, column, party, field and value), because
federations fail between organisations where nobody can attach a debugger to the other side.
"""

from __future__ import annotations

__all__ = [
    "TeeboostError",
    "ConfigError",
    "DataError",
    "ProtocolError",
    "ModelFileError",
    "AttestationError",
    "IntegrityError",
    "EnclaveError",
    "CheckpointError",
    "PeerUnavailable", "Busy", "Refused",
]


class TeeboostError(Exception):
    """Base class of every error teeboost raises on purpose."""


class ConfigError(TeeboostError, ValueError):
    """A parameter is out of range or inconsistent (names the field and the value)."""


class DataError(TeeboostError, ValueError):
    """Input data is unusable (names the file or party, the column and the offending value)."""


class ProtocolError(TeeboostError):
    """A peer sent a message that does not fit the protocol (wrong type, shape or state)."""


class PeerUnavailable(ProtocolError):
    """A peer could not be reached or went away; safe to wait for it and resume."""


class Busy(ProtocolError):
    """A party is serving another session that cannot run beside this one; ask again later."""


class Refused(TeeboostError):
    """A party cannot serve a request for a reason of its own (its data, files or a fault):
    what its peer is told is a reason code and a reference, never the details, which stay in
    the party's own log (they may name its customers' ids, values or paths)."""


class CheckpointError(TeeboostError):
    """A checkpoint is missing, corrupt, or belongs to another run (names the file and party)."""


class ModelFileError(TeeboostError):
    """A saved model file is missing, of another format or version, or inconsistent."""


class AttestationError(TeeboostError):
    """Remote attestation failed. Deliberately says nothing about which check failed."""

    def __init__(self, message: str = "remote attestation failed") -> None:
        super().__init__(message)


class IntegrityError(TeeboostError):
    """A protected message or sealed blob was tampered with, replayed, reordered or truncated.
    Deliberately says nothing about which check failed."""

    def __init__(self, message: str = "message integrity check failed") -> None:
        super().__init__(message)


class EnclaveError(TeeboostError):
    """An enclave could not be started, crashed, timed out, or refused an ecall."""
