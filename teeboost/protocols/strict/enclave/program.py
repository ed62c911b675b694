"""Strict enclave program: runs in every party's enclave (role chosen at init).

Active role: loads its host's labels and binned columns once and runs the whole boosting
run inside (``StrictTrainer``); the host only relays sealed records and receives what is
published: progress, sealed checkpoints, and at the end the model without gains or node
sizes. For prediction it computes margins from the published model, its own rows and the
passive enclaves' sealed record bits, and returns margins only.
Passive role: holds its party's binned rows (training then validation), answers every level
for every position (``PassiveStrictState``), and gives its own host nothing but the model's
digest and its split records sealed to this code and platform: they say which way the labels
lean, so they open only inside an enclave (prediction) or on the label owner's signed consent
(``ecall_disclose``).
Every channel is set up once per run with a party whose pinned identity key signed it.
"""

import hashlib
import json
import os

import numpy as np

from teeboost.core.model import Ensemble
from teeboost.core.predict import RoutingOracle
from teeboost.core.release import quantize_margins
from teeboost.errors import ProtocolError
from teeboost.protocols.strict.enclave import messages as sm
from teeboost.protocols.strict.enclave import online_messages as om
from teeboost.protocols.enclave.handshake import ecall_confirm, ecall_finish_initiator, ecall_finish_responder, ecall_hello, ecall_respond, expect, init_session, role  # noqa: F401 - entry points
from teeboost.protocols.enclave.messages import pack_records, unpack_records
from teeboost.protocols.strict.enclave.consent import verify_consent
from teeboost.protocols.strict.enclave.ledger import charge_session, ledger_scope
from teeboost.protocols.strict.enclave.online import (ecall_online_begin, ecall_online_finish,  # noqa: F401
                                                      ecall_online_model, ecall_online_records, ecall_online_table,
                                                      ecall_online_warm)
from teeboost.protocols.strict.enclave.passive_state import PassiveStrictState
from teeboost.protocols.strict.enclave.trainer import StrictTrainer
from teeboost.transport import serde

PROTOCOL = "strict"
PASSIVE_CHECKPOINT = b"strict-passive-checkpoint"
PASSIVE_RECORDS = b"strict-passive-records-v1"


def ecall_init(rt, payload):
    init_session(rt, payload, PROTOCOL)
    return b""


# ---- active role: training

def _trainer(rt):
    trainer = rt.state.get("trainer")
    if trainer is None:
        raise ProtocolError("no training data was loaded")
    return trainer


def ecall_load(rt, payload):
    """The host's labels, binned columns and parameters, once."""
    current = role(rt, "active")
    current.require_all_peers()
    if "trainer" in rt.state:
        raise ProtocolError("the training data was already loaded")
    rt.state["trainer"] = StrictTrainer(current, expect(payload, sm.StrictActiveLoad), rt.seal, rt.unseal)
    return b""


def ecall_restore(rt, blob):
    """A sealed checkpoint of this run, before training starts -> how many trees it holds."""
    trainer = _trainer(rt)
    if trainer.bridge.done or trainer.state is not None:
        raise ProtocolError("a checkpoint can be restored only once, before training")
    return trainer.restore(blob).to_bytes(8, "big")


def ecall_train(rt, payload):
    """Start (empty payload, first call) or continue training -> the next ``StrictStep``."""
    trainer = _trainer(rt)
    if not trainer.bridge.started:
        if payload:
            raise ProtocolError("training has not started")
        return trainer.start()
    return trainer.bridge.step(payload)


# ---- passive role

def _passive(rt):
    state = rt.state.get("passive")
    if state is None:
        raise ProtocolError("this enclave holds no columns yet")
    return state


def ecall_columns(rt, payload):
    current = role(rt, "passive")
    if "passive" in rt.state:
        raise ProtocolError("the columns were already loaded")
    rt.state["passive"] = PassiveStrictState(expect(payload, sm.StrictPassiveLoad), current.max_bin,
                                             current.criteria, current.party, current.constraints)
    return b""


