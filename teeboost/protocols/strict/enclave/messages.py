"""Strict mode's trusted messages: what crosses its enclaves' boundaries and channels.

Every record a host relays must have a size that depends only on public parameters (rows,
features, depth, bins, trees): scalars in a frame's JSON header are only public schedule
values (tree index, depth); anything that follows from data travels in fixed-shape arrays.
Per level a record covers every position of that depth, split or not, and every row of the
run, sampled or not (``tests/test_strict.py`` checks that two datasets of one shape give
records of identical types and sizes).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np

from teeboost.core.tree import OwnerTable, SplitRecord
from teeboost.errors import ProtocolError
from teeboost.transport import serde
from teeboost.transport.serde import array_field, message

__all__ = ["StrictActiveLoad", "StrictPassiveLoad", "StrictLevel", "StrictCandidates", "StrictDecision",
           "StrictPartition", "StrictFinish", "StrictStep", "StrictReplies", "StrictReleased", "StrictRecordTable", "StrictFinished", "StrictDisclose", "StrictPredictIn", "StrictPredictRequest",
           "StrictRecordsIn", "StrictRecordBits", "StrictPredictions", "StrictCheckpoint", "StrictLedger", "GRADIENT_BYTES", "pack_fixed",
           "unpack_fixed", "bits_of", "from_bits", "expect", "model_digest",
           "record_arrays", "go_left_by_record"]

#: Fixed-point gradients travel in 7 bytes each: their sum over all rows is below 2**52.
GRADIENT_BYTES = 7


def pack_fixed(values: np.ndarray) -> np.ndarray:
    """int64 -> the low GRADIENT_BYTES bytes of each (little-endian two's complement)."""
    raw = np.ascontiguousarray(values, dtype="<i8").view(np.uint8).reshape(-1, 8)
    return raw[:, :GRADIENT_BYTES].reshape(-1).copy()


def unpack_fixed(data: np.ndarray, count: int) -> np.ndarray:
    if data.size != GRADIENT_BYTES * count:
        raise ProtocolError(f"{data.size} bytes do not hold {count} gradients")
    full = np.zeros((count, 8), dtype=np.uint8)
    full[:, :GRADIENT_BYTES] = data.reshape(count, GRADIENT_BYTES)
    full[:, GRADIENT_BYTES:] = np.where(full[:, GRADIENT_BYTES - 1:GRADIENT_BYTES] >= 128, 255, 0)
    return full.reshape(-1).view("<i8").astype(np.int64)


def record_arrays(owner: OwnerTable) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A party's split records as (ids, features, thresholds, missing left, category masks) arrays."""
    items = owner.items()
    return (np.array([i for i, _ in items], dtype=np.int64), np.array([r.feature for _, r in items], dtype=np.int32),
            np.array([r.threshold for _, r in items], dtype=np.float64),
            np.array([r.missing_left for _, r in items], dtype=bool),
            np.array([r.categories for _, r in items], dtype=np.int64))


def go_left_by_record(ids, features, thresholds, missing_left, categories, raw: np.ndarray) -> dict[int, np.ndarray]:
    """Record id -> does each row of ``raw`` go left there (the owner table's own rule)."""
    table = OwnerTable()
    if not ids.size == features.size == thresholds.size == missing_left.size == categories.size:
        raise ProtocolError("split record arrays differ in length")
    for i, f, t, left, mask in zip(ids, features, thresholds, missing_left, categories):
        if not 0 <= int(f) < raw.shape[1]:
            raise ProtocolError(f"record {int(i)} names feature {int(f)}; the rows have {raw.shape[1]}")
        if not 0 <= int(mask) < (1 << 62):
            raise ProtocolError(f"record {int(i)} has category mask {int(mask)} out of range")
        table.insert(int(i), SplitRecord(int(f), float(t), bool(left), 0, int(mask)))
    rows = np.arange(raw.shape[0])
    return {record: table.go_left(raw, record, rows) for record, _ in table.items()}


def bits_of(flags: np.ndarray) -> np.ndarray:
    return np.packbits(np.asarray(flags, dtype=bool))


def from_bits(packed: np.ndarray, count: int, what: str) -> np.ndarray:
    if packed.size != (count + 7) // 8:
        raise ProtocolError(f"{what}: {packed.size} bytes do not hold {count} bits")
    return np.unpackbits(packed, count=count).astype(bool)


# ---- host -> its own enclave

@message
@dataclass(frozen=True)
class StrictActiveLoad:
    """Active host -> its enclave, once: everything the enclave trains from. Rows are the
    training rows followed by the validation rows (the latter are routed, never summed)."""

    params: str  # BoostParams as JSON; its split criteria must equal the attested ones
    objective: str
    classes: str  # JSON list or null
    n_train: int
    n_valid: int
    outputs: int
    labels: np.ndarray = array_field("float64", 1)
    valid_labels: np.ndarray = array_field("float64", 1)
    n_value_bins: np.ndarray = array_field("int64", 1)
    categorical: np.ndarray = array_field("bool", 1)  # features split into category subsets
    binned: np.ndarray = array_field("uint16", 2)  # (features, n_train + n_valid)
    weights: np.ndarray = array_field("float64", 1)  # sample weight per training row (all 1: none)
    valid_weights: np.ndarray = array_field("float64", 1)  # per validation row, for its (unpublished) metrics
    # the label owner's [policy] max_passive_features (0: none), enforced by every passive enclave
    max_passive_features: int = 0
    names: str = "[]"  # its columns' names (JSON): what the run's constraints name


@message
@dataclass(frozen=True)
class StrictPassiveLoad:
    """Passive host -> its enclave, once: its binned training rows then validation rows, and
    its policy's limits on the model (0: none), which the enclave enforces level by level."""

    n_train: int
    n_valid: int
    max_trees: int
    max_depth: int
    n_value_bins: np.ndarray = array_field("int64", 1)
    categorical: np.ndarray = array_field("bool", 1)
    binned: np.ndarray = array_field("uint16", 2)
    # every feature's cut points back to back (n_value_bins - 1 each): the enclave turns the bins
    # of the splits this party wins into thresholds itself, so its records never pass the host
    cuts: np.ndarray = array_field("float64", 1)
    names: str = "[]"  # its columns' names (JSON): what the run's constraints name


# ---- active enclave <-> passive enclaves (inside channel records)

@message
@dataclass(frozen=True)
class StrictLevel:
    """Per level, active -> every passive enclave. Depth 0 carries the tree's gradients of
    every row (zero outside the sample; ``weight`` bits mark sampled training rows); deeper
    levels carry each row's move (2-bit codes) and which parent positions split."""

    tree: int
    depth: int
    n_train: int  # the first n_train rows are training rows (each passive party checks its own count)
    frac_bits: np.ndarray = array_field("int64", 1)  # (1,) at depth 0, else empty
    g: np.ndarray = array_field("uint8", 1)
    h: np.ndarray = array_field("uint8", 1)
    weight: np.ndarray = array_field("uint8", 1)
    codes: np.ndarray = array_field("uint8", 1)
    parent_split: np.ndarray = array_field("uint8", 1)
    max_features: int = 0  # the label owner's cap on each passive party's columns (0: none); public policy
    # under constraints: every position's weight bounds and interaction sets (padding: unbounded, all)
    bounds: np.ndarray = array_field("float64", 2, optional=True)
    sets: np.ndarray = array_field("int64", 1, optional=True)


@message
@dataclass(frozen=True)
class StrictCandidates:
    """Passive -> active enclave: its best split at every position of the level (gain -inf:
    none), an opaque handle, and the (g, h, count) sums it sends left."""

    tree: int
    depth: int
    gains: np.ndarray = array_field("float64", 1)
    handles: np.ndarray = array_field("uint64", 1)
    left_sums: np.ndarray = array_field("int64", 2)
    # under constraints: each position's best column's public direction and interaction sets
    directions: np.ndarray = array_field("int8", 1, optional=True)
    memberships: np.ndarray = array_field("int64", 1, optional=True)
    held: str = "[]"  # under constraints: the constrained names among the columns its enclave was given


@message
@dataclass(frozen=True)
class StrictDecision:
    """Active -> every passive enclave: at which positions the recipient's split won (and
    its handle there); every party gets one, winner or not."""

    tree: int
    depth: int
    mine: np.ndarray = array_field("uint8", 1)
    handles: np.ndarray = array_field("uint64", 1)


@message
@dataclass(frozen=True)
class StrictPartition:
    """Passive -> active enclave: the rows going left at the positions it won (a bit per
    row of the run) and the record ids of those splits (0 elsewhere)."""

    tree: int
    depth: int
    left: np.ndarray = array_field("uint8", 1)
    records: np.ndarray = array_field("int64", 1)


@message
@dataclass(frozen=True)
class StrictFinish:
    """Active -> every passive enclave, once: training is over and the model keeps the
    first ``n_trees`` trees (early stopping); the enclave seals its records for its host to
    keep, bound to the digest of the published model (prediction is bound to it)."""

    n_trees: int
    model_digest: bytes


# ---- enclave <-> its own host while training

@message
@dataclass(frozen=True)
class StrictStep:
    """Active enclave -> host: relay records ("send": to every passive party, no answer
    needed yet; "collect": hand back their answers), or publish ("progress", "checkpoint",
    "done"; ``info`` is JSON, ``blob`` a sealed checkpoint)."""

    kind: str
    label: str
    tree: int
    info: str
    records: np.ndarray = array_field("uint8", 1)  # a SealedRecords frame
    blob: np.ndarray = array_field("uint8", 1)


@message
@dataclass(frozen=True)
class StrictReplies:
    """Host -> active enclave: the passive enclaves' records for the last "collect"."""

    records: np.ndarray = array_field("uint8", 1)


@message
@dataclass(frozen=True)
class StrictReleased:
    """Passive enclave -> its own host at the end: its party's split records (its share of
    the model), ids in increasing order, bins to be mapped to its thresholds by the host."""

    ids: np.ndarray = array_field("int64", 1)
    features: np.ndarray = array_field("int32", 1)
    bins: np.ndarray = array_field("int64", 1)  # threshold bin, or category mask of a categorical feature
    default_left: np.ndarray = array_field("bool", 1)
    trees: np.ndarray = array_field("int32", 1)
    model_digest: bytes = b""  # of the published model these records belong to


@message
@dataclass(frozen=True)
class StrictRecordTable:
    """A passive party's split records with raw thresholds (or category masks): sealed by its
    enclave at the end of a strict run, and opened only inside its enclave (prediction) or for
    a disclosure the label owner signed (``strict/enclave/consent``). ``active_key``: the label owner's
    pinned identity key of the run, which signs consents. Padded with id 0 to one slot per
    position the run decided, so the sealed size says nothing about how many splits it won."""

    party: int
    model_digest: bytes
    active_key: bytes
    n_features: int  # the party's columns in the run: rows to score must have exactly these
    ids: np.ndarray = array_field("int64", 1)
    features: np.ndarray = array_field("int32", 1)
    thresholds: np.ndarray = array_field("float64", 1)
    missing_left: np.ndarray = array_field("bool", 1)
    categories: np.ndarray = array_field("int64", 1)
    trees: np.ndarray = array_field("int32", 1)


@message
@dataclass(frozen=True)
class StrictFinished:
    """Passive enclave -> its own host at the end of a strict run: what the host keeps. No
    split record: they are in ``sealed``, which only this enclave code on this platform opens."""

    model_digest: bytes
    n_trees: int
    sealed: np.ndarray = array_field("uint8", 1)


@message
@dataclass(frozen=True)
class StrictDisclose:
    """Passive host -> a fresh enclave of its own: open the sealed records of the model of this
    digest, on the label owner's signed consent (``strict_consent.consent_statement``)."""

    model_digest: bytes
    signature: bytes
    sealed: np.ndarray = array_field("uint8", 1)


def model_digest(published: dict) -> bytes:
    """SHA-256 of a published ensemble (canonical JSON): what prediction is bound to."""
    return hashlib.sha256(b"teeboost-strict-model-v1" + json.dumps(published, sort_keys=True).encode()).digest()


# ---- prediction

TAG_BYTES = 16  # a scoring's tag: SHA-256 of the model digest and the active party's inputs, cut

@message
@dataclass(frozen=True)
class StrictPredictIn:
    """Active host -> its enclave: the published model (JSON), its own split records as
    bins of its own binned rows, and how many rows to predict."""

    model: str
    n_rows: int
    own_ids: np.ndarray = array_field("int64", 1)
    own_features: np.ndarray = array_field("int32", 1)
    own_thresholds: np.ndarray = array_field("float64", 1)
    own_missing_left: np.ndarray = array_field("bool", 1)
    own_categories: np.ndarray = array_field("int64", 1)  # category code masks (0: threshold split)
    raw: np.ndarray = array_field("float64", 2)  # (rows, own features)


@message
@dataclass(frozen=True)
class StrictPredictRequest:
    """Active -> every passive enclave: evaluate all your records on the n rows to predict,
    for the model of this digest (computed by the active enclave from the model it uses), which
    releases ``outputs`` values per row. ``tags``: per row, a digest of the model and the active
    party's own inputs for that row, so scoring a row again exactly as before is free, and
    scoring it with other active inputs is charged again."""

    n_rows: int
    model_digest: bytes
    outputs: int
    tags: np.ndarray = array_field("uint8", 2)  # (rows, TAG_BYTES)


@message
@dataclass(frozen=True)
class StrictRecordsIn:
    """Passive host -> its enclave: its sealed split records (or, when they were disclosed or
    one operator runs every party, the records themselves), the digest of the model they
    belong to, and raw rows to evaluate them on."""

    model_digest: bytes
    sealed: np.ndarray = array_field("uint8", 1)  # the sealed StrictRecordTable (empty: the arrays below)
    ids: np.ndarray = array_field("int64", 1)
    features: np.ndarray = array_field("int32", 1)
    thresholds: np.ndarray = array_field("float64", 1)
    missing_left: np.ndarray = array_field("bool", 1)
    categories: np.ndarray = array_field("int64", 1)
    raw: np.ndarray = array_field("float64", 2)
    # the leakage budget, from this party's own [policy] (0: no limit / full precision)
    output_bits: int
    max_outputs: int
    max_bits_per_row: int
    now: float  # the host's clock, for the 24-hour window
    ledger_version: int  # the version of the sealed ledger the host last stored (0: none yet)
    row_keys: np.ndarray = array_field("uint8", 2)  # (rows, 16): keyed hashes of the rows' ids
    ledger: np.ndarray = array_field("uint8", 1)  # the sealed ledger (empty: none yet)
    # online sessions' spending counts too (``strict/enclave/online_ledger``): their log, and
    # the version of it the host last recorded
    online_version: int
    online_log: np.ndarray = array_field("uint8", 1)


@message
@dataclass(frozen=True)
class StrictRecordBits:
    """Passive -> active enclave: for every record of the party and every row, left or not."""

    n_rows: int
    ids: np.ndarray = array_field("int64", 1)
    bits: np.ndarray = array_field("uint8", 1)  # records x rows, row-major, packed
    output_bits: int = 0  # this party's policy: each released output to this many bits (0: full precision)
    # the session refused by this party's row budget (its bits are then zeros), padded to one
    # width: its host, which carries the answer, cannot tell (the rule, why)
    refused: str = ""
    detail: str = ""


@message
@dataclass(frozen=True)
class StrictLedger:
    """A passive enclave's row ledger, sealed to its platform and code: per scoring of a row,
    the row's key, the scoring's tag, when and how many bits it cost. ``version`` counts the
    ledgers written, so an older copy is refused (rollback guard, docs/enclaves.md)."""

    version: int
    keys: np.ndarray = array_field("uint8", 2)
    tags: np.ndarray = array_field("uint8", 2)
    epochs: np.ndarray = array_field("float64", 1)
    bits: np.ndarray = array_field("int64", 1)


@message
@dataclass(frozen=True)
class StrictPredictions:
    """Active enclave -> host: margins of the requested rows, nothing else."""

    margin: np.ndarray = array_field("float64", 2)


def expect(frame: bytes, cls: type, who: str):
    msg = serde.decode(frame)
    if not isinstance(msg, cls):
        raise ProtocolError(f"{who} sent {type(msg).__name__}, expected {cls.__name__}")
    return msg


@message
@dataclass(frozen=True)
class StrictCheckpoint:
    """Sealed by the active enclave after a round (the host stores it, cannot read it): the
    boosting state, its own party's records and the round's progress."""

    state: str  # JSON of public-length parts: published ensemble, generator state, round, own records
    gains: np.ndarray = array_field("float64", 1)  # every node's gain and size, fixed width (their text
    n_rows: np.ndarray = array_field("int64", 1)  # length would otherwise show in the blob's size)
    best: np.ndarray = array_field("float64", 1)  # (best value or nan, best round)
    margin: np.ndarray = array_field("float64", 2)
    valid_margin: np.ndarray = array_field("float64", 2)
    evals: np.ndarray = array_field("float64", 2)  # (metrics, rounds): the validation history, never published
