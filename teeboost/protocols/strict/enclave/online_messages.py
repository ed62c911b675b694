"""Messages of strict online scoring, between hosts and their enclaves and between enclaves
(``teeboost.protocols.strict.enclave.online``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from teeboost.transport.serde import array_field, message

__all__ = ["StrictOnlineModel", "StrictOnlineBatch", "StrictOnlineRequest", "StrictOnlineTable",
           "StrictLedgerDelta", "StrictOnlineRefusal", "StrictOnlineBits", "StrictOnlineMargins"]


@message
@dataclass(frozen=True)
class StrictOnlineModel:
    """Active host -> its enclave, once per online session: the published model and its own
    split records (as ``StrictPredictIn`` carries them)."""

    model: str
    own_ids: np.ndarray = array_field("int64", 1)
    own_features: np.ndarray = array_field("int32", 1)
    own_thresholds: np.ndarray = array_field("float64", 1)
    own_missing_left: np.ndarray = array_field("bool", 1)
    own_categories: np.ndarray = array_field("int64", 1)
    clear: bool = False  # N-TEE: the passive hosts are told each request's handles (and charge them)


@message
@dataclass(frozen=True)
class StrictOnlineBatch:
    """Active host -> its enclave, per batch: its own columns of the rows, and each passive
    party's handles for them (``handles[p]`` for ``parties[p]``)."""

    raw: np.ndarray = array_field("float64", 2)
    parties: np.ndarray = array_field("int64", 1)
    handles: np.ndarray = array_field("int64", 2)
    id_counts: np.ndarray = array_field("int64", 1, optional=True)  # each party's id set size, as looked up
    # each row's request within the batch (0, 1, ...; empty: one request): one refused for a
    # row's budget is refused alone, and its neighbours are scored
    requests: np.ndarray = array_field("int64", 1, optional=True)


@message
@dataclass(frozen=True)
class StrictOnlineRequest:
    """Active enclave -> a passive enclave, sealed: evaluate all your records on the rows at
    these handles, for the model of this digest (computed in the active enclave); ``tags`` as
    in ``StrictPredictRequest`` (scoring a row again exactly as before is not charged again)."""

    n_rows: int
    model_digest: bytes
    outputs: int
    tags: np.ndarray = array_field("uint8", 2)
    handles: np.ndarray = array_field("int64", 1)
    clear: bool = False  # the active party told the passive host these handles (N-TEE)
    path_bits: int = 0  # the most of this party's nodes on a row's paths, summed over the trees
    n_ids: int = -1  # the size of the id set the handles were looked up in (-1: not said)
    requests: np.ndarray = array_field("int64", 1, optional=True)  # as in ``StrictOnlineBatch``


@message
@dataclass(frozen=True)
class StrictOnlineTable:
    """Passive host -> its enclave, once per model and data version: every row it holds, in
    handle order, with its row key, its records (sealed, or in the clear once disclosed), its
    budget, and the online ledger's log of sealed records."""

    model_digest: bytes
    sealed: np.ndarray = array_field("uint8", 1)
    ids: np.ndarray = array_field("int64", 1)
    features: np.ndarray = array_field("int32", 1)
    thresholds: np.ndarray = array_field("float64", 1)
    missing_left: np.ndarray = array_field("bool", 1)
    categories: np.ndarray = array_field("int64", 1)
    raw: np.ndarray = array_field("float64", 2)
    row_keys: np.ndarray = array_field("uint8", 2)  # (rows, 16); (0, 16): nothing is counted
    output_bits: int
    max_outputs: int
    max_bits_per_row: int
    now: float
    ledger_version: int  # the last version of the online ledger the host recorded
    ledger_log: np.ndarray = array_field("uint8", 1)  # the log's sealed records, each u32 length-prefixed
    host_charged: bool = False  # N-TEE: the host charges the rows it is told; requests must tell it


@message
@dataclass(frozen=True)
class StrictLedgerDelta:
    """One record of a passive enclave's online ledger log, sealed to its code and platform:
    per row scored, its key, the scoring's tag, when and how many bits it cost. ``base``: this
    record holds every live entry (written when a table is loaded), and those before it are
    not needed. Versions run 1, 2, 3... in the log."""

    version: int
    base: bool
    keys: np.ndarray = array_field("uint8", 2)
    tags: np.ndarray = array_field("uint8", 2)
    epochs: np.ndarray = array_field("float64", 1)
    bits: np.ndarray = array_field("int64", 1)


@message
@dataclass(frozen=True)
class StrictOnlineRefusal:
    """Passive enclave -> the active enclave, sealed, in place of a request's record bits: the
    whole batch is refused by ``rule`` of party ``party``'s policy, its host's, told before the
    request was opened (its enclave's row budget refuses rows within ``StrictOnlineBits``). Sealed on the session's channel, one record per
    request as an answer is, so the session goes on: a refusal only a host said left the
    channels a record apart, and the session was dropped."""

    party: int
    rule: str
    detail: str


@message
@dataclass(frozen=True)
class StrictOnlineBits:
    """Passive enclave -> the active enclave, sealed: a request's record bits (as
    ``StrictRecordBits``), and which rows' requests its budget refused (their bits are zeros)
    and why, in words padded to one width: the same size whichever rows are refused, so the
    host that carries it cannot tell."""

    n_rows: int
    ids: np.ndarray = array_field("int64", 1)
    bits: np.ndarray = array_field("uint8", 1)  # records x rows, row-major, packed
    refused: np.ndarray = array_field("bool", 1)  # per row
    output_bits: int = 0
    detail: str = ""


@message
@dataclass(frozen=True)
class StrictOnlineMargins:
    """Active enclave -> host: margins of the rows scored (zeros for a refused row), and
    which rows a passive party's budget refused, with its words."""

    margin: np.ndarray = array_field("float64", 2)
    refused: np.ndarray = array_field("bool", 1)
    party: int = 0
    detail: str = ""