def ecall_record(rt, record):
    """One sealed record from the active enclave -> the sealed answer for it, or, for the
    end of training, what this party's host keeps: the digest, and its records sealed."""
    current = role(rt, "passive")
    state = _passive(rt)
    channel = current.channel(0)
    msg = serde.decode(channel.open(record))
    if isinstance(msg, sm.StrictLevel):
        return channel.seal(serde.encode(state.level(msg)))
    if isinstance(msg, sm.StrictDecision):
        return channel.seal(serde.encode(state.decide(msg)))
    if isinstance(msg, sm.StrictFinish):
        if len(msg.model_digest) != 32:
            raise ProtocolError("the end of training names no model digest")
        table = state.record_table(msg, current.keys[0])
        sealed = rt.seal(serde.encode(table), PASSIVE_RECORDS + msg.model_digest)
        return serde.encode(sm.StrictFinished(msg.model_digest, msg.n_trees, np.frombuffer(sealed, np.uint8)))
    raise ProtocolError(f"unexpected {type(msg).__name__} in a strict record")


def ecall_checkpoint(rt, payload):
    current = role(rt, "passive")
    return rt.seal(_passive(rt).snapshot(), current.context + PASSIVE_CHECKPOINT)


def ecall_restore_passive(rt, payload):
    """[8-byte tree count | sealed snapshot]: records of a checkpoint of this run."""
    current = role(rt, "passive")
    n_trees = int.from_bytes(payload[:8], "big")
    if n_trees < 0 or len(payload) < 8:
        raise ProtocolError("a checkpoint restore names its tree count first")
    released = expect(rt.unseal(payload[8:], current.context + PASSIVE_CHECKPOINT), sm.StrictReleased)
    _passive(rt).restore(released, n_trees)
    return b""


# ---- prediction: routing stays between enclaves, margins come out

def ecall_predict_begin(rt, payload):
    """The published model and this party's own rows; -> one sealed request per passive
    enclave (an empty record: each evaluates every one of its records on every row)."""
    current = role(rt, "active")
    current.require_all_peers()
    # one prediction per session: what the passive parties were asked for (and charged) is what
    # is scored (red-team finding: a second begin scored other rows, or another model, with the
    # record bits released for the first)
    if rt.state.get("predict_begun"):
        raise ProtocolError("this session has already begun its prediction; a session scores one request")
    rt.state["predict_begun"] = True
    msg = expect(payload, sm.StrictPredictIn)
    ensemble = Ensemble.from_dict(json.loads(msg.model))
    if msg.raw.shape[0] != msg.n_rows:
        raise ProtocolError("the rows to predict do not match their count")
    rt.state["predict"] = (ensemble, msg)
    # the digest of the model this enclave will use, computed here: passive enclaves answer
    # only for the model their records were released with
    digest = sm.model_digest(json.loads(json.dumps(ensemble.to_dict())))
    frame = serde.encode(sm.StrictPredictRequest(msg.n_rows, digest, ensemble.n_outputs,
                                                 _tags(digest + _own_records_digest(msg), msg.raw,
                                                       len(current.peers))))
    return pack_records({p: current.channel(p).seal(frame) for p in current.peers})


def _own_records_digest(msg):
    """This party's own split records as its host gave them: they steer rows through the
    passive splits too (red-team finding: changed own thresholds, same inputs, were free)."""
    h = hashlib.sha256(b"teeboost-strict-own-records-v1")
    for array in (msg.own_ids, msg.own_features, msg.own_thresholds, msg.own_missing_left, msg.own_categories):
        h.update(np.ascontiguousarray(array).tobytes())
    return h.digest()


