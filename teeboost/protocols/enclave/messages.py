"""Messages that cross the enclave boundary (ecall payloads) or travel inside attested
channel records. They are trusted code: their module source is part of the measurement."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from teeboost.errors import ProtocolError
from teeboost.transport import serde
from teeboost.transport.serde import array_field, message

__all__ = [
    "EnclaveInit", "run_context", "partition_digest", "masked_digest", "record_digest", "RecordAck", "PartyMeta", "LevelIn", "EnclaveColumns", "SealedRecords", "CandidatesIn",
    "Chosen", "ApplyIn", "Applied", "TreeGradients", "Candidates", "TreeRows", "OwnSplitsIn",
    "pack_records", "record_parts", "unpack_records", "record_views",
]


@message
@dataclass(frozen=True)
class EnclaveInit:
    """Host -> its enclave, once: the run it serves. The run fields (protocol, run id, bins,
    channel key size, every party's identity key by index) form the run context that quotes
    bind and sealing keys are tied to, so peers see exactly what the enclave was told."""

    role: str  # "active" or "passive"
    party: int
    reg_lambda: float
    min_child_weight: float
    min_samples_leaf: int
    min_split_gain: float
    category_subsets: bool
    max_bin: int
    protocol: str
    run_id: str
    reg_alpha: float
    max_delta_step: float
    colsample_bytree: float
    column_seed: int  # the run's random_state: which columns each party's trees may split on
    weighted: bool  # the run weighs rows (sample weights, scale_pos_weight): passive policies may refuse
    party_keys: np.ndarray = array_field("uint8", 2)  # (parties, 32) Ed25519 public keys by party index
    monotone: bool = False  # some column is under a monotone constraint (gains from clipped weights)
    constraints: int = 0  # digest of the run's constraints (0: none)
    rules: np.ndarray = array_field("uint8", 1, optional=True)  # the constraints (RunConstraints.encode), checked against it


def run_context(protocol: str, run_id: str, max_bin: int, aes_bits: int, party_keys: np.ndarray,
                criteria: tuple) -> bytes:
    """SHA-256 of the attested run parameters (split criteria included: an enclave scoring by
    other rules, or sampling other columns, is another run): what a quote's report data binds
    besides the channel key, and the context every sealed blob of the run is bound to.
    ``criteria`` is ``SplitCriteria.as_tuple()``; its integers are bound exactly (a 63-bit
    seed does not survive a float)."""
    keys = np.ascontiguousarray(party_keys, dtype=np.uint8)
    if keys.ndim != 2 or keys.shape[1] != 32 or keys.shape[0] < 2:
        raise ProtocolError("party identity keys must be 32 bytes each, one per party (at least two)")
    exact = tuple(c if isinstance(c, int) else float(c) for c in criteria)
    digest = hashlib.sha256(b"teeboost-run-context-v2")
    for part in (protocol.encode(), run_id.encode(), str(max_bin).encode(), str(aes_bits).encode(), keys.tobytes(),
                 repr(exact).encode()):
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.digest()


def partition_digest(bits: np.ndarray) -> bytes:
    """SHA-256 of a partition as bits over the node's rows (``partition.masks_to_bits`` of
    one node): how a winning split's left set is promised with its score and then checked
    against the partition announced (n/8 bytes hashed, not 8 per row)."""
    return hashlib.sha256(b"teeboost-partition-v1|" + np.ascontiguousarray(bits, dtype=np.uint8).tobytes()).digest()


def masked_digest(tree: int, rows: np.ndarray, g: np.ndarray, h: np.ndarray) -> bytes:
    """SHA-256 of one tree's masked gradients as produced (enclave) and as received (passive
    party): the host that relays them cannot alter them unnoticed."""
    digest = hashlib.sha256(b"teeboost-masked-gradients-v1" + int(tree).to_bytes(8, "big", signed=True))
    for array in (np.ascontiguousarray(rows, dtype="<i8"), np.ascontiguousarray(g, dtype="<u8"),
                  np.ascontiguousarray(h, dtype="<u8")):
        digest.update(array)
    return digest.digest()


def record_digest(frame) -> bytes:
    """SHA-256 of the plaintext of a record the 1-TEE enclave sealed to a passive party: what
    the party's acknowledgement names (``RecordAck``)."""
    return hashlib.sha256(b"teeboost-record-ack-v1|" + bytes(frame)).digest()


