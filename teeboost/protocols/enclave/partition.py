"""How the owner of a winning split partitions a node, and how everyone learns the result.

Shared by every protocol: the winner records its threshold under a fresh record id and
returns the left instance set (as in SecureBoost); the active party then announces each
split's left set to the passive parties that did not own it, so every party tracks node
instance sets without them being re-sent level after level.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from teeboost.core.nodes import NodeRows
from teeboost.errors import ProtocolError
from teeboost.transport.serde import array_field, message

__all__ = [
    "SplitRequest", "SplitReply", "HistogramRequest", "Announcements",
    "apply_announcements", "check_rows", "masks_to_bits", "bits_to_masks", "bits_to_subsets", "bit_chunks",
    "encode_row_sets", "decode_row_sets", "bitmap_rows", "row_set_size",
]

ROW_LIST, ROW_BITMAP = 0, 1


@message
@dataclass(frozen=True)
class SplitRequest:
    """Active -> owner: record these splits and partition the nodes. A split is named by
    (feature, bin, missing direction) where the active party knows them (plain,
    SecureBoost), or by an enclave's opaque handle where it must not (N-TEE)."""

    tree: int
    nodes: np.ndarray = array_field("int32", 1)
    lefts: np.ndarray = array_field("int32", 1)
    rights: np.ndarray = array_field("int32", 1)
    features: np.ndarray = array_field("int32", 1)
    bins: np.ndarray = array_field("int64", 1)  # threshold bin, or category mask of a categorical feature
    default_left: np.ndarray = array_field("bool", 1)
    handles: np.ndarray = array_field("uint64", 1)
    # plain and SecureBoost with one passive party: the level's other splits (announced as
    # ``HistogramRequest`` announces them), and the next level asked in the same round trip:
    # the histograms of every child holding at least ``next_min_rows`` rows (0: none asked)
    split_nodes: np.ndarray = array_field("int32", 1, optional=True)
    split_lefts: np.ndarray = array_field("int32", 1, optional=True)
    split_rights: np.ndarray = array_field("int32", 1, optional=True)
    split_bits: np.ndarray = array_field("uint8", 1, optional=True)
    next_min_rows: int = 0


@message
@dataclass(frozen=True)
class HistogramRequest:
    """Per level: announce last level's splits (left sets as bitmasks over parent rows, for the
    splits the recipient did not own), then ask for this level's work on ``nodes``. Sent in the
    clear (plain, SecureBoost, 1-TEE) or inside an attested channel record (N-TEE)."""

    tree: int
    nodes: np.ndarray = array_field("int32", 1)
    split_nodes: np.ndarray = array_field("int32", 1)
    split_lefts: np.ndarray = array_field("int32", 1)
    split_rights: np.ndarray = array_field("int32", 1)
    split_bits: np.ndarray = array_field("uint8", 1)
    # N-TEE under constraints: each node's weight bounds and interaction sets (empty otherwise)
    bounds: np.ndarray = array_field("float64", 2, optional=True)
    sets: np.ndarray = array_field("int64", 1, optional=True)


@message
@dataclass(frozen=True)
class SplitReply:
    """Owner -> active: one record id per split, and each left instance set as a bitmask
    over the node's rows (in row order), concatenated (see ``masks_to_bits``)."""

    tree: int
    records: np.ndarray = array_field("int64", 1)
    left_bits: np.ndarray = array_field("uint8", 1)
    # with ``SplitRequest.next_min_rows``: the next level's nodes, in id order (what the active
    # party's grower asks), and the protocol's histogram reply for them, encoded
    next_nodes: np.ndarray = array_field("int32", 1, optional=True)
    next_level: bytes = b""


def check_rows(rows: np.ndarray, n_rows: int, what: str) -> np.ndarray:
    """Rows must be in range, strictly increasing (sorted, no duplicates)."""
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size and (rows[0] < 0 or rows[-1] >= n_rows or np.any(np.diff(rows) <= 0)):
        raise ProtocolError(f"{what}: rows must be sorted, distinct and below {n_rows}")
    return rows


def masks_to_bits(masks: list[np.ndarray]) -> np.ndarray:
    """Booleans over nodes' rows (True: left) packed to bits, byte-aligned per node and
    concatenated: a left instance set costs parent/8 bytes instead of 4 bytes per row."""
    chunks = [np.packbits(mask) for mask in masks]
    return np.concatenate(chunks) if len(chunks) > 1 else (chunks[0] if chunks else np.empty(0, dtype=np.uint8))