def _tags(digest, raw, passive_parties: int):
    """Per row: the model, this party's own records and its inputs for the row. The same tag
    again is the same answer again, which a passive ledger does not charge twice (each binds
    the tag to its own answer, ``ledger.answer_tags``). With two or more passive parties no
    tag repeats (a fresh salt per request): one party's answer may be the same while
    another's changed, and the new score then moves by the other's change, so a repeat free
    at the first would dither its part of the margin past the quantization, each change once
    more (red team). Every score is then charged at every party: over, never under."""
    salt = os.urandom(16) if passive_parties > 1 else b""
    rows = np.ascontiguousarray(raw, dtype=np.float64)
    tags = np.zeros((rows.shape[0], sm.TAG_BYTES), dtype=np.uint8)
    for i in range(rows.shape[0]):
        tags[i] = np.frombuffer(hashlib.sha256(digest + salt + rows[i].tobytes()).digest()[:sm.TAG_BYTES], np.uint8)
    return tags


class _BitsOracle(RoutingOracle):
    def __init__(self, own, bits):
        self.own = own
        self.bits = bits

    def route(self, questions):
        out = {}
        for party, asked in questions.items():
            table = self.own if party == 0 else self.bits.get(party, {})
            answers = []
            for record, rows in asked:
                if int(record) not in table:
                    raise ProtocolError(f"party {party} has no split record {int(record)}")
                answers.append(table[int(record)][rows])
            out[party] = answers
        return out


RULE_WIDTH, REFUSAL_WIDTH = 40, 240  # a sealed refusal's words, padded: the same size whatever they say


def ecall_predict_finish(rt, payload):
    """Every passive enclave's sealed record bits -> the margins, and nothing else; or the
    first passive party's refusal its enclave sealed (its row budget), and no margin."""
    current = role(rt, "active")
    if "predict" not in rt.state:
        raise ProtocolError("no prediction is under way")
    ensemble, msg = rt.state.pop("predict")
    records = unpack_records(payload)
    if sorted(records) != current.peers:
        raise ProtocolError("record bits must come from every passive party")
    bits = {}
    precision = []  # each passive party's policy on how precisely an output may be released
    refusals = []
    for party, record in records.items():
        answer = expect(current.channel(party).open(record), sm.StrictRecordBits)
        if answer.refused.strip():
            refusals.append(om.StrictOnlineRefusal(party, answer.refused.strip(), answer.detail.strip()))
        if answer.output_bits < 0:
            raise ProtocolError(f"party {party} names {answer.output_bits} output bits")
        if answer.output_bits:
            precision.append(answer.output_bits)
        if answer.n_rows != msg.n_rows or answer.bits.size != (answer.ids.size * msg.n_rows + 7) // 8:
            raise ProtocolError(f"party {party} evaluated other rows than the ones to predict")
        flat = np.unpackbits(answer.bits, count=answer.ids.size * msg.n_rows).astype(bool)
        bits[party] = {int(i): flat[j * msg.n_rows:(j + 1) * msg.n_rows] for j, i in enumerate(answer.ids)}
    if refusals:
        return serde.encode(refusals[0])
    own = sm.go_left_by_record(msg.own_ids, msg.own_features, msg.own_thresholds, msg.own_missing_left,
                               msg.own_categories, msg.raw)
    margin = ensemble.margin(msg.n_rows, _BitsOracle(own, bits))
    # the strictest passive party sets the precision: no output says more than it allows
    return serde.encode(sm.StrictPredictions(quantize_margins(ensemble, margin, min(precision, default=0))))


def _unseal_records(rt, sealed, model_digest: bytes) -> sm.StrictRecordTable:
    """The records this enclave code sealed for the model of this digest (the digest is in the
    sealing context, so another model's blob does not open)."""
    table = expect(rt.unseal(bytes(sealed), PASSIVE_RECORDS + model_digest), sm.StrictRecordTable)
    if table.model_digest != model_digest:
        raise ProtocolError("the sealed records belong to another model")
    return table


def _open_records(rt, sealed, model_digest: bytes, current) -> sm.StrictRecordTable:
    """Sealed records, for a session with the label owner of the run that sealed them."""
    table = _unseal_records(rt, sealed, model_digest)
    if table.party != current.party:
        raise ProtocolError("the sealed records belong to another model or party")
    if table.active_key != current.keys[0]:
        raise ProtocolError("the sealed records were made with another label owner than this session's")
    return table