@message
@dataclass(frozen=True)
class PartyMeta:
    """Inside the first record of a passive party's channel (1-TEE): the bin count of each of
    its features, from the party itself (never from the active host); a value it chose for
    this run, which the enclave binds into the sealing context of its checkpoints (the party
    keeps it in its own checkpoint and gives it again only when it resumes this run); and the
    limits the enclave enforces for it (0: none)."""

    n_rows: int
    seal_salt: bytes  # 32 bytes
    max_trees: int  # trees of the run, counted by index
    max_depth: int  # levels per tree
    n_value_bins: np.ndarray = array_field("int64", 1)
    categorical: np.ndarray = array_field("bool", 1)  # features split into category subsets
    names: str = "[]"  # its columns' names (JSON): what the run's constraints name


@message
@dataclass(frozen=True)
class RecordAck:
    """Inside a record, passive party -> 1-TEE enclave (bins-once): "I received and accept
    your last record" (``record_digest`` of its plaintext). The enclave computes nothing more
    over this party's bins until it has one for its last record."""

    tree: int
    digest: bytes


@message
@dataclass(frozen=True)
class EnclaveColumns:
    """A party's own binned columns, handed to its own enclave: (features, rows)."""

    n_value_bins: np.ndarray = array_field("int64", 1)
    categorical: np.ndarray = array_field("bool", 1)
    binned: np.ndarray = array_field("uint16", 2)
    names: str = "[]"  # the columns' names (JSON): what the run's constraints name


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
    """One tree's sampled rows and their exact g and h, each packed into as few bytes as the
    tree's values need (``intcodec``): host -> active enclave, and in N-TEE the same bytes,
    sealed, active enclave -> each passive enclave."""

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
    left_sums: np.ndarray = array_field("int64", 2)  # (nodes, 3): what the split sends left
    left_digests: np.ndarray = array_field("uint8", 2)  # (nodes, 32): partition_digest of what it sends left
    # under constraints: the best split's column's public monotone direction and interaction sets
    directions: np.ndarray = array_field("int8", 1, optional=True)
    memberships: np.ndarray = array_field("int64", 1, optional=True)
    held: str = "[]"  # under constraints: the constrained names among the columns its enclave was given


@message
@dataclass(frozen=True)
class CandidatesIn:
    """Host -> active enclave: its own best split per node as the (g, h, count) sums it sends
    left (valid False: none), from which the enclave computes the gain itself; and the
    passive parties' sealed records."""

    tree: int
    nodes: np.ndarray = array_field("int32", 1)
    own_valid: np.ndarray = array_field("bool", 1)
    own_left: np.ndarray = array_field("int64", 2)  # (nodes, 3)
    records: np.ndarray = array_field("uint8", 1)  # a SealedRecords frame
    own_directions: np.ndarray = array_field("int8", 1, optional=True)  # under monotone constraints: its column's direction


@message
@dataclass(frozen=True)
class LevelIn:
    """Host -> active enclave: last level's partitions (left sets as bitmasks over the parent
    rows, in the order the enclave chose the splits) and this level's nodes. The enclave
    checks them against the splits it chose and builds every party's request itself."""

    tree: int
    nodes: np.ndarray = array_field("int32", 1)
    split_nodes: np.ndarray = array_field("int32", 1)
    split_lefts: np.ndarray = array_field("int32", 1)
    split_rights: np.ndarray = array_field("int32", 1)
    split_bits: np.ndarray = array_field("uint8", 1)
    # under constraints (the host's grower keeps them): each node's weight bounds and interaction sets
    bounds: np.ndarray = array_field("float64", 2, optional=True)
    sets: np.ndarray = array_field("int64", 1, optional=True)


@message
@dataclass(frozen=True)
class Chosen:
    """Active enclave -> host: per node only the winner (-1: no split), its handle and gain
    (and, under constraints, the winning column's public direction and interaction sets)."""

    parties: np.ndarray = array_field("int32", 1)
    handles: np.ndarray = array_field("uint64", 1)
    gains: np.ndarray = array_field("float64", 1)
    directions: np.ndarray = array_field("int8", 1, optional=True)
    memberships: np.ndarray = array_field("int64", 1, optional=True)


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
    bins: np.ndarray = array_field("int64", 1)  # threshold bin, or category mask of a categorical feature
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
    gradients_digest: bytes  # masked_digest of the masked gradients this party received


@message
@dataclass(frozen=True)
class BinsOnce:
    """Inside a record, passive host -> active enclave, once: the party's bin of every row
    per feature (the same information as all index sets, sent one time)."""

    n_value_bins: np.ndarray = array_field("int64", 1)
    categorical: np.ndarray = array_field("bool", 1)
    binned: np.ndarray = array_field("uint16", 2)


