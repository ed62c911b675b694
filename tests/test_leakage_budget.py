"""The leakage budget: every bit about a passive row that leaves is counted, capped and audited.

Each attack of the budget's review is mounted here as the active host would mount it: with
its own labels, parameters and host code (``train_active``, ``strict_margin``,
``FederatedOracle``) against a real ``PassiveService`` configured from a TOML file, through the
channel, never by calling the passive party's state directly. The passive party runs with no
``[policy]`` table (its safe defaults) unless a test says otherwise.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

from teeboost.audit_report import read_audit
from teeboost.budget import RowLedger, ledger_path
from teeboost.config import BoostParams, ProtocolOptions
from teeboost.deploy.messages import Finish, PredictData, Setup
from teeboost.errors import ConfigError, ProtocolError
from teeboost.federation import _environments, train_active
from teeboost.parties.active import FederatedOracle, ensemble_digest
from teeboost.policy import SAFE_DEFAULTS, Policy
from teeboost.protocols.strict.hosts import strict_margin
from teeboost.transport.inmemory import InMemoryChannel

from .test_policy import _toml, align, entries, parties, service, setup, train  # noqa: F401 - fixture

pytestmark = pytest.mark.malicious_host

STUMPS = BoostParams(n_trees=32, max_depth=1, learning_rate=1.0, subsample=1.0, min_samples_leaf=20, max_bin=32)


def strict_service(tmp_path, policy: str = "", *, defaults: bool = True):
    """A passive party from its config (no [policy] table: its defaults) that runs strict
    enclaves, and the channel the active host reaches it through."""
    envs = _environments(True, ProtocolOptions(allow_simulated_tee=True), 1, None)
    party = service(tmp_path, policy, defaults=defaults)
    party.env = lambda: envs[1]
    return party, envs, InMemoryChannel({1: party.handle})


def attacker_model(channel, envs, aligned, params, labels, *, outputs=1, run_id="run-1", protocol="strict"):
    """The active host trains on labels of its choosing, as its own host code does."""
    train_rows, _ = setup(channel, aligned, params=params, protocol=protocol, outputs=outputs, run_id=run_id,
                          held_out=0)
    chosen = dataclasses.replace(train_rows, labels=labels)
    model, _ = train(channel, chosen, params, protocol, env=envs[0] if envs else None)
    channel.request_all({1: Finish(protocol)})
    return model


def score(channel, envs, model, batch):
    """One ordinary prediction session: align the batch by PSI, then route between enclaves."""
    rows = align(channel, batch, "predict")
    channel.request_all({1: PredictData("predict", ensemble_digest(model.ensemble))})
    return strict_margin(channel, envs[0], model.ensemble, model.owner, batch.take(rows).features, "predict")


# --- the policy's new rules and their defaults

def test_a_passive_party_without_a_policy_gets_the_safe_defaults(tmp_path):
    policy = Policy.from_table(None, "p.toml")
    assert {name: getattr(policy, name) for name in SAFE_DEFAULTS} == SAFE_DEFAULTS
    assert policy.max_bits_per_row_per_day == 8 and policy.output_bits == 8 and policy.max_outputs == 1
    partial = Policy.from_table(_toml('protocols = ["strict"]\nmax_trees = 100'), "p.toml")
    assert partial.max_trees == 100 and partial.max_bits_per_row_per_day == 8  # the rest stay safe
    lifted = Policy.from_table(_toml('max_bits_per_row_per_day = "none"\noutput_bits = "none"'), "p.toml")
    assert lifted.max_bits_per_row_per_day is None and lifted.output_bits is None  # said in words
    assert Policy.from_table(None, "a.toml", role="active").max_trees is None  # an active party limits itself
    for text, named in (("output_bits = 0", "output_bits = 0"), ("output_bits = 60", "at most 52"),
                        ("max_bits_per_row_per_day = 2.5", "max_bits_per_row_per_day = 2.5"),
                        ("max_outputs = -1", "max_outputs = -1")):
        with pytest.raises(ConfigError, match=named):
            Policy.from_table(_toml(text), "p.toml")


def test_a_many_output_model_is_refused_at_set_up_by_default(parties):
    """The K-class attack: 200 classes of random labels, one round of stumps. Under the
    defaults the passive party refuses the run before anything of its own is touched."""
    active, tmp_path = parties
    party, envs, channel = strict_service(tmp_path)
    aligned = active.take(align(channel, active))
    with pytest.raises(ProtocolError, match=r"\[policy\] max_outputs\).*200 outputs"):
        setup(channel, aligned, params=BoostParams(n_trees=1, max_depth=1, min_samples_leaf=20, subsample=0.8, max_bin=32), protocol="strict",
              outputs=200)
    assert entries(tmp_path, "refused")[-1]["rule"] == "max_outputs"
    party.close()


def test_the_k_class_session_is_refused_once_it_would_exceed_the_budget(parties):
    """A passive operator who allows 200 outputs and one such score a day: the first session
    releases 200 outputs x 8 bits about each row, charged in its enclave's ledger; a second
    model scoring the same rows is refused whole (the active party is told; its host sees a
    session as any other)."""
    active, tmp_path = parties
    party, envs, channel = strict_service(tmp_path, "max_outputs = 200\nmax_bits_per_row_per_day = 1600\n"
                                                    "max_trees = 400")
    aligned = active.take(align(channel, active))
    rng = np.random.default_rng(5)
    params = BoostParams(objective="multiclass", n_trees=1, max_depth=1, subsample=1.0, min_samples_leaf=20, max_bin=32)
    labels = rng.integers(0, 200, aligned.n_rows)
    labels[:200] = np.arange(200)  # every class present
    model = attacker_model(channel, envs, aligned, params, labels, outputs=200)
    batch = active.take(np.arange(300))
    margin = score(channel, envs, model, batch)
    n = margin.shape[0]  # the batch's rows the passive party holds too (PSI)
    assert margin.shape == (n, 200) and n > 250
    charged = entries(tmp_path, "charged")[-1]
    assert charged["rows"] == n and charged["cost_per_row"] == 1600
    second = attacker_model(channel, envs, aligned, params, np.roll(labels, 7), outputs=200, run_id="run-2")
    with pytest.raises(ProtocolError, match=r"\[policy\] max_bits_per_row_per_day\).*past 1600 bits per row per day"):
        score(channel, envs, second, batch)
    # sealed by its enclave: the passive host logs the session as charged, as any other (a
    # refusal it saw told it that a row of the batch had been scored online: red team)
    assert not [e for e in entries(tmp_path, "refused") if e.get("rule") == "max_bits_per_row_per_day"]
    assert entries(tmp_path, "charged")[-1]["rows"] == n
    party.close()


def test_one_output_of_many_passive_stumps_releases_at_most_its_bits(parties):
    """The 32-stump attack: noise labels, 32 passive stumps, one margin. Released at full
    precision the margin decodes to 32 bits per row; released by the default policy it takes
    at most 2**8 values (8 bits about a row), the same session again is free, and a session that
    asks the same rows anything new is refused."""
    active, tmp_path = parties
    party, envs, channel = strict_service(tmp_path)
    aligned = active.take(align(channel, active))
    noise = np.random.default_rng(3).normal(size=aligned.n_rows)
    model = attacker_model(channel, envs, aligned, STUMPS, noise)
    passive_stumps = sum(1 for t in model.ensemble.trees if t.party[0] == 1)
    assert passive_stumps >= 16  # the model really asks the passive party many questions per row
    batch = active.take(np.arange(600))
    released = score(channel, envs, model, batch)
    assert np.unique(released).size <= 2 ** 8
    n = released.shape[0]
    assert released.shape == (n, 1) and n > 550
    # the same question again: the same answer, nothing new (charged, it would pass the 8 bits a day)
    again = score(channel, envs, model, batch)
    assert np.array_equal(again, released)
    changed = dataclasses.replace(batch, features=batch.features + 1.0)  # other active inputs: a new answer
    with pytest.raises(ProtocolError, match=r"max_bits_per_row_per_day\).*would take a row past 8 bits per row per day"):
        score(channel, envs, model, changed)
    # a restart resets nothing: the ledger is sealed on disk, its version in the row ledger
    party.close()
    party, _, channel = strict_service(tmp_path)
    party.env = lambda: envs[1]  # the same platform: its sealing key opens the ledger
    with pytest.raises(ProtocolError, match=r"max_bits_per_row_per_day\)"):
        score(channel, envs, model, changed)
    party.close()


def test_full_precision_would_have_decoded_every_stump(parties):
    """The same attack with the passive operator lifting output_bits: the margin then takes
    far more than 2**8 values (the attack the quantization stops)."""
    active, tmp_path = parties
    party, envs, channel = strict_service(tmp_path, 'output_bits = "none"\nmax_bits_per_row_per_day = "none"')
    aligned = active.take(align(channel, active))
    model = attacker_model(channel, envs, aligned, STUMPS, np.random.default_rng(3).normal(size=aligned.n_rows))
    released = score(channel, envs, model, active.take(np.arange(600)))
    assert np.unique(released).size > 2 ** 8
    party.close()


def test_the_run_rows_are_never_scored_after_strict_training(parties):
    """The off-budget bug: after the strict finish record the passive enclave's prediction side
    held the run's training and validation rows. Now only charged batches are scored: the
    held-out rows (charged at set-up, and in the ledger), then PSI-aligned batches."""
    active, tmp_path = parties
    party, envs, channel = strict_service(tmp_path, 'max_bits_per_row_per_day = 64\nmax_prediction_rows_per_day = 500')
    aligned = active.take(align(channel, active))
    n = aligned.n_rows
    train_pos, test_pos, valid_pos = np.arange(n - 400), np.arange(n - 400, n - 200), np.arange(n - 200, n)
    params = BoostParams(n_trees=3, max_depth=2, min_samples_leaf=20, subsample=0.8, max_bin=32)
    with pytest.raises(ProtocolError, match=r"max_prediction_rows_per_day\).*600 more"):  # held-out + validation
        channel.request_all({1: Setup("run-0", "strict", json.dumps(params.to_dict()), 1, np.arange(n - 600),
                                      np.arange(n - 600, n - 300), np.arange(n - 300, n))})
    channel.request_all({1: Setup("run-1", "strict", json.dumps(params.to_dict()), 1, train_pos, test_pos, valid_pos)})
    model, _ = train_active(aligned.take(train_pos), channel, params, "strict", env=envs[0],
                            party_names={1: "telco"}, validation=(aligned.take(valid_pos), "valid"))
    # the finish record has arrived (the passive enclave released its records); Finish has not
    for dataset, rows in (("train", train_pos), ("valid", valid_pos)):
        with pytest.raises(ProtocolError, match=f"no dataset '{dataset}'"):
            strict_margin(channel, envs[0], model.ensemble, model.owner, aligned.take(rows).features, dataset)
    margin = strict_margin(channel, envs[0], model.ensemble, model.owner, aligned.take(test_pos).features, "test")
    assert margin.shape == (200, 1)
    assert entries(tmp_path, "charged")[-1]["rows"] == 200 and entries(tmp_path, "charged")[-1]["cost_per_row"] == 8
    assert entries(tmp_path, "setup")[-1]["rows"] == {"train": n - 400, "test": 200, "valid": 200}
    with pytest.raises(ProtocolError, match="no dataset 'test'"):  # each batch is scored once
        strict_margin(channel, envs[0], model.ensemble, model.owner, aligned.take(test_pos).features, "test")
    channel.request_all({1: Finish("strict")})
    party.close()


def test_a_rolled_back_sealed_ledger_is_refused(parties):
    active, tmp_path = parties
    party, envs, channel = strict_service(tmp_path, "max_bits_per_row_per_day = 64")
    aligned = active.take(align(channel, active))
    model = attacker_model(channel, envs, aligned, BoostParams(n_trees=2, max_depth=2, min_samples_leaf=20, subsample=0.8, max_bin=32),
                           aligned.labels)
    score(channel, envs, model, active.take(np.arange(100)))
    sealed = next(tmp_path.glob("*.strict-ledger.sealed"))
    old = sealed.read_bytes()
    score(channel, envs, model, active.take(np.arange(100, 200)))
    sealed.write_bytes(old)  # the copy from before the second session: it forgot 100 rows
    with pytest.raises(ProtocolError, match="rolled back"):
        score(channel, envs, model, active.take(np.arange(200, 300)))
    sealed.unlink()  # or no ledger at all
    with pytest.raises(ProtocolError, match="lost or removed ledger"):
        score(channel, envs, model, active.take(np.arange(200, 300)))
    party.close()


# --- routing answers: every answer one bit about one row

def routing_party(tmp_path, policy):
    party = service(tmp_path, 'protocols = ["plain", "ntee", "strict"]\n' + policy, defaults=True)
    return party, InMemoryChannel({1: party.handle})


def test_routing_answers_are_counted_per_row_and_survive_a_restart(parties):
    active, tmp_path = parties
    party, channel = routing_party(tmp_path, "max_bits_per_row_per_day = 12")
    aligned = active.take(align(channel, active))
    model = attacker_model(channel, None, aligned, BoostParams(n_trees=6, max_depth=3, min_samples_leaf=20, subsample=0.8, max_bin=32),
                           aligned.labels, protocol="plain")
    batch = active.take(np.arange(200))

    def predict(channel):
        rows = align(channel, batch, "predict")
        channel.request_all({1: PredictData("predict", ensemble_digest(model.ensemble))})
        oracle = FederatedOracle(channel, "predict", model.owner, batch.take(rows).features)
        return model.ensemble.margin(rows.size, oracle)

    with pytest.raises(ProtocolError, match=r"max_bits_per_row_per_day\).*routing question"):
        for _ in range(3):  # each pass asks each row up to its path's passive splits again
            predict(channel)
    day = RowLedger(ledger_path(tmp_path / "audit-telco.jsonl"), "telco").day()
    assert 0 < day["largest_per_row"] <= 12 and day["rows"] <= 200
    party.close()
    party, channel = routing_party(tmp_path, "max_bits_per_row_per_day = 12")  # a restart
    with pytest.raises(ProtocolError, match=r"max_bits_per_row_per_day\)"):
        predict(channel)
    party.close()
    ledger_file = ledger_path(tmp_path / "audit-telco.jsonl")
    assert ledger_file.stat().st_mode & 0o077 == 0  # private to the party
    rows = [bytes(r) for (r,) in sqlite3.connect(ledger_file).execute("SELECT row FROM spent")]
    assert rows and all(len(r) == 16 for r in rows)  # keyed hashes, never ids
    assert not {str(i).encode() for i in batch.ids} & set(rows)


def test_the_same_model_in_ntee_is_refused_and_in_strict_it_fits(parties):
    """A normal bank's day in miniature: score each applicant once. Strict releases one 8-bit
    output per row; N-TEE answers a routing question per passive split on each row's path,
    and the refusal says so."""
    active, tmp_path = parties
    params = BoostParams(n_trees=20, max_depth=4, min_samples_leaf=20, subsample=0.8, max_bin=32)
    batch = active.take(np.arange(300))
    (tmp_path / "strict").mkdir()
    shutil.copy(tmp_path / "passive.csv", tmp_path / "strict" / "passive.csv")
    party, envs, channel = strict_service(tmp_path / "strict")
    aligned = active.take(align(channel, active))
    model = attacker_model(channel, envs, aligned, params, aligned.labels)
    assert score(channel, envs, model, batch).shape[1] == 1
    assert entries(tmp_path / "strict", "charged")[-1]["cost_per_row"] == 8
    party.close()

    (tmp_path / "ntee").mkdir()
    shutil.copy(tmp_path / "passive.csv", tmp_path / "ntee" / "passive.csv")
    party, envs, channel = strict_service(tmp_path / "ntee")
    aligned = active.take(align(channel, active))
    model = attacker_model(channel, envs, aligned, params, aligned.labels, protocol="ntee")
    rows = align(channel, batch, "predict")
    channel.request_all({1: PredictData("predict", ensemble_digest(model.ensemble))})
    with pytest.raises(ProtocolError, match=r"\[policy\] max_bits_per_row_per_day\).*routing question.*at most 8 "
                                            r"bits per row per day"):
        model.ensemble.margin(rows.size, FederatedOracle(channel, "predict", model.owner, batch.take(rows).features))
    party.close()


def test_audit_show_reports_bits_against_the_budget(parties):
    active, tmp_path = parties
    party, envs, channel = strict_service(tmp_path)
    aligned = active.take(align(channel, active))
    model = attacker_model(channel, envs, aligned, BoostParams(n_trees=2, max_depth=2, min_samples_leaf=20, subsample=0.8, max_bin=32),
                           aligned.labels)
    score(channel, envs, model, active.take(np.arange(50)))
    party.close()
    shown = subprocess.run([sys.executable, "-m", "teeboost.cli", "audit", "show", "--log",
                            str(tmp_path / "audit-telco.jsonl")], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert "budget: 8 bits per row per day; strict outputs at 8 bits" in shown.stdout
    n = entries(tmp_path, "charged")[-1]["rows"]
    assert f"strict sessions: 1, {n} rows, at most {8 * n} bits charged (each row at most 8" in shown.stdout
    assert read_audit(tmp_path / "audit-telco.jsonl")[-1]["event"] in ("queries", "prediction queries", "charged")


def scored_once(parties):
    """A strict party, the attacker's model of 10 x 3 and a batch of 300 rows scored once."""
    active, tmp_path = parties
    party, envs, channel = strict_service(tmp_path)
    aligned = active.take(align(channel, active))
    model = attacker_model(channel, envs, aligned, BoostParams(n_trees=10, max_depth=3, min_samples_leaf=20, subsample=0.8, max_bin=32),
                           aligned.labels)
    batch = active.take(np.arange(300))
    score(channel, envs, model, batch)
    return party, envs, channel, model, batch