def _without_padding(table: sm.StrictRecordTable) -> sm.StrictRecordTable:
    kept = table.ids != 0
    return sm.StrictRecordTable(table.party, table.model_digest, table.active_key, table.n_features, table.ids[kept],
                                table.features[kept], table.thresholds[kept], table.missing_left[kept],
                                table.categories[kept], table.trees[kept])


def ecall_disclose(rt, payload):
    """A passive host's sealed records -> the records in the clear, only on the label owner's
    consent for this model and party (signed by the identity key pinned in the run that sealed
    them). Needs no session: the host asks its own fresh enclave."""
    msg = expect(payload, sm.StrictDisclose)
    table = _unseal_records(rt, msg.sealed, msg.model_digest)
    verify_consent(table.active_key, table.model_digest, table.party, msg.signature)
    return serde.encode(_without_padding(table))


def ecall_predict_records(rt, payload):
    """Passive: [sealed request | this party's records, rows and budget] -> [sealed record bits
    (empty when the session is refused) | the sealed row ledger (empty: unchanged) | what the
    session cost, for the host's audit log]. Charged before any bit leaves."""
    current = role(rt, "passive")
    parts = unpack_records(payload)
    channel = current.channel(0)
    request = expect(channel.open(parts.get(0, b"")), sm.StrictPredictRequest)
    mine = expect(parts.get(1, b""), sm.StrictRecordsIn)
    if len(mine.model_digest) != 32 or mine.model_digest != request.model_digest:
        raise ProtocolError("the active party predicts with another model than the one this party's records were "
                            "released for")
    n_rows = mine.raw.shape[0]
    if n_rows != request.n_rows:
        raise ProtocolError(f"the active party predicts {request.n_rows} rows; this party holds {n_rows}")
    if mine.output_bits < 0 or mine.max_outputs < 0 or mine.max_bits_per_row < 0:
        raise ProtocolError("budget settings must be >= 0")
    sealed = bool(mine.sealed.size)
    slots = 0
    if sealed:  # the records stay in here; the host gave them sealed
        padded = _open_records(rt, mine.sealed, mine.model_digest, current)
        slots = padded.ids.size  # one per position the run decided: public, unlike how many this party won
        table = _without_padding(padded)
        if mine.raw.ndim != 2 or mine.raw.shape[1] != table.n_features:  # before anything reads a record
            raise ProtocolError("the rows to score do not have this party's columns")
        records = (table.ids, table.features, table.thresholds, table.missing_left, table.categories)
    else:  # disclosed records, or one operator running every party
        records = (mine.ids, mine.features, mine.thresholds, mine.missing_left, mine.categories)
    try:
        left = sm.go_left_by_record(*records, mine.raw)
    except ProtocolError:
        if not sealed:
            raise
        # red team: a detailed error (record id, feature) was an oracle on sealed records
        raise ProtocolError("the rows to score do not fit this party's sealed records") from None
    ids = np.array(sorted(left), dtype=np.int64)
    bits = np.stack([left[int(i)] for i in ids]) if ids.size else np.zeros((0, n_rows), dtype=bool)
    ledger, summary, refusal = charge_session(rt, ledger_scope(current), request, mine, bits)  # before any bit leaves
    if summary["refused"]:
        return pack_records({0: b"", 1: b"", 2: json.dumps(summary).encode()})
    if refusal:
        bits = np.zeros_like(bits)
    if slots > ids.size:  # red team: the answer's size, which the host relays, showed how many splits it won
        ids = np.concatenate([ids, np.zeros(slots - ids.size, dtype=np.int64)])  # id 0: no record
        bits = np.concatenate([bits, np.zeros((slots - bits.shape[0], n_rows), dtype=bool)])
    rule = "max_bits_per_row_per_day" if refusal else ""
    sealed = channel.seal(serde.encode(sm.StrictRecordBits(n_rows, ids, np.packbits(bits.reshape(-1)),
                                                           mine.output_bits, rule.ljust(RULE_WIDTH),
                                                           refusal[:REFUSAL_WIDTH].ljust(REFUSAL_WIDTH))))
    return pack_records({0: sealed, 1: ledger, 2: json.dumps(summary).encode()})
