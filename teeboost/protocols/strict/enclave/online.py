"""Strict online scoring inside the enclaves: one attested session serves many requests.

Active enclave: holds the published model and its own records for the session
(``online_model``); per batch it turns its host's rows and each passive party's handles into
one sealed request per passive enclave (``online_begin``), and their sealed record bits into
margins, quantized as each passive party's policy says (``online_finish``). Only margins leave.

Passive enclave: holds every row of its party, in handle order, as a ``CodeTable``, its records
(opened from their seal, as batch prediction opens them), and its online row ledger
(``online_table``). Per request it finds the rows by an oblivious scan (its host never learns
which), charges the ledger, and seals the bits of all its records on those rows, padded to
the run's positions (``online_records``). The ledger lives in here for the session; each
request's entries leave as one sealed log record, which the host appends before the answer
leaves. The host sees how many rows each request scored, nothing else: a request appends one
entry per row, charged or not, so it does not show which rows were new today, and a request
refused for the budget is answered as any other. The base record a table reload seals holds
every entry of the day, charged or not: its size counts the rows asked, which the host saw.
"""

from __future__ import annotations

import gc
import json

import numpy as np

from teeboost.core.model import Ensemble
from teeboost.core.release import output_ranges, quantize_margins
from teeboost.core.vector_routing import EnsembleArrays, RecordArrays
from teeboost.errors import ProtocolError
from teeboost.protocols.enclave.handshake import expect, role
from teeboost.protocols.enclave.messages import pack_records, unpack_records
from teeboost.protocols.strict.enclave import messages as sm
from teeboost.protocols.strict.enclave import online_messages as om
from teeboost.protocols.strict.enclave.ledger import DAY_SECONDS, FULL_PRECISION_BITS, answer_tags, host_time, ledger_scope
from teeboost.protocols.strict.enclave.oblivious_scan import CodeTable, compile_kernels
from teeboost.protocols.strict.enclave.online_ledger import (apply_records, batch_spending, charge_online,
                                                             compile_spending, empty_ledger, replay_log,
                                                             seal_record)
from teeboost.transport import serde

__all__ = ["ecall_online_model", "ecall_online_begin", "ecall_online_finish", "ecall_online_table",
           "ecall_online_warm", "ecall_online_records"]

MAX_ROWS = 4096  # rows per online request


# ---- active role

def ecall_online_model(rt, payload):
    from teeboost.protocols.strict.enclave.program import _own_records_digest

    current = role(rt, "active")
    current.require_all_peers()
    msg = expect(payload, om.StrictOnlineModel)
    ensemble = Ensemble.from_dict(json.loads(msg.model))
    digest = sm.model_digest(json.loads(json.dumps(ensemble.to_dict())))
    own = sm.StrictPredictIn(msg.model, 0, msg.own_ids, msg.own_features, msg.own_thresholds, msg.own_missing_left,
                             msg.own_categories, np.zeros((0, 0)))
    rt.state["online"] = {"ensemble": ensemble, "digest": digest, "own": msg, "ids": {},
                          "trees": EnsembleArrays(ensemble),
                          "own_records": RecordArrays(msg.own_ids, msg.own_features, msg.own_thresholds,
                                                      msg.own_missing_left, msg.own_categories),
                          "tag_key": digest + _own_records_digest(own), "clear": bool(msg.clear),
                          "ranges": output_ranges(ensemble)}
    return digest