@message
@dataclass(frozen=True)
class OneTeeChooseIn:
    """Host -> active enclave: last level's partitions and this level's nodes (as in
    ``LevelIn``), its own best split per node as left sums, and the passive records."""

    tree: int
    nodes: np.ndarray = array_field("int32", 1)
    split_nodes: np.ndarray = array_field("int32", 1)
    split_lefts: np.ndarray = array_field("int32", 1)
    split_rights: np.ndarray = array_field("int32", 1)
    split_bits: np.ndarray = array_field("uint8", 1)
    own_valid: np.ndarray = array_field("bool", 1)
    own_left: np.ndarray = array_field("int64", 2)
    records: np.ndarray = array_field("uint8", 1)  # a SealedRecords frame
    own_directions: np.ndarray = array_field("int8", 1, optional=True)  # under constraints (see LevelIn)
    bounds: np.ndarray = array_field("float64", 2, optional=True)
    sets: np.ndarray = array_field("int64", 1, optional=True)


@message
@dataclass(frozen=True)
class TreeRows:
    """Inside a record, 1-TEE enclave -> passive party (bins-once): the rows of this tree. With
    the level requests that follow (sealed too) they are all a passive party learns of a tree
    before its own splits; the enclave sums the party's bins itself."""

    tree: int
    n_rows: int
    row_encoding: np.ndarray = array_field("uint8", 1)
    row_offsets: np.ndarray = array_field("int64", 1)
    row_payload: np.ndarray = array_field("uint8", 1)


@message
@dataclass(frozen=True)
class OwnSplitsIn:
    """Host -> 1-TEE enclave (bins-once): its own best split per node of this level as the
    (g, h, count) sums it sends left (valid False: none); the enclave computes the gains."""

    tree: int
    nodes: np.ndarray = array_field("int32", 1)
    own_valid: np.ndarray = array_field("bool", 1)
    own_left: np.ndarray = array_field("int64", 2)
    own_directions: np.ndarray = array_field("int8", 1, optional=True)  # under monotone constraints


@message
@dataclass(frozen=True)
class SplitLocators:
    """Inside a record, active enclave -> winning passive party: which of its splits won, and
    the ids the enclave gave the children of each (the host's request must name the same)."""

    tree: int
    nodes: np.ndarray = array_field("int32", 1)
    lefts: np.ndarray = array_field("int32", 1)
    rights: np.ndarray = array_field("int32", 1)
    features: np.ndarray = array_field("int32", 1)
    bins: np.ndarray = array_field("int64", 1)  # threshold bin, or category mask of a categorical feature
    default_left: np.ndarray = array_field("bool", 1)


@message
@dataclass(frozen=True)
class OneTeeChosen:
    """Active enclave -> host: winner per node (-1: none), winning gain, and one sealed
    locator record per winning passive party."""

    parties: np.ndarray = array_field("int32", 1)
    gains: np.ndarray = array_field("float64", 1)
    records: np.ndarray = array_field("uint8", 1)  # a SealedRecords frame
    directions: np.ndarray = array_field("int8", 1, optional=True)  # under constraints: each winner's column's
    memberships: np.ndarray = array_field("int64", 1, optional=True)


def pack_records(records: dict[int, bytes]) -> bytes:
    """{party: record bytes} -> one SealedRecords frame."""
    return b"".join(record_parts(records))


def record_parts(records: dict[int, bytes]) -> list:
    """``pack_records`` as frame parts, for an ecall to return without joining them (a single
    large record is then never copied inside the enclave)."""
    parties = sorted(records)
    chunks = [np.frombuffer(records[p], dtype=np.uint8) for p in parties]
    offsets = np.zeros(len(parties) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([c.size for c in chunks])
    blob = chunks[0] if len(chunks) == 1 else (np.concatenate(chunks) if chunks else np.empty(0, dtype=np.uint8))
    return serde.encode_parts(SealedRecords(np.array(parties, dtype=np.int32), offsets, blob))


def unpack_records(frame: bytes) -> dict[int, bytes]:
    """Inverse of ``pack_records``, with its bounds checked."""
    return {party: record.tobytes() for party, record in record_views(frame).items()}


def record_views(frame: bytes) -> dict[int, np.ndarray]:
    """``unpack_records`` as uint8 views of ``frame``: records to relay, not copied."""
    msg = serde.decode(frame)
    if not isinstance(msg, SealedRecords) or msg.offsets.size != msg.parties.size + 1 \
            or (msg.offsets.size and (msg.offsets[0] != 0 or msg.offsets[-1] != msg.blob.size)) \
            or np.any(np.diff(msg.offsets) < 0):
        raise ProtocolError("malformed sealed records")
    return {int(p): msg.blob[msg.offsets[i]:msg.offsets[i + 1]] for i, p in enumerate(msg.parties)}
