"""Messages every protocol shares: the handshake, routing questions, model finalisation,
and the active party's own notes in its transcript."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from teeboost.transport.serde import array_field, message

__all__ = [
    "ModelDone",
    "Hello", "HelloReply", "RouteRequest", "RouteReply", "DiscardTrees", "Ack", "SaveCheckpoint", "ResumeFrom",
    "GradientsNote", "TreeNote", "RunNote", "HistogramNote", "NodeRowsNote", "ConstraintNote",
]


@message
@dataclass(frozen=True)
class Hello:
    """Active -> passive: the protocol and binning both sides must agree on, and the run id of
    this training (fresh, or the one a ``ResumeFrom`` that follows continues)."""

    protocol: str
    party_index: int
    n_rows: int
    max_bin: int
    run_id: str = ""


@message
@dataclass(frozen=True)
class HelloReply:
    """Passive -> active: its name and the shape of its histograms (bins per feature, and
    which features split into category subsets)."""

    name: str
    n_rows: int
    n_value_bins: np.ndarray = array_field("int32", 1)
    categorical: np.ndarray = array_field("bool", 1)
    # under the run's constraints: each column's public monotone direction and interaction-set
    # mask, and the constrained names this party holds (so the active party sees all are held)
    directions: np.ndarray = array_field("int8", 1, optional=True)
    membership: np.ndarray = array_field("int64", 1, optional=True)
    constrained: str = "[]"


@message
@dataclass(frozen=True)
class SaveCheckpoint:
    """Active -> passive: round done, ``n_trees`` trees grown; save your state for this run."""

    run_id: str
    n_trees: int


@message
@dataclass(frozen=True)
class ResumeFrom:
    """Active -> passive: continue run ``run_id`` after its first ``n_trees`` trees, from
    your own checkpoint (records of later trees are dropped)."""

    run_id: str
    n_trees: int


@message
@dataclass(frozen=True)
class RouteRequest:
    """Which rows go left at record ``records[i]``? Question i's rows are
    ``payload[offsets[i]:offsets[i+1]]``, encoded as ``row_sets`` describes (a uint32 list or a
    bitmap over the dataset, whichever is smaller)."""

    dataset: str
    n_rows: int  # size of the dataset the rows index
    records: np.ndarray = array_field("int64", 1)
    encodings: np.ndarray = array_field("uint8", 1)
    offsets: np.ndarray = array_field("int64", 1)
    payload: np.ndarray = array_field("uint8", 1)


@message
@dataclass(frozen=True)
class RouteReply:
    """Go-left answers for all questions, concatenated and bit-packed."""

    n_answers: int
    bits: np.ndarray = array_field("uint8", 1)


@message
@dataclass(frozen=True)
class ModelDone:
    """Active -> passive at the end of training: the digest of the published trees, which the
    passive party keeps with its split records so its part of the model cannot be combined
    with another model's (an export merge, strict prediction)."""

    model_digest: bytes


@message
@dataclass(frozen=True)
class DiscardTrees:
    """Early stopping kept the first ``keep`` trees: drop split records of later ones."""

    keep: int


@message
@dataclass(frozen=True)
class Ack:
    """Request done, nothing to return."""


@message
@dataclass(frozen=True)
class GradientsNote:
    """Transcript note: the active party's own fixed-point gradients of one tree."""

    tree: int
    output: int
    frac_bits: int
    rows: np.ndarray = array_field("uint32", 1)
    g: np.ndarray = array_field("int64", 1)
    h: np.ndarray = array_field("int64", 1)


@message
@dataclass(frozen=True)
class TreeNote:
    """Transcript note: the structure of a finished tree (JSON of ``Tree.to_dict``)."""

    tree: int
    structure: str


@message
@dataclass(frozen=True)
class RunNote:
    """Transcript note written first: protocol, parameters and party layout (JSON)."""

    protocol: str
    detail: str


@message
@dataclass(frozen=True)
class HistogramNote:
    """Transcript note: per-bin sums of a passive party's features as the active party saw
    them in the clear (decrypted under SecureBoost): (nodes, features, bins, [g, h, count])."""

    tree: int
    party: int
    nodes: np.ndarray = array_field("int32", 1)
    sums: np.ndarray = array_field("int64", 4)


@message
@dataclass(frozen=True)
class ConstraintNote:
    """Transcript note: under constraints, the public monotone direction and interaction-set
    mask of each passive party's winning column at one level, as the active host learned them
    (in N-TEE and 1-TEE they are all it learns of that column; the leakage audit uses them)."""

    tree: int
    nodes: np.ndarray = array_field("int32", 1)
    parties: np.ndarray = array_field("int32", 1)
    directions: np.ndarray = array_field("int8", 1)
    memberships: np.ndarray = array_field("int64", 1)


@message
@dataclass(frozen=True)
class NodeRowsNote:
    """Transcript note: instance sets of the nodes whose splits are searched at one level."""

    tree: int
    nodes: np.ndarray = array_field("int32", 1)
    encodings: np.ndarray = array_field("uint8", 1)
    offsets: np.ndarray = array_field("int64", 1)
    payload: np.ndarray = array_field("uint8", 1)
