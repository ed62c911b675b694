"""Messages that cross the enclave boundary (ecall payloads) or travel inside attested
channel records. They are trusted code: their module source is part of the measurement."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ProtocolError
from ..transport import serde
from ..transport.serde import array_field, message

__all__ = [
    "EnclaveInit", "EnclaveColumns", "GradientsIn", "SealedRecords", "CandidatesIn",
    "Chosen", "ApplyIn", "Applied", "TreeGradients", "Candidates",
    "pack_records", "unpack_records",
]


@message
@dataclass(frozen=True)
class EnclaveInit:
    role: str  # "active" or "passive"
    party: int
    reg_lambda: float
    min_child_weight: float
    min_samples_leaf: int
    min_split_gain: float
    max_bin: int


@message
@dataclass(frozen=True)
class EnclaveColumns:
    """A party's own binned columns, handed to its own enclave: (features, rows)."""

    n_value_bins: np.ndarray = array_field("int64", 1)
    binned: np.ndarray = array_field("uint16", 2)


@message
@dataclass(frozen=True)
class GradientsIn:
    """Host -> active enclave: this tree's gradients of the sampled rows."""

    tree: int
    frac_bits: int
    n_rows: int
    rows: np.ndarray = array_field("int64", 1)
    g: np.ndarray = array_field("int64", 1)
    h: np.ndarray = array_field("int64", 1)


@message
@dataclass(frozen=True)
class SealedRecords:
    """One attested-channel record per peer party (opaque to every host)."""

    parties: np.ndarray = array_field("int32", 1)
    offsets: np.ndarray = array_field("int64", 1)
    blob: np.ndarray = array_field("uint8", 1)


@message
@dataclass(frozen=True)
class TreeGradients:
    """Inside a record, active enclave -> passive enclave: compact exact gradients."""

    tree: int
    frac_bits: int
    n_rows: int
    width_g: int
    width_h: int
    row_encoding: np.ndarray = array_field("uint8", 1)
    row_offsets: np.ndarray = array_field("int64", 1)
    row_payload: np.ndarray = array_field("uint8", 1)
    g: np.ndarray = array_field("uint8", 1)
    h: np.ndarray = array_field("uint8", 1)


@message
@dataclass(frozen=True)
class Candidates:
    """Inside a record, passive enclave -> active enclave: best split per node, as a score
    and an opaque handle (-inf score: no valid split)."""

    tree: int
    gains: np.ndarray = array_field("float64", 1)
    handles: np.ndarray = array_field("uint64", 1)


@message
@dataclass(frozen=True)
class CandidatesIn:
    """Host -> active enclave: its own best per node, and the passive parties' records."""

    tree: int
    nodes: np.ndarray = array_field("int32", 1)
    own_gains: np.ndarray = array_field("float64", 1)
    records: np.ndarray = array_field("uint8", 1)  # a SealedRecords frame


@message
@dataclass(frozen=True)
class Chosen:
    """Active enclave -> host: per node only the winner (-1: no split), its handle and gain."""

    parties: np.ndarray = array_field("int32", 1)
    handles: np.ndarray = array_field("uint64", 1)
    gains: np.ndarray = array_field("float64", 1)


@message
@dataclass(frozen=True)
class ApplyIn:
    """Host -> passive enclave: resolve won handles and partition those nodes."""

    tree: int
    nodes: np.ndarray = array_field("int32", 1)
    lefts: np.ndarray = array_field("int32", 1)
    rights: np.ndarray = array_field("int32", 1)
    handles: np.ndarray = array_field("uint64", 1)


@message
@dataclass(frozen=True)
class Applied:
    """Passive enclave -> its own host: the splits it won (its own model) and left sets."""

    features: np.ndarray = array_field("int32", 1)
    bins: np.ndarray = array_field("int32", 1)
    default_left: np.ndarray = array_field("bool", 1)
    left_bits: np.ndarray = array_field("uint8", 1)