def ecall_online_begin(rt, payload):
    """-> one sealed ``StrictOnlineRequest`` per passive enclave."""
    from teeboost.protocols.strict.enclave.program import _tags

    current = role(rt, "active")
    state = rt.state.get("online")
    if state is None:
        raise ProtocolError("no model loaded for online scoring in this session")
    msg = expect(payload, om.StrictOnlineBatch)
    n = msg.raw.shape[0]
    if not 1 <= n <= MAX_ROWS or msg.handles.shape != (msg.parties.size, n):
        raise ProtocolError(f"an online batch scores 1 to {MAX_ROWS} rows with one handle per row and party")
    if sorted(int(p) for p in msg.parties) != current.peers:
        raise ProtocolError("an online batch names a handle for every passive party")
    tags = _tags(state["tag_key"], msg.raw, len(current.peers))
    counts = msg.id_counts if msg.id_counts.size == msg.parties.size else np.full(msg.parties.size, -1)
    requests = msg.requests if msg.requests.size else np.zeros(n, np.int64)
    if requests.shape != (n,) or requests.min() < 0 or requests.max() >= n:
        raise ProtocolError("an online batch names each row's request, numbered from 0")
    out = {}
    for party, handles, n_ids in zip(msg.parties, msg.handles, counts):
        bound = state.setdefault("path_bits", {}).get(int(party))
        if bound is None:  # computed here, from the trees this enclave scores with, not told by its host
            bound = state["path_bits"][int(party)] = state["trees"].path_nodes(int(party))
        frame = serde.encode(om.StrictOnlineRequest(n, state["digest"], state["ensemble"].n_outputs, tags,
                                                    np.ascontiguousarray(handles, dtype=np.int64), state["clear"],
                                                    int(bound), int(n_ids), requests))
        out[int(party)] = current.channel(int(party)).seal(frame)
    state["pending"] = np.ascontiguousarray(msg.raw, dtype=np.float64)
    return pack_records(out)


def ecall_online_finish(rt, payload):
    """Every passive enclave's sealed record bits for the pending batch -> its margins."""
    current = role(rt, "active")
    state = rt.state.get("online")
    if state is None or state.get("pending") is None:
        raise ProtocolError("no online batch is under way")
    raw = state.pop("pending")
    n = raw.shape[0]
    records = unpack_records(payload)
    if sorted(records) != current.peers:
        raise ProtocolError("record bits must come from every passive party")
    bits, precision, refusals = {}, [], []
    refused, why = np.zeros(n, bool), (0, "")
    for party, record in records.items():  # every record is opened, a refusal's too: the channels stay in step
        answer = serde.decode(_unpadded(current.channel(party).open(record)))
        if isinstance(answer, om.StrictOnlineRefusal):
            if answer.party != party:
                raise ProtocolError(f"party {party} sent party {answer.party}'s refusal")
            refusals.append(answer)
            continue
        if not isinstance(answer, om.StrictOnlineBits):
            raise ProtocolError(f"party {party} sent {type(answer).__name__}, expected its record bits")
        if answer.refused.shape != (n,):
            raise ProtocolError(f"party {party} refused other rows than the ones to score")
        if answer.refused.any() and not refused.any():
            why = (party, answer.detail.rstrip())
        refused |= answer.refused
        if answer.output_bits < 0:
            raise ProtocolError(f"party {party} names {answer.output_bits} output bits")
        if answer.output_bits:
            precision.append(answer.output_bits)
        known = state["ids"].get(party)
        if answer.ids.size or known is None:  # the first answer names its records (maybe none); later
            # ones keep that order
            if known is not None:
                raise ProtocolError(f"party {party} named its records twice in one session")
            known = state["ids"][party] = _Named(answer.ids)
        if known is None:
            raise ProtocolError(f"party {party} never named its records in this session")
        if answer.n_rows != n or answer.bits.size != (known.size * n + 7) // 8:
            raise ProtocolError(f"party {party} evaluated other rows than the ones to score")
        bits[party] = (known, np.unpackbits(answer.bits, count=known.size * n).astype(bool).reshape(known.size, n))
    if refusals:  # the whole batch, as a refusal its host said was (its rows were not scored)
        return serde.encode(refusals[0])
    own = state["own_records"]

    def ask(party, records, rows):
        if party == 0:
            return own.go_left(raw, rows, records)
        if party not in bits:
            raise ProtocolError(f"party {party} has no split records here")
        named, table = bits[party]
        return table[named.positions(records), rows]

    ensemble = state["ensemble"]
    margin = quantize_margins(ensemble, state["trees"].margin(n, ask), min(precision, default=0), state["ranges"])
    margin[refused] = 0.0  # a refused row's margin never leaves (its passive bits were zeros anyway)
    return serde.encode(om.StrictOnlineMargins(margin, refused, *why))