# --- red-team findings on the budget, each mounted as found

def test_a_prediction_batch_cannot_take_a_run_datasets_name(parties):
    """A batch named "train" was routed as the run's training rows, which the budget does not
    charge: 73 bits per row in three batches under an 8-bit budget."""
    active, tmp_path = parties
    party, channel = routing_party(tmp_path, "")
    aligned = active.take(align(channel, active))
    attacker_model(channel, None, aligned, BoostParams(n_trees=4, max_depth=3, min_samples_leaf=20, subsample=0.8, max_bin=32), aligned.labels,
                   protocol="plain")
    batch = active.take(np.arange(200))
    for name in ("train", "valid", "test", "x" * 81, "a b"):
        align(channel, batch, "predict")
        with pytest.raises(ProtocolError, match="a prediction batch cannot be called"):
            channel.request_all({1: PredictData(name, "0" * 64)})
    party.close()


def test_own_split_records_changed_are_a_new_scoring(parties):
    """Strict: the active host keeps its inputs and moves its own thresholds to +-inf, sending
    rows down other passive subtrees: each such session was free. Its own records are now in
    the tag, so the second session is charged and refused."""
    from teeboost.core.tree import OwnerTable, SplitRecord

    party, envs, channel, model, batch = scored_once(parties)
    moved = OwnerTable()
    for record_id, record in model.owner.items():
        moved.insert(record_id, dataclasses.replace(record, threshold=np.inf))
    assert isinstance(next(iter(dict(moved.items()).values())), SplitRecord)
    rows = align(channel, batch, "predict")
    channel.request_all({1: PredictData("predict", ensemble_digest(model.ensemble))})
    with pytest.raises(ProtocolError, match=r"max_bits_per_row_per_day\)"):
        strict_margin(channel, envs[0], model.ensemble, moved, batch.take(rows).features, "predict")
    party.close()


