"""Inside a passive strict enclave: the row ledger that meters what predictions release.

Every strict prediction session is charged here before any record bit leaves for the active
enclave: each row scored costs ``outputs x output_bits`` (the active enclave releases each
output quantized to that many bits, ``teeboost.core.release``), unless the same row was scored
in the window with the same model, the same active inputs and the same answer of this party
(``answer_tags``: nothing new). A session that would take any row past ``max_bits_per_row`` in
24 hours releases nothing, and says so to the active enclave alone.

The ledger is sealed to this platform and code, and to the party and the label owner whose
pinned identity key signed the session (``ledger_scope``), and kept by the host between
sessions: a session the host set up with a label owner of its own opens none of it. The host
sees what it knows already: the rows asked (the ledger holds an entry for each, charged or not,
as the online ledger does). What was charged, how much a row had spent, and whether the session
was refused for the budget would tell it which rows were also scored online, which its host
must not learn (``strict/enclave/online``; red teams). Rows are named by the host's keyed hashes
of their ids; the tags never leave sealed. ``version`` counts the ledgers written: the host keeps
the last version it stored and an older copy is refused (docs/enclaves.md: the rollback guard).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

from teeboost.errors import IntegrityError, ProtocolError
from teeboost.transport import serde
from teeboost.protocols.strict.enclave import messages as sm

__all__ = ["LEDGER_CONTEXT", "ledger_scope", "open_sealed", "charge_session", "answer_tags", "DAY_SECONDS", "FULL_PRECISION_BITS", "host_time"]

LEDGER_CONTEXT = b"teeboost-strict-row-ledger-v2:"
DAY_SECONDS = 86_400.0
FULL_PRECISION_BITS = 64  # an output released unquantized: a float64


def ledger_scope(current) -> bytes:
    """Whose spending a ledger holds: this party's rows, scored for the label owner whose pinned
    identity key signed the session (``current.keys[0]``), as its sealed records are bound. A
    passive host could otherwise run the genuine active enclave under a key it made itself, pin
    it, hand its own enclave the sealed online log with a budget of 1 bit and a row key it
    chose, and read from its enclave's refusal whether that customer was scored online, offline
    and as often as it liked (red team)."""
    return current.party.to_bytes(4, "big") + hashlib.sha256(current.keys[0]).digest()


def open_sealed(rt, blob: bytes, context: bytes, what: str) -> bytes:
    """A sealed ledger blob opened, or a refusal that says what may be wrong with it."""
    try:
        return rt.unseal(bytes(blob), context)
    except IntegrityError:
        raise ProtocolError(f"refused: the sealed {what} does not open here: it belongs to another party or to "
                            "sessions with another label owner (identity key), was sealed by other enclave code "
                            "or on another platform, or was changed") from None


def host_time(value) -> float:
    """The time the host says it is (an enclave has no clock of its own), which must be a finite
    number: a NaN put every entry outside the day and every new one outside all later days
    (red team: answers without end at a budget of two)."""
    try:
        now = float(value)
    except (TypeError, ValueError):
        raise ProtocolError("refused: the host's time is not a number") from None
    if not math.isfinite(now):
        raise ProtocolError(f"refused: the host's time is {now}, not a finite number of seconds")
    return now


def answer_tags(tags: np.ndarray, bits: np.ndarray, output_bits: int) -> np.ndarray:
    """Each row's tag (the model and the active inputs, from the active enclave) bound to this
    party's answer on the row: its record bits, records in id order, ``bits`` (records, rows),
    and the precision each output is released at. The same tag again is then the same answer
    again, free; a row whose values changed since answers anew and is charged (red team: a tag
    of the active side alone let the active host ask again, free, after each change of the
    passive party's data, and read the new values), and so does one asked again after the
    operator raised ``output_bits`` (red team: free at the finer precision)."""
    packed = np.packbits(np.ascontiguousarray(np.asarray(bits, dtype=bool).T), axis=1)
    precision = int(output_bits).to_bytes(4, "big")
    out = np.empty((tags.shape[0], sm.TAG_BYTES), dtype=np.uint8)
    for j in range(tags.shape[0]):  # the same work per row, whatever it holds
        out[j] = np.frombuffer(hashlib.blake2b(bytes(tags[j]) + packed[j].tobytes() + precision,
                                               digest_size=sm.TAG_BYTES).digest(), np.uint8)
    return out


def _empty() -> sm.StrictLedger:
    return sm.StrictLedger(0, np.zeros((0, 16), np.uint8), np.zeros((0, sm.TAG_BYTES), np.uint8),
                           np.zeros(0), np.zeros(0, np.int64))


def _open(rt, scope: bytes, mine: sm.StrictRecordsIn) -> sm.StrictLedger:
    if mine.ledger.size == 0:
        if mine.ledger_version != 0:
            raise ProtocolError(f"refused: the host last stored row ledger version {mine.ledger_version}, and gave "
                                "none (a lost or removed ledger would forget every row already scored)")
        return _empty()
    ledger = serde.decode(open_sealed(rt, mine.ledger.tobytes(), LEDGER_CONTEXT + scope, "row ledger"))
    if not isinstance(ledger, sm.StrictLedger):
        raise ProtocolError("the sealed row ledger is not a ledger")
    # an older copy would forget rows already scored; one ahead is a store the host did not
    # finish recording (blob written, version not yet): it only over-counts
    if ledger.version not in (mine.ledger_version, mine.ledger_version + 1):
        raise ProtocolError(f"refused: the sealed row ledger is version {ledger.version}, and the host last "
                            f"stored version {mine.ledger_version} (a rolled back or foreign ledger)")
    return ledger


def charge_session(rt, scope: bytes, request: sm.StrictPredictRequest, mine: sm.StrictRecordsIn,
                   answers: np.ndarray) -> tuple[bytes, dict, str]:
    """-> (the new sealed ledger, or b"" when nothing changed; a summary for the host; why the
    row budget refuses the session, "" if it does not). ``summary["refused"]`` names a rule its
    host knows (the outputs, a party without a ledger): the session releases nothing. A session
    over the row budget is refused in the sealed answer instead, and its ledger and summary are
    those of a charged session (red team: a refusal its host saw told it that a row of the batch
    had been scored online). ``answers``: this party's record bits on the rows (records, rows),
    computed but not yet sent."""
    n = request.n_rows
    bits_each = mine.output_bits or FULL_PRECISION_BITS
    cost = int(request.outputs) * bits_each
    summary = {"rows": n, "outputs": int(request.outputs), "output_bits": bits_each, "cost_per_row": cost,
               "refused": "", "detail": "", "counted": bool(mine.row_keys.shape[0])}
    if mine.max_outputs and request.outputs > mine.max_outputs:
        summary.update(refused="max_outputs", detail=f"the model has {request.outputs} outputs; at most "
                       f"{mine.max_outputs}")
        return b"", summary, ""
    if not summary["counted"]:  # a party without a ledger (one process, one operator)
        if mine.max_bits_per_row and cost > mine.max_bits_per_row:
            summary.update(refused="max_bits_per_row_per_day", detail=f"one score costs {cost} bits per row; at "
                           f"most {mine.max_bits_per_row}")
        return b"", summary, ""
    if mine.row_keys.shape != (n, 16) or request.tags.shape != (n, sm.TAG_BYTES):
        raise ProtocolError("one row key and one tag per row scored")
    ledger = _open(rt, scope, mine)
    asked_tags = answer_tags(request.tags, answers, bits_each)
    now = host_time(mine.now)
    if ledger.epochs.size:
        now = max(now, float(ledger.epochs.max()))  # a clock set back does not reopen the window
    live = ledger.epochs >= now - DAY_SECONDS
    keys, tags = ledger.keys[live], ledger.tags[live]
    epochs, spent_bits = ledger.epochs[live], ledger.bits[live]
    from teeboost.protocols.strict.enclave.online_ledger import KEY_BYTES, online_spending

    online, online_seen = online_spending(rt, scope, mine.online_log.tobytes(), int(mine.online_version), now)
    spent: dict[bytes, int] = {}
    seen: set[bytes] = set()
    for key, tag, bits in zip(keys, tags, spent_bits):
        spent[key.tobytes()] = spent.get(key.tobytes(), 0) + int(bits)
        if bits > 0:  # a charged answer (a repeat's entry, without bits, gives nothing free)
            seen.add(key.tobytes() + tag.tobytes())
    charged = np.zeros(n, dtype=bool)
    for i in range(n):
        key = mine.row_keys[i].tobytes()
        scoring = key + asked_tags[i].tobytes()
        if scoring in seen or mine.row_keys[i, :KEY_BYTES].tobytes() + asked_tags[i].tobytes() in online_seen:
            continue
        seen.add(scoring)
        charged[i] = True
        spent[key] = spent.get(key, 0) + cost
    batch = [spent.get(mine.row_keys[i].tobytes(), 0) + online.get(mine.row_keys[i, :KEY_BYTES].tobytes(), 0)
             for i in range(n)]
    refusal = ""
    if mine.max_bits_per_row and max(batch, default=0) > mine.max_bits_per_row:
        # charged without bits, as a refused online request is; the words say no figure that
        # counts online spending
        charged[:] = False
        refusal = (f"scoring {n} row(s) at {cost} bits each ({request.outputs} output(s) x {bits_each} bits) would "
                   f"take a row past {mine.max_bits_per_row} bits per row per day (batch and online scoring together)")
    # an entry per row, charged or not: the ledger's size counts the rows asked, never which
    # were free (a row scored online with the same inputs is free here, and its host must not see it)
    new = sm.StrictLedger(ledger.version + 1, np.concatenate([keys, mine.row_keys]),
                          np.concatenate([tags, asked_tags]), np.concatenate([epochs, np.full(n, now)]),
                          np.concatenate([spent_bits, np.where(charged, cost, 0).astype(np.int64)]))
    summary.update(version=new.version, window_rows=len({bytes(k) for k in new.keys}))  # distinct rows asked
    return rt.seal(serde.encode(new), LEDGER_CONTEXT + scope), summary, refusal