class _Named:
    """A passive party's record ids in the order of its answers: ascending, then padding
    (id 0) to the run's positions; the ascending prefix holds the records."""

    def __init__(self, ids: np.ndarray) -> None:
        self.size = int(ids.size)
        rising = np.concatenate([[True], ids[1:] > ids[:-1]]) if ids.size else np.zeros(0, bool)
        count = int(np.argmin(rising)) if not rising.all() else ids.size
        real = ids[:count]
        self._records = RecordArrays(real, np.zeros(count), np.zeros(count), np.zeros(count, bool),
                                     np.zeros(count, np.int64))

    def positions(self, records: np.ndarray) -> np.ndarray:
        return self._records.positions(records)  # ascending ids: the sorted position is the slot


# ---- passive role

def _refusal(channel, party: int, summary: dict) -> bytes:
    """The request's answer is a refusal, sealed in the answer's place: one record per request
    opened, so the channels stay in step and the session goes on. Its host sees the refusal
    (the summary) as it saw one before; the active host cannot be told one that was not made."""
    frame = serde.encode(om.StrictOnlineRefusal(party, summary["refused"], summary["detail"]))
    sealed = channel.seal(_padded(frame, len(frame)))
    return pack_records({0: sealed, 1: b"", 2: json.dumps(summary).encode()})


def ecall_online_warm(rt, payload):
    """The scan and spending kernels compiled in an enclave launched ahead of need
    (``tee.spare``), before any session: a passive enclave's first table load spent about 0.8 s
    compiling them. Nothing of a session is held or bound."""
    compile_kernels(1)  # a one-word table has the types of any other
    compile_spending()
    return b""


def ecall_online_table(rt, payload):
    """-> [a sealed base record of the online ledger (b"": nothing counted) | summary JSON]."""
    from teeboost.protocols.strict.enclave.program import _open_records, _without_padding

    current = role(rt, "passive")
    msg = expect(payload, om.StrictOnlineTable)
    if len(msg.model_digest) != 32:
        raise ProtocolError("a model digest is 32 bytes")
    slots = 0
    if msg.sealed.size:
        padded = _open_records(rt, msg.sealed, msg.model_digest, current)
        slots = padded.ids.size
        table = _without_padding(padded)
        if msg.raw.ndim != 2 or msg.raw.shape[1] != table.n_features:
            raise ProtocolError("the rows do not have this party's columns")
        records = (table.ids, table.features, table.thresholds, table.missing_left, table.categories)
    else:
        records = (msg.ids, msg.features, msg.thresholds, msg.missing_left, msg.categories)
    if msg.raw.ndim != 2 or np.any(records[1] < 0) or np.any(records[1] >= max(1, msg.raw.shape[1])):
        raise ProtocolError("the rows to score do not fit this party's records")
    counted = msg.row_keys.shape[0] > 0
    if counted and msg.row_keys.shape != (msg.raw.shape[0], 16):
        raise ProtocolError("one row key per row")
    if min(msg.output_bits, msg.max_outputs, msg.max_bits_per_row) < 0:
        raise ProtocolError("budget settings must be >= 0")
    keys = msg.row_keys if counted else np.zeros((msg.raw.shape[0], 16), np.uint8)
    if counted and np.unique(np.ascontiguousarray(keys[:, :8]).view(np.uint64)).size != keys.shape[0]:
        raise ProtocolError("refused: two rows share a ledger key (each row is charged under its own)")
    codes = CodeTable(np.ascontiguousarray(msg.raw, dtype=np.float64), keys, records[1], records[2], records[4])
    compile_kernels(codes.columns.shape[0])  # now, not at the first request
    compile_spending()
    codes.rows(np.zeros(0, dtype=np.int64))  # and the scan threads started
    gc.collect()  # the compiler's objects and the table stay out of full collections during requests
    gc.freeze()
    ledger, version = (replay_log(rt, ledger_scope(current), msg.ledger_log.tobytes(), msg.ledger_version) if counted
                       else (empty_ledger(), 0))
    previous = rt.state.get("online_passive")
    if previous is not None and previous["counted"] and version < previous["version"]:
        raise ProtocolError(f"refused: the online ledger log ends at version {version}, older than the version "
                            f"{previous['version']} this session already holds (a rolled back log)")
    now = max(host_time(msg.now), float(ledger["epochs"].max()) if ledger["epochs"].size else 0.0)
    live = ledger["epochs"] >= now - DAY_SECONDS
    ledger = {k: v[live] for k, v in ledger.items()}
    # a new table in the same session (the host's data changed): the active enclave already has
    # the record ids, and refuses them a second time
    ids_sent = bool(previous and previous["ids_sent"] and previous["digest"] == bytes(msg.model_digest)
                    and previous["slots"] == slots and np.array_equal(previous["table"].ids, records[0]))
    rt.state["online_passive"] = {"digest": bytes(msg.model_digest), "codes": codes,
                                  "table": RecordArrays(*records), "ids_sent": ids_sent,
                                  "slots": slots, "ledger": ledger, "version": version + 1, "counted": counted,
                                  "batch": empty_ledger(), "batch_version": -1,
                                  "output_bits": int(msg.output_bits), "max_outputs": int(msg.max_outputs),
                                  "max_bits_per_row": int(msg.max_bits_per_row),
                                  "host_charged": bool(msg.host_charged)}
    base = seal_record(rt, ledger_scope(current), version + 1, True, ledger) if counted else b""
    summary = {"rows": codes.n_rows, "ledger_version": version + 1 if counted else 0}
    return pack_records({0: base, 1: json.dumps(summary).encode()})