@pytest.mark.parametrize("forge", ["other rows", "other model"])
def test_a_session_scores_only_what_the_passive_parties_were_asked(parties, forge):
    """Strict: the active host called its enclave's predict_begin twice: the first request
    (already charged rows: free) went to the passive party, the second (other rows, or a forged
    model of one 0/1 output per passive record) was scored with the bits released for the
    first: every passive split bit of every row for 8 bits. A session now begins once."""
    from teeboost.core.model import Ensemble
    from teeboost.core.split import SplitCriteria
    from teeboost.core.tree import Tree
    from teeboost.protocols.strict.enclave import messages as sm
    from teeboost.protocols.enclave.messages import pack_records, unpack_records
    from teeboost.protocols.ntee.hosts import SealedMessage, attest_enclaves
    from teeboost.protocols.strict.hosts import PROGRAM
    from teeboost.transport import serde

    party, envs, channel, model, batch = scored_once(parties)  # charged once: the same request again is free
    rows = align(channel, batch, "predict")
    channel.request_all({1: PredictData("predict", ensemble_digest(model.ensemble))})
    charged_raw = batch.take(rows).features
    ensemble = model.ensemble
    if forge == "other model":
        passive_records = [r for t in ensemble.trees for p, r in zip(t.party, t.record) if p == 1]
        ensemble = Ensemble("regression", np.zeros(len(passive_records)),
                            [Tree(output=k, left=[1, -1, -1], right=[2, -1, -1], party=[1, -1, -1],
                                  record=[r, -1, -1], value=[0.0, 1.0, 0.0], gain=[0.0] * 3, n_rows=[0] * 3,
                                  cover=[0.0] * 3) for k, r in enumerate(passive_records)])
    used_raw = charged_raw[::-1].copy() if forge == "other rows" else charged_raw
    session = dataclasses.replace(envs[0], run_id="predict.predict.forged")  # a session for dataset "predict"
    params = BoostParams()  # a prediction session binds the default criteria, as strict_margin does
    enclave = attest_enclaves(PROGRAM, "strict", channel, SplitCriteria.from_params(params), params.max_bin, session)

    def begin(ens, raw):
        return enclave.ecall("predict_begin", serde.encode(sm.StrictPredictIn(
            json.dumps(ens.to_dict()), raw.shape[0], *sm.record_arrays(model.owner), raw)))

    try:
        requests = unpack_records(begin(model.ensemble, charged_raw))
        with pytest.raises(Exception, match="already begun its prediction"):
            begin(ensemble, used_raw)
        replies = channel.request_all({p: SealedMessage(-1, "predict:predict", r) for p, r in requests.items()})
        with pytest.raises(Exception, match="stopped after a failed ecall"):  # nothing is released
            enclave.ecall("predict_finish", pack_records({p: r.record for p, r in replies.items()}))
    finally:
        enclave.close()
    party.close()


