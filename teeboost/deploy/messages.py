"""Messages that drive a deployed run (after PSI, around training and prediction)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..transport.serde import array_field, message

__all__ = ["Setup", "Finish", "Abandon", "PredictData", "Shutdown", "TeeProfile", "ProtocolSettings"]


@message
@dataclass(frozen=True)
class Setup:
    """Train on these positions of the aligned rows; hold the others as named datasets."""

    run_id: str  # names the run in both parties' audit logs
    protocol: str
    params: str  # BoostParams as JSON
    outputs: int  # trees per round (classes of a multiclass run, else 1)
    train: np.ndarray = array_field("int64", 1)
    test: np.ndarray = array_field("int64", 1)
    valid: np.ndarray = array_field("int64", 1)
    # the active party restarted with --resume: this run takes over the one it interrupted, which
    # the passive party may still hold as live (otherwise a second run while one is live is refused)
    resume: bool = False


@message
@dataclass(frozen=True)
class Finish:
    """Training is over: save your own model file."""

    run: str


@message
@dataclass(frozen=True)
class Abandon:
    """The active party gave up on this run (an error, or it was stopped): release it, so the
    next run is not refused as overlapping. The saved model is untouched."""

    run_id: str


@message
@dataclass(frozen=True)
class PredictData:
    """Hold the rows of this session's prediction alignment (PSI purpose ``predict.<session>``)
    as dataset ``predict.<session>``, for the saved model of digest ``model_digest`` (hex) only.
    Ids never travel in the clear."""

    dataset: str
    model_digest: str


@message
@dataclass(frozen=True)
class Shutdown:
    reason: str


@message
@dataclass(frozen=True)
class TeeProfile:
    """A party's public enclave set-up for one protocol, compared before any enclave starts
    (``deploy.tee_check``): public keys and the settings the enclave measurement covers."""

    party: str
    index: int  # 0: the active party
    protocol: str
    version: str  # teeboost's version, named when the enclave code differs
    platform_root: bytes  # b"" unless this party runs an enclave in this protocol
    identity: bytes  # this party's identity public key, b"" if it signs no handshake
    measurement: bytes  # of the enclave program this party runs or expects; b"" with hardware attestation
    allow_simulated: bool
    aes_bits: int
    hardware: bool  # checks quotes with [attestation] (DCAP) instead of trusted_roots
    trusted_roots: np.ndarray = array_field("uint8", 2)
    identities: np.ndarray = array_field("uint8", 2)


@message
@dataclass(frozen=True)
class ProtocolSettings:
    """The active party's ``[protocol]`` settings every party of a run must share, sent before
    any alignment so a mismatch is named before ids are exchanged (``deploy.protocol_check``)."""

    protocol: str
    scheme: str