def ecall_online_records(rt, payload):
    """[sealed request | {"now": t, "batch_version": v} | the batch sessions' sealed ledger when
    it changed since the last request | online ledger records other sessions appended since]
    -> [sealed record bits (b"": refused) | sealed ledger record (b"": nothing counted) | summary
    JSON]. Charged before any bit leaves, against the row's spending in online and batch
    sessions together."""
    current = role(rt, "passive")
    state = rt.state.get("online_passive")
    if state is None:
        raise ProtocolError("no table loaded for online scoring in this session")
    parts = unpack_records(payload)
    channel = current.channel(0)
    request = expect(channel.open(parts.get(0, b"")), om.StrictOnlineRequest)
    told = json.loads(parts.get(1, b"{}") or b"{}")
    now = host_time(told.get("now", 0.0))
    if state["counted"] and parts.get(3):  # what other online sessions charged meanwhile
        apply_records(rt, ledger_scope(current), state, parts[3])
    if state["counted"] and int(told.get("batch_version", 0)) != state["batch_version"]:
        state["batch"] = batch_spending(rt, ledger_scope(current), parts.get(2, b""), int(told.get("batch_version", 0)))
        state["batch_version"] = int(told.get("batch_version", 0))
    n = request.n_rows
    if request.model_digest != state["digest"]:
        raise ProtocolError("the active party scores with another model than the one this party's records were "
                            "released for")
    if not 1 <= n <= MAX_ROWS or request.handles.shape != (n,) or request.tags.shape != (n, sm.TAG_BYTES) \
            or request.requests.shape != (n,) or request.requests.min() < 0 or request.requests.max() >= n:
        raise ProtocolError(f"an online request scores 1 to {MAX_ROWS} rows, with one handle, tag and request each")
    if request.n_ids >= 0 and request.n_ids != state["codes"].n_rows:
        # before any handle is looked at: a table cut short by the host would otherwise refuse
        # exactly the handles past its end, and tell the host where the scored row is (red team)
        raise ProtocolError("refused: this party's table is not the id set the active party looked its rows up in")
    if np.any(request.handles < 0) or np.any(request.handles >= state["codes"].n_rows):
        raise ProtocolError("an online request names a row outside this party's id set")
    if state["host_charged"] != bool(request.clear):
        # N-TEE: this host charges the rows the active host tells it, so every request must tell
        # it; a strict request never does, and this host's handles are then never looked at (a
        # refusal that depended on them would tell it whether it guessed the scored customer)
        raise ProtocolError("refused: this party's host charges the rows it is told, and the active party did "
                            "not tell them" if state["host_charged"] else
                            "refused: this party's table was not loaded for rows told in the clear")
    if request.clear and ([int(h) for h in request.handles] != told.get("handles")
                          or int(request.outputs) != told.get("outputs")
                          or int(request.path_bits) != told.get("path_bits")):
        raise ProtocolError("refused: the rows or outputs this party's host charged are not the ones the active "
                            "enclave asks about")
    bits_each = state["output_bits"] or FULL_PRECISION_BITS
    cost = int(request.outputs) * bits_each
    # what the host sees: the row count (it sees the request's size anyway) and a refusal; what
    # was charged, to whom and how much stays in here (red team: those fields told the host
    # whether the request's customer was new today, and, with host-chosen keys, which one it was)
    summary = {"rows": n, "refused": "", "detail": ""}
    refused = told.get("refused")
    rows_left = told.get("rows_left")
    if isinstance(refused, dict):  # its host's rule, checked on the rows it was told (N-TEE)
        summary.update(refused=str(refused.get("rule", ""))[:80] or "policy", detail=str(refused.get("detail", ""))[:500])
        return _refusal(channel, current.party, summary)
    if isinstance(rows_left, int) and n > rows_left:
        summary.update(refused="max_prediction_rows_per_day", detail=f"this request scores {n} rows; "
                       f"{max(rows_left, 0)} are left today")
        return _refusal(channel, current.party, summary)
    if state["max_outputs"] and request.outputs > state["max_outputs"]:
        summary.update(refused="max_outputs", detail=f"the model has {request.outputs} outputs; at most "
                       f"{state['max_outputs']}")
        return _refusal(channel, current.party, summary)
    if request.clear:  # N-TEE: the host knows these rows (it charged them); no need to hide them from it
        values, keys = state["codes"].rows_known(request.handles)
    else:
        values, keys = state["codes"].rows(request.handles)  # every row of the table is read
    table = state["table"]
    answers = table.all_bits(values)  # (records in id order, rows); nothing leaves before the charge
    delta, refused, over = b"", np.zeros(n, bool), ""
    if state["counted"]:
        # a request with a row over budget is refused (the active party's requests in this batch
        # apart), and still scanned, charged (without bits) and answered as any other, which rows
        # are refused sealed in the answer: its host cannot tell
        refused, over, delta = charge_online(rt, ledger_scope(current), state, keys,
                                             answer_tags(request.tags, answers, bits_each), cost, now, summary,
                                             request.requests)
    elif state["max_bits_per_row"] and cost > state["max_bits_per_row"] and not request.clear:  # N-TEE: host's
        summary.update(refused="max_bits_per_row_per_day", detail=f"one score costs {cost} bits per row; at most "
                       f"{state['max_bits_per_row']}")
        return _refusal(channel, current.party, summary)
    bits = answers & ~refused  # a refused row's: zeros
    ids = table.ids
    if state["slots"] > ids.size:  # padded as batch prediction pads: the size shows no split count
        ids = np.concatenate([ids, np.zeros(state["slots"] - ids.size, dtype=np.int64)])
        bits = np.concatenate([bits, np.zeros((state["slots"] - bits.shape[0], n), dtype=bool)])
    names = not state["ids_sent"]  # the session's first answer names the records; later ones keep that order
    if not names:
        ids = np.zeros(0, dtype=np.int64)
    state["ids_sent"] = True
    # refused or not, the same size: the refused rows are a mask, their words padded to one width
    answer = serde.encode(om.StrictOnlineBits(n, ids, np.packbits(bits.reshape(-1)), refused, state["output_bits"],
                                              over[:DETAIL_WIDTH].ljust(DETAIL_WIDTH)))
    sealed = channel.seal(_padded(answer, len(answer)))
    return pack_records({0: sealed, 1: delta, 2: json.dumps(summary).encode()})


DETAIL_WIDTH = 120  # characters: an over-budget refusal's words, padded, the same size whatever they say


def _padded(frame: bytes, size: int) -> bytes:
    """A sealed answer's plaintext: its length (4 bytes), the frame, zeros up to ``size``."""
    return len(frame).to_bytes(4, "big") + frame + bytes(size - len(frame))


def _unpadded(plain) -> bytes:
    plain = bytes(plain)
    length = int.from_bytes(plain[:4], "big") if len(plain) >= 4 else -1
    if not 0 <= length <= len(plain) - 4 or any(plain[4 + length:]):
        raise ProtocolError("a passive enclave's answer is not padded as answers are")
    return plain[4:4 + length]