def bits_to_masks(sizes: list[int], bits: np.ndarray, what: str) -> list[np.ndarray]:
    """Inverse of ``masks_to_bits`` for nodes of ``sizes`` rows; every length and padding
    bit is checked."""
    lengths = [(size + 7) // 8 for size in sizes]
    if bits.size != sum(lengths):
        raise ProtocolError(f"{what}: {bits.size} bytes of row masks for nodes needing {sum(lengths)}")
    out, position = [], 0
    for size, length in zip(sizes, lengths):
        chunk = bits[position:position + length]
        position += length
        if size % 8 and int(chunk[-1]) & ((1 << (8 - size % 8)) - 1):
            raise ProtocolError(f"{what}: row mask has bits beyond the node's rows")
        out.append(np.unpackbits(chunk, count=size).view(bool))
    return out


def bits_to_subsets(parents: list[np.ndarray], bits: np.ndarray, what: str) -> list[np.ndarray]:
    """The left rows themselves, for readers of transcripts."""
    masks = bits_to_masks([parent.size for parent in parents], bits, what)
    return [parent[mask] for parent, mask in zip(parents, masks)]


def bit_chunks(sizes: list[int], bits: np.ndarray) -> list[np.ndarray]:
    """The per-node pieces of a ``masks_to_bits`` array (lengths checked by the caller)."""
    offsets = np.cumsum([0] + [(size + 7) // 8 for size in sizes])
    return [bits[offsets[i]:offsets[i + 1]] for i in range(len(sizes))]


@dataclass
class Announcements:
    """Splits of the last level each passive party still has to hear about, each with its
    partition already packed (bits over the parent's rows)."""

    # (owner, node, left, right, packed partition)
    entries: list[tuple[int, int, int, int, np.ndarray]]

    def __init__(self) -> None:
        self.entries = []

    def add(self, owner: int, node: int, left: int, right: int, bits: np.ndarray) -> None:
        self.entries.append((owner, node, left, right, bits))

    def for_party(self, party: int) -> dict[str, np.ndarray]:
        mine = [e for e in self.entries if e[0] != party]
        chunks = [e[4] for e in mine]
        return {
            "split_nodes": np.array([e[1] for e in mine], dtype=np.int32),
            "split_lefts": np.array([e[2] for e in mine], dtype=np.int32),
            "split_rights": np.array([e[3] for e in mine], dtype=np.int32),
            "split_bits": np.concatenate(chunks) if chunks else np.empty(0, dtype=np.uint8),
        }

    def for_all(self) -> dict[str, np.ndarray]:
        """Every split of the last level (for an enclave that announces them itself)."""
        return self.for_party(-1)

    def clear(self) -> None:
        self.entries = []


def apply_announcements(node_rows: NodeRows, msg) -> None:
    """Passive side: update node instance sets from the announced splits in ``msg``."""
    n = msg.split_nodes.size
    if msg.split_lefts.size != n or msg.split_rights.size != n:
        raise ProtocolError("split announcement arrays differ in length")
    sizes = [node_rows.size(int(node)) for node in msg.split_nodes]
    masks = bits_to_masks(sizes, msg.split_bits, "split announcement")
    for node, left, right, went_left in zip(msg.split_nodes, msg.split_lefts, msg.split_rights, masks):
        node_rows.split_mask(int(node), int(left), int(right), went_left)


def encode_row_sets(groups: list[np.ndarray], n_rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted row sets of a dataset of ``n_rows`` -> (encodings, byte offsets, payload); each
    set travels as a uint32 list or a bitmap over the dataset, whichever is smaller."""
    encodings, chunks = [], []
    for rows in groups:
        if 4 * rows.size <= (n_rows + 7) // 8:
            encodings.append(ROW_LIST)
            chunks.append(np.asarray(rows, dtype="<u4").view(np.uint8))
        else:
            mask = np.zeros(n_rows, dtype=bool)
            mask[rows] = True
            encodings.append(ROW_BITMAP)
            chunks.append(np.packbits(mask))
    offsets = np.zeros(len(groups) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([c.size for c in chunks])
    payload = np.concatenate(chunks) if chunks else np.empty(0, dtype=np.uint8)
    return np.array(encodings, dtype=np.uint8), offsets, payload


def bitmap_rows(bits: np.ndarray, n_rows: int, what: str) -> np.ndarray:
    """Rows marked in a bitmap over a dataset of ``n_rows`` (sorted, distinct by construction)."""
    if bits.size != (n_rows + 7) // 8:
        raise ProtocolError(f"{what}: bitmap of {bits.size} bytes for {n_rows} rows")
    if n_rows % 8 and int(bits[-1]) & ((1 << (8 - n_rows % 8)) - 1):
        raise ProtocolError(f"{what}: bitmap has bits beyond the dataset")
    return np.flatnonzero(np.unpackbits(bits, count=n_rows))


def row_set_size(encodings: np.ndarray, offsets: np.ndarray, payload: np.ndarray, n_rows: int, what: str) -> int:
    """How many rows one encoded row set names, checked as ``decode_row_sets`` checks it, for
    a reader that needs the count and not the rows (a bitmap is not expanded to row ids)."""
    if encodings.size == 1 and encodings[0] == ROW_BITMAP and offsets.tolist() == [0, payload.size]:
        if payload.size != (n_rows + 7) // 8:
            raise ProtocolError(f"{what}: bitmap of {payload.size} bytes for {n_rows} rows")
        if n_rows % 8 and int(payload[-1]) & ((1 << (8 - n_rows % 8)) - 1):
            raise ProtocolError(f"{what}: bitmap has bits beyond the dataset")
        return int(np.count_nonzero(np.unpackbits(payload)))
    (rows,) = decode_row_sets(encodings, offsets, payload, n_rows, what)
    return int(rows.size)


def decode_row_sets(encodings: np.ndarray, offsets: np.ndarray, payload: np.ndarray, n_rows: int,
                    what: str) -> list[np.ndarray]:
    """Inverse of ``encode_row_sets``, with every bound checked."""
    n = encodings.size
    if offsets.size != n + 1 or (offsets.size and (offsets[0] != 0 or offsets[-1] != payload.size)) \
            or np.any(np.diff(offsets) < 0):
        raise ProtocolError(f"{what}: offsets do not describe {n} row sets")
    out = []
    for i in range(n):
        chunk = payload[offsets[i]:offsets[i + 1]]
        if encodings[i] == ROW_LIST:
            if chunk.size % 4:
                raise ProtocolError(f"{what}: row list of {chunk.size} bytes")
            out.append(check_rows(chunk.view("<u4"), n_rows, what))
        elif encodings[i] == ROW_BITMAP:
            out.append(bitmap_rows(chunk, n_rows, what))
        else:
            raise ProtocolError(f"{what}: unknown row-set encoding {encodings[i]}")
    return out