@pytest.mark.serial
def test_an_abandoned_strict_session_releases_the_enclave_side_at_once(parties):
    """Red-team finding: a strict prediction that died after its enclave handshake held the
    passive party's enclave side for the whole lease (120 s then). Other sessions wait (Busy)
    meanwhile; the active party's Abandon, sent when a prediction fails, releases it at once."""
    import time

    from teeboost.core.split import SplitCriteria
    from teeboost.deploy.messages import Abandon
    from teeboost.protocols.ntee.hosts import EnclaveHello, attest_enclaves
    from teeboost.protocols.strict.hosts import PROGRAM

    active, tmp_path = parties
    party, envs, channel = strict_service(tmp_path)
    aligned = active.take(align(channel, active))
    model = attacker_model(channel, envs, aligned, BoostParams(n_trees=2, max_depth=2, min_samples_leaf=20, subsample=0.8, max_bin=32),
                           aligned.labels)
    batch = active.take(np.arange(100))
    digest = ensemble_digest(model.ensemble)
    for session in ("predict.s1", "predict.s2"):
        align(channel, batch, session)
        channel.request_all({1: PredictData(session, digest)})
    params = BoostParams()  # a prediction session binds the default criteria, as strict_margin does
    dying = attest_enclaves(PROGRAM, "strict", channel, SplitCriteria.from_params(params), params.max_bin,
                            dataclasses.replace(envs[0], run_id="predict.predict.s1.dead"))
    dying.close()  # its process died before its scoring record: the enclave side is still its turn
    hello = EnclaveHello(b"", "predict.predict.s2.x", [0.0] * 11, np.zeros((2, 32), np.uint8))
    with pytest.raises(ProtocolError, match="Busy: .*another enclave session"):
        channel.request(1, hello)
    channel.request(1, Abandon("predict.s1"))
    started = time.monotonic()
    rows = align(channel, batch, "predict.s3")
    channel.request_all({1: PredictData("predict.s3", digest)})
    margin = strict_margin(channel, envs[0], model.ensemble, model.owner, batch.take(rows).features, "predict.s3")
    assert margin.shape == (rows.size, 1) and time.monotonic() - started < 10
    assert entries(tmp_path, "abandoned")[-1]["session"] == "predict.s1"
    party.close()