@message
@dataclass(frozen=True)
class MaskedGradientsIn:
    """Active enclave -> host: this tree's masked gradients (g + r, h + r' in Z_2^64)."""

    g: np.ndarray = array_field("uint64", 1)
    h: np.ndarray = array_field("uint64", 1)


@message
@dataclass(frozen=True)
class MaskedSums:
    """Inside a record, passive host -> active enclave: ring sums of masked g and h per
    built node x feature x bin, how to derive the other nodes, and (unless the enclave holds
    this party's bins) each built node's index sets: its rows grouped by bin per feature."""

    tree: int
    built: np.ndarray = array_field("int32", 1)
    derived: np.ndarray = array_field("int32", 2)  # (node, parent, sibling) rows
    sums: np.ndarray = array_field("uint64", 4)  # (built, features, width, 2)
    index_counts: np.ndarray = array_field("int64", 3)  # (built, features, width) or empty
    index_rows: np.ndarray = array_field("uint32", 1)  # rows of built nodes, by feature, by bin


@message
@dataclass(frozen=True)
class BinsOnce:
    """Inside a record, passive host -> active enclave, once: the party's bin of every row
    per feature (the same information as all index sets, sent one time)."""

    n_value_bins: np.ndarray = array_field("int64", 1)
    binned: np.ndarray = array_field("uint16", 2)


@message
@dataclass(frozen=True)
class OneTeeChooseIn:
    """Host -> active enclave: own best per node, passive records, and node rows (needed
    only for parties whose bins the enclave holds)."""

    tree: int
    nodes: np.ndarray = array_field("int32", 1)
    own_gains: np.ndarray = array_field("float64", 1)
    row_nodes: np.ndarray = array_field("int32", 1)
    row_encoding: np.ndarray = array_field("uint8", 1)
    row_offsets: np.ndarray = array_field("int64", 1)
    row_payload: np.ndarray = array_field("uint8", 1)
    records: np.ndarray = array_field("uint8", 1)  # a SealedRecords frame


@message
@dataclass(frozen=True)
class SplitLocators:
    """Inside a record, active enclave -> winning passive party: which of its splits won."""

    tree: int
    nodes: np.ndarray = array_field("int32", 1)
    features: np.ndarray = array_field("int32", 1)
    bins: np.ndarray = array_field("int32", 1)
    default_left: np.ndarray = array_field("bool", 1)


@message
@dataclass(frozen=True)
class OneTeeChosen:
    """Active enclave -> host: winner per node (-1: none), winning gain, and one sealed
    locator record per winning passive party."""

    parties: np.ndarray = array_field("int32", 1)
    gains: np.ndarray = array_field("float64", 1)
    records: np.ndarray = array_field("uint8", 1)  # a SealedRecords frame


def pack_records(records: dict[int, bytes]) -> bytes:
    """{party: record bytes} -> one SealedRecords frame."""
    parties = sorted(records)
    chunks = [np.frombuffer(records[p], dtype=np.uint8) for p in parties]
    offsets = np.zeros(len(parties) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([c.size for c in chunks])
    blob = np.concatenate(chunks) if chunks else np.empty(0, dtype=np.uint8)
    return serde.encode(SealedRecords(np.array(parties, dtype=np.int32), offsets, blob))


def unpack_records(frame: bytes) -> dict[int, bytes]:
    """Inverse of ``pack_records``, with its bounds checked."""
    msg = serde.decode(frame)
    if not isinstance(msg, SealedRecords) or msg.offsets.size != msg.parties.size + 1 \
            or (msg.offsets.size and (msg.offsets[0] != 0 or msg.offsets[-1] != msg.blob.size)) \
            or np.any(np.diff(msg.offsets) < 0):
        raise ProtocolError("malformed sealed records")
    return {int(p): msg.blob[msg.offsets[i]:msg.offsets[i + 1]].tobytes() for i, p in enumerate(msg.parties)}