def test_the_same_question_at_a_finer_precision_is_charged_again(parties):
    """Red team: the tag for "the same answer again" did not name the precision released, so
    after the passive operator raised ``output_bits`` from 4 to 8 the active host asked the same
    rows again, free, and got each score at twice the precision. Now the second session costs 8
    bits a row more, past the 10 a day."""
    active, tmp_path = parties
    party, envs, channel = strict_service(tmp_path, "output_bits = 4\nmax_bits_per_row_per_day = 10")
    aligned = active.take(align(channel, active))
    model = attacker_model(channel, envs, aligned, STUMPS, np.random.default_rng(5).normal(size=aligned.n_rows))
    batch = active.take(np.arange(200))
    coarse = score(channel, envs, model, batch)
    assert np.unique(coarse).size <= 2 ** 4
    assert np.array_equal(score(channel, envs, model, batch), coarse)  # the same answer again: free
    party.close()
    party, _, channel = strict_service(tmp_path, "output_bits = 8\nmax_bits_per_row_per_day = 10")
    party.env = lambda: envs[1]  # the same platform: its sealing key opens the ledger
    with pytest.raises(ProtocolError, match=r"max_bits_per_row_per_day\).*would take a row past 10 bits"):
        score(channel, envs, model, batch)
    party.close()
