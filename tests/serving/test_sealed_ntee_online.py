"""N-TEE scored online in one sealed exchange between the parties' enclaves, attacked as each
host would: the passive host charges, in the row ledger batch prediction charges, the rows the
active party names in the clear, at what a score can tell (at most 64 bits an output, at most
one bit per node of the party on the row's path in each tree); an active host that names other
rows than it seals, none, or a smaller path bound than its enclave computed, is refused by the
passive enclave; a strict passive host that hands its
enclave handles of its own choosing learns nothing from them (real passive party processes)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from teeboost.budget import RowLedger
from teeboost.deploy.config import load_config
from teeboost.deploy.demo import set_peer_addresses, start_passive, write_federation
from teeboost.model_files import load_active
from teeboost.serving import strict_online
from teeboost.serving.federated import FederatedScorer
from teeboost.serving.scorer import PeerUnavailable

from ..helpers import stop_passive_parties
from . import host_view
from .test_online_federated import _new_customers, _scorer_rows

DEPTH = 3


def _train(configs, protocol):
    done = subprocess.run([sys.executable, "-m", "teeboost.cli", "party", "--config", str(configs["active"]),
                           "--protocol", protocol, "--json"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("sealed-ntee")
    configs = write_federation(tmp_path, n_passive=1, training={"n_trees": 5, "max_depth": DEPTH}, rows=3000)
    passive = configs["passive-1"]
    passive.write_text(re.sub(r"max_bits_per_row_per_day = \d+", "max_bits_per_row_per_day = 100000",
                              passive.read_text()))
    process, address = start_passive(passive, tmp_path / "passive-1.address", tmp_path / "passive-1.log")
    federation_processes(tmp_path).append(process)
    set_peer_addresses(configs["active"], {1: ("passive-1", address)})
    _train(configs, "ntee")
    yield tmp_path, configs
    stop_passive_parties(configs["active"], [p for p in federation_processes(tmp_path) if p.poll() is None])


_PROCESSES: dict = {}


def federation_processes(tmp_path) -> list:
    """The passive processes a module's federation started (restarts included)."""
    return _PROCESSES.setdefault(str(tmp_path), [])


def _spent(tmp_path) -> int:
    ledger = RowLedger(tmp_path / "audit-passive-1.budget.sqlite", "passive-1")
    try:
        return ledger.day()["total_bits"]
    finally:
        ledger.close()


def _scored_once(config, ids, features):
    """The rows scored by a scorer of their own, closed after."""
    scorer = FederatedScorer(config, "credit")
    try:
        return scorer.score(ids, features)
    finally:
        scorer.close()


def _most_passive_nodes_on_a_path(ensemble) -> int:
    """Summed over the trees: the most of party 1's nodes on one root-to-leaf path."""
    def most(tree, node):
        if tree.left[node] < 0:
            return 0
        return int(tree.party[node] == 1) + max(most(tree, tree.left[node]), most(tree, tree.right[node]))
    return sum(most(tree, 0) for tree in ensemble.trees)


def test_the_passive_host_charges_what_a_score_can_tell_in_the_ledger_batch_prediction_charges(federation):
    tmp_path, configs = federation
    config = load_config(configs["active"])
    ids, features = _scorer_rows(tmp_path, config, 10, skip=2400)
    per_score = min(64, _most_passive_nodes_on_a_path(load_active(config.model_dir / "active.json").ensemble))
    assert 0 < per_score < 64  # 5 trees of depth 3: the path bound is the smaller (one output)
    scorer = FederatedScorer(config, "credit")
    try:
        before = _spent(tmp_path)
        scored = scorer.score(ids, features)
        held = sum(r is None for r in scored.reasons)
        assert held >= 5 and _spent(tmp_path) - before == held * per_score
        assert scorer.counts["rows"] == held and scorer._strict.sessions == 1  # one sealed session
    finally:
        scorer.close()


class _Telling:
    """An active host that names other rows in the clear than it seals (``shift``), or tells
    its enclave the passive host is told nothing (``clear``)."""

    def __init__(self, monkeypatch, *, shift=0, clear=True, bound=None):
        if bound is not None:
            monkeypatch.setattr(strict_online.StrictOnlineActive, "_path_bits", lambda self, party: bound)
        sealed = strict_online.OnlineSealed
        model = strict_online.om.StrictOnlineModel

        def told(run_id, digest, version, record, outputs=0, path_bits=0, handles=np.zeros(0, np.int64)):
            if handles.size:
                handles = (handles + shift) % 1000
            return sealed(run_id, digest, version, record, outputs, path_bits, handles)

        def loaded(*args):
            return model(*args[:-1], clear) if len(args) == 7 else model(*args)

        monkeypatch.setattr(strict_online, "OnlineSealed", told)
        monkeypatch.setattr(strict_online.om, "StrictOnlineModel", loaded)


@pytest.mark.parametrize("lie", ["other rows", "no rows told", "a smaller path bound"])
def test_an_active_host_that_tells_other_rows_than_it_seals_is_refused(federation, monkeypatch, lie):
    tmp_path, configs = federation
    config = load_config(configs["active"])
    ids, features = _scorer_rows(tmp_path, config, 5, skip=2450)
    if lie == "other rows":
        _Telling(monkeypatch, shift=7)
    elif lie == "no rows told":
        _Telling(monkeypatch, clear=False)
    else:  # the host says its trees are stumps: the bound its enclave computed is not that
        _Telling(monkeypatch, bound=1)
    scorer = FederatedScorer(config, "credit")
    try:
        scored = scorer.score(ids, features)
    finally:
        scorer.close()
    said = "did not tell them" if lie == "no rows told" else "not the ones the active enclave asks about"
    assert all(r is not None for r in scored.reasons) and np.isnan(scored.values).all()
    assert any(said in r for r in scored.reasons), scored.reasons


GUESS_PATCH = '''
import json, sys
from teeboost.deploy import online_strict

GUESS = int(sys.argv.pop(1))


class _Json:
    loads = staticmethod(json.loads)

    @staticmethod
    def dumps(value, *args, **kwargs):
        if isinstance(value, dict) and "now" in value:  # what the host tells its enclave per request
            value = {**value, "handles": [GUESS], "outputs": 1}
        return json.dumps(value, *args, **kwargs)


online_strict.json = _Json
from teeboost.cli import main
sys.exit(main(sys.argv[1:]))
'''


TRUNCATE_PATCH = '''
import sys
from teeboost.deploy import online_strict

KEEP = int(sys.argv.pop(1))
honest = online_strict.om.StrictOnlineTable


class _Messages:
    """The enclave messages, with the table handed to the enclave cut to its first KEEP rows."""

    def __getattr__(self, name):
        return getattr(real, name)

    @staticmethod
    def StrictOnlineTable(*fields):
        fields = list(fields)
        fields[7] = fields[7][:KEEP]  # the rows' values
        if fields[8].shape[0]:
            fields[8] = fields[8][:KEEP]  # their ledger keys
        return honest(*fields)


real = online_strict.om
online_strict.om = _Messages()
from teeboost.cli import main
sys.exit(main(sys.argv[1:]))
'''


def _restart(tmp_path, configs, *command):
    for process in federation_processes(tmp_path):
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=30)
    n = len(federation_processes(tmp_path))
    ready = tmp_path / f"passive-1.{n}.address"
    log = tmp_path / f"passive-1.{n}.log"
    if command:
        process = subprocess.Popen([sys.executable, *command, "party", "--config", str(configs["passive-1"]),
                                    "--ready-file", str(ready)], stdout=log.open("w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        address = ready.read_text().strip()
    else:
        process, address = start_passive(configs["passive-1"], ready, log)
    federation_processes(tmp_path).append(process)
    set_peer_addresses(configs["active"], {1: ("passive-1", address)})


def test_a_strict_passive_host_learns_nothing_from_handles_it_hands_its_enclave(federation):
    """Strict: the passive host adds a guessed handle to what it tells its enclave with every
    request. A refusal that depended on the guess would tell it whether it guessed the scored
    customer; the enclave never looks at it: the same scores, right guess or wrong. Nor does a
    table cut short just before or just after the scored row tell it anything."""
    tmp_path, configs = federation
    _train(configs, "strict")
    config = load_config(configs["active"])
    ids, features = _scorer_rows(tmp_path, config, 1, skip=2480)
    scorer = FederatedScorer(config, "credit")
    try:
        honest = scorer.score(ids, features)
        handle = int(scorer.caches[1].handles(scorer._lookup_sessions.short(), ids)[1][0])
    finally:
        scorer.close()
    assert honest.reasons == [None]
    guess_patch, truncate_patch = tmp_path / "guess_patch.py", tmp_path / "truncate_patch.py"
    guess_patch.write_text(GUESS_PATCH)
    truncate_patch.write_text(TRUNCATE_PATCH)
    answers, cut = [], []
    try:
        for patch, out in ((guess_patch, answers), (truncate_patch, cut)):
            for guess in (handle, handle + 1):  # the table cut just before the row, or just after
                _restart(tmp_path, configs, str(patch), str(guess))
                scorer = FederatedScorer(load_config(configs["active"]), "credit")
                try:
                    out.append(scorer.score(ids, features))
                finally:
                    scorer.close()
    finally:
        _restart(tmp_path, configs)  # the model stays strict: the module's later tests bring their own
    for answer in answers:
        assert answer.reasons == [None]
        np.testing.assert_array_equal(answer.values, honest.values)
    # a table cut short is refused whether or not it still holds the scored row (the refusal
    # used to come from the handle past its end: red team)
    assert cut[0].reasons == cut[1].reasons and "not the id set" in cut[0].reasons[0]


def test_a_model_in_which_the_passive_party_won_no_split_is_scored(tmp_path):
    """One stump on an active column: the passive enclave names no record (red team: refused)."""
    configs = write_federation(tmp_path, n_passive=1, training={"n_trees": 1, "max_depth": 1}, rows=3000)
    process, address = start_passive(configs["passive-1"], tmp_path / "p.address", tmp_path / "p.log")
    try:
        set_peer_addresses(configs["active"], {1: ("passive-1", address)})
        _train(configs, "ntee")
        config = load_config(configs["active"])
        assert not any(p == 1 for tree in load_active(config.model_dir / "active.json").ensemble.trees
                       for p in tree.party)
        ids, features = _scorer_rows(tmp_path, config, 5, skip=2400)
        scored = _scored_once(config, ids, features)
        assert sum(r is None for r in scored.reasons) >= 3 and np.isfinite(scored.values[[
            i for i, r in enumerate(scored.reasons) if r is None]]).all()
    finally:
        stop_passive_parties(configs["active"], [process])


SLOW_ATTESTATION_PATCH = '''
import sys, time
from teeboost.deploy import online_strict
from teeboost.protocols.ntee.hosts import EnclaveHello

SECONDS = float(sys.argv.pop(1))
honest = online_strict.StrictOnlinePassive.handle


def slow(self, msg):
    """A passive party whose enclave takes SECONDS to answer an attestation (a loaded machine)."""
    if isinstance(msg, EnclaveHello):
        time.sleep(SECONDS)
    return honest(self, msg)


online_strict.StrictOnlinePassive.handle = slow
from teeboost.cli import main
sys.exit(main(sys.argv[1:]))
'''


@pytest.mark.serial
def test_a_session_attested_again_after_a_restart_never_holds_a_request_past_the_timeout(federation):
    """The passive party restarts and its enclave then takes 3 s to attest, against a 1 s
    request timeout. The first session is waited for (as a connection is); after the restart
    the new one is attested in the background: every request meanwhile fails fast, naming the
    party (the service falls back), and is never held for the attestation; once attested,
    requests are scored with the same answers, in one new session (not one per request)."""
    import dataclasses


    tmp_path, configs = federation
    patch = tmp_path / "slow_attestation_patch.py"
    patch.write_text(SLOW_ATTESTATION_PATCH)
    _restart(tmp_path, configs, str(patch), "3.0")
    config = load_config(configs["active"])
    config.serving = dataclasses.replace(config.serving, timeout=1.0)
    ids, features = _scorer_rows(tmp_path, config, 5, skip=2300)
    scorer = FederatedScorer(config, "credit")
    try:
        first = scorer.score(ids, features)  # the first session: waited for
        assert sum(r is None for r in first.reasons) >= 3 and scorer._strict.sessions == 1
        _restart(tmp_path, configs, str(patch), "3.0")
        # at a new port here: the scorer's sessions read its config when they reconnect
        scorer.config = dataclasses.replace(load_config(configs["active"]), serving=config.serving)
        failed, began = [], time.monotonic()
        while time.monotonic() - began < 30:
            asked = time.monotonic()
            try:
                again = scorer.score(ids, features)
                break
            except PeerUnavailable as exc:
                failed.append((time.monotonic() - asked, str(exc)))
                time.sleep(0.2)
        else:
            raise AssertionError(f"not scored again within 30 s: {failed}")
        assert any("being attested" in reason for _, reason in failed), failed
        assert all(took <= 1.0 + 0.5 and "passive-1" in reason for took, reason in failed), failed
        assert again.reasons == first.reasons
        np.testing.assert_array_equal(again.values, first.values)
        assert scorer._strict.sessions == 2
    finally:
        scorer.close()
        _restart(tmp_path, configs)


def test_a_refusal_for_the_budget_is_sealed_and_the_session_goes_on(federation):
    """N-TEE: the passive host's row ledger refuses a row scored past its budget; the refusal
    goes through its enclave, sealed in the answer's place, so the active party is told why and
    keeps its session: the next rows are scored in it. (A refusal only the host said dropped the
    session; a host could otherwise keep a sealed answer back and hand it in for the next request.)"""
    tmp_path, configs = federation
    _train(configs, "ntee")  # the module's tests may run in any order (one trains strict)
    passive = configs["passive-1"]
    original = passive.read_text()
    config = load_config(configs["active"])
    per_score = min(64, _most_passive_nodes_on_a_path(load_active(config.model_dir / "active.json").ensemble))
    passive.write_text(re.sub(r"max_bits_per_row_per_day = \d+", f"max_bits_per_row_per_day = {per_score}", original))
    ids, features = _scorer_rows(tmp_path, config, 30, skip=2000)
    held = set(pd.read_csv(tmp_path / "passive-1.csv", dtype={"id": str})["id"])
    features = features[[i in held for i in ids]]
    ids = _new_customers(tmp_path, ids)  # never scored before (a run's held-out rows are scored too)
    assert len(ids) == features.shape[0] >= 4
    _restart(tmp_path, configs)  # with the new budget, and the new customers in its id set
    try:
        config = load_config(configs["active"])
        scorer = FederatedScorer(config, "credit")
        try:
            half = len(ids) // 2
            first = scorer.score(ids[:half], features[:half])
            assert first.reasons == [None] * half, first.reasons
            again = scorer.score(ids[:half], features[:half])  # each row's day is spent
            assert all("max_bits_per_row_per_day" in r for r in again.reasons) and np.isnan(again.values).all()
            later = scorer.score(ids[half:], features[half:])
            assert later.reasons == [None] * (len(ids) - half), later.reasons
            assert scorer._strict.sessions == 1  # the session was kept
        finally:
            scorer.close()
        log = (tmp_path / f"passive-1.{len(federation_processes(tmp_path)) - 1}.log").read_text()
        assert "refused OnlineSealed" in log and "max_bits_per_row_per_day" in log  # its operator is told
    finally:
        passive.write_text(original)
        _restart(tmp_path, configs)


LAG_PATCH = '''
import sys
from teeboost.deploy import online_strict
from teeboost.policy import PolicyRefused

honest = online_strict.StrictOnlinePassive._score
held = []


def lagging(self, session, msg):
    """Says the first request is refused while keeping its sealed answer; then answers every
    request with the answer it kept for the one before (relabelled with this request's session)."""
    reply = honest(self, session, msg)
    if not msg.record:
        return reply
    if not held:
        held.append(reply)
        raise PolicyRefused(self.config.name, "max_bits_per_row_per_day", "said by the host alone")
    kept = held.pop()
    held.append(reply)
    return type(reply)(msg.run_id, kept.model_digest, kept.version, kept.record)


online_strict.StrictOnlinePassive._score = lagging
from teeboost.cli import main
sys.exit(main(sys.argv[1:]))
'''


def test_a_passive_host_that_says_refused_and_hands_the_answer_in_later_never_scores_a_row_wrong(federation):
    """The passive host says "refused" for a request while keeping the sealed answer its enclave
    made, then hands in each kept answer for the next request. A refusal only its host said
    drops the session, so no kept answer is ever taken for another row's: every later request
    is refused or unavailable, never scored wrong (red team, 2026-12-07: with the session kept
    after such a refusal, each row got the row before's score)."""
    tmp_path, configs = federation
    config = load_config(configs["active"])
    ids, features = _scorer_rows(tmp_path, config, 40, skip=2100)
    honest = _scored_once(config, ids, features)
    scored = [i for i, r in enumerate(honest.reasons) if r is None]
    distinct = [i for a, i in zip(scored, scored[1:]) if honest.values[i, 0] != honest.values[a, 0]]
    assert len(distinct) >= 4, honest.reasons
    patch = tmp_path / "lag_patch.py"
    patch.write_text(LAG_PATCH)
    _restart(tmp_path, configs, str(patch))
    outcomes = []
    try:
        scorer = FederatedScorer(load_config(configs["active"]), "credit")
        try:
            for i in distinct * 3:
                try:
                    answer = scorer.score([ids[i]], features[i:i + 1])
                except PeerUnavailable as exc:  # a new session being attested
                    outcomes.append(("unavailable", str(exc)))
                    continue
                if answer.reasons == [None]:
                    assert answer.values[0, 0] == honest.values[i, 0], (ids[i], answer.values, honest.values[i])
                    outcomes.append(("scored", ""))
                else:
                    outcomes.append(("refused", answer.reasons[0]))
        finally:
            scorer.close()
    finally:
        _restart(tmp_path, configs)
    assert "said by the host alone" in outcomes[0][1], outcomes
    assert all(kind != "scored" for kind, _ in outcomes), outcomes  # every kept answer was turned away


STALE_WORDS_PATCH = '''
import sys
from teeboost.deploy import online_strict
from teeboost.policy import PolicyRefused

honest = online_strict.StrictOnlinePassive._charge_in_the_clear


def charge(self, snap, msg, used_rows, check_only=False):
    """Every N-TEE request refused by "the row ledger" in words of the host's choosing, which
    its enclave seals as they are."""
    if check_only:
        raise PolicyRefused(self.config.name, "max_bits_per_row_per_day",
                            "stale ids: party 'passive-1' now serves another id set")
    return honest(self, snap, msg, used_rows, check_only)


online_strict.StrictOnlinePassive._charge_in_the_clear = charge
from teeboost.cli import main
sys.exit(main(sys.argv[1:]))
'''


def test_a_sealed_refusal_in_the_words_of_a_stale_id_set_is_only_a_refusal(federation):
    """N-TEE: a sealed refusal's words are its host's. A host that words every refusal as a
    stale id set gets refusals, nothing more: the session is kept and the id set is not fetched
    again (red team, 2026-12-07: the scorer read the words, and dropped its session and fetched
    the id set at every request)."""
    tmp_path, configs = federation
    _train(configs, "ntee")
    patch = tmp_path / "stale_words_patch.py"
    patch.write_text(STALE_WORDS_PATCH)
    _restart(tmp_path, configs, str(patch))
    try:
        config = load_config(configs["active"])
        ids, features = _scorer_rows(tmp_path, config, 3, skip=2200)
        scorer = FederatedScorer(config, "credit")
        try:
            reasons = [scorer.score(ids[:1], features[:1]).reasons[0] for _ in range(4)]
            assert all(r is not None and "stale ids" in r for r in reasons), reasons
            assert scorer._strict.sessions == 1 and scorer.counts["id_set_fetches"] == 1
        finally:
            scorer.close()
    finally:
        _restart(tmp_path, configs)


def test_a_strict_passive_host_cannot_tell_a_request_refused_for_its_budget(federation):
    """Strict: a customer scored again with other inputs past its day's budget is refused (the
    active party is told why), and the passive host sees that request as it sees any other: the
    sealed answer and the ledger record of the same size, the same summary; a micro-batch holding
    it and a new customer is one request, the new customer scored, as one of two new customers;
    and later, in the base record its enclave seals at each table load (a new session), each
    row asked, refused, repeated or new, is one entry more. (A red team read the refusal in the summary, and in an
    answer and a ledger record that were missing: that the scored customer had spent its day;
    moving the clock it tells its enclave a day on per request, it then told whether two
    requests scored the same customer. A second read it after a reload, in a base record that
    held charged entries only: +0 bytes for a refusal or a repeat, +41 for a new row; and in a
    refused micro-batch scored again request by request.)"""
    tmp_path, configs = federation
    _train(configs, "strict")
    passive = configs["passive-1"]
    original = passive.read_text()
    passive.write_text(re.sub(r"max_bits_per_row_per_day = \d+", "max_bits_per_row_per_day = 8", original))
    config = load_config(configs["active"])
    ids, features = _scorer_rows(tmp_path, config, 30, skip=1800)
    held = set(pd.read_csv(tmp_path / "passive-1.csv", dtype={"id": str})["id"])
    features = features[[i in held for i in ids]]
    ids = _new_customers(tmp_path, ids)
    assert len(ids) >= 8
    log = tmp_path / "watched.jsonl"
    patch = tmp_path / "watch_patch.py"
    patch.write_text(host_view.WATCH_PATCH)
    _restart(tmp_path, configs, str(patch), str(log))
    try:
        scorer = FederatedScorer(load_config(configs["active"]), "credit")
        try:
            first = scorer.score(ids[:1], features[:1])
            other = features[:1].copy()
            other[0, 0] += 1.0  # the customer's application changed: a new answer, 8 more bits
            refused = scorer.score(ids[:1], other)
            later = scorer.score(ids[1:2], features[1:2])
            assert first.reasons == [None] and later.reasons == [None]
            assert "max_bits_per_row_per_day" in refused.reasons[0] and np.isnan(refused.values).all()
            # micro-batches of two requests, as the batcher forms them under load: the refused
            # customer with a new one, then two new ones
            mixed = _micro_batch(scorer, [(ids[:1], other), (ids[3:4], features[3:4])])
            fresh = _micro_batch(scorer, [(ids[4:5], features[4:5]), (ids[5:6], features[5:6])])
            assert "max_bits_per_row_per_day" in mixed[0].reasons[0] and np.isnan(mixed[0].values).all()
            assert mixed[1].reasons == [None] and fresh[0].reasons == fresh[1].reasons == [None]
            alone = scorer.score(ids[3:4], features[3:4])  # the same answer again (free), scored alone
            assert np.array_equal(alone.values, mixed[1].values)
            # one customer twice: in one request with two applications (16 bits: refused whole),
            # and in a micro-batch of two requests (the first scored, the second refused); each
            # one passive request of 2 rows (a red team's batch of 64 copies spent 512 bits
            # against 16, and the copies went out as requests of their own, which the host saw)
            twice = scorer.score([ids[6], ids[6]], np.vstack([features[6], features[6] + 1.0]))
            assert all("max_bits_per_row_per_day" in r for r in twice.reasons) and np.isnan(twice.values).all()
            split = _micro_batch(scorer, [(ids[7:8], features[7:8]), (ids[7:8], features[7:8] + 1.0)])
            assert split[0].reasons == [None] and "max_bits_per_row_per_day" in split[1].reasons[0]
            assert scorer._strict.sessions == 1
        finally:
            scorer.close()
        # each in a session of its own, so the enclave reloads its table and seals a base record
        # before it: refused again, a repeat (free), a new customer, the new one repeated
        again = _scored_once(load_config(configs["active"]), ids[:1], other)
        repeat = _scored_once(load_config(configs["active"]), ids[:1], features[:1])
        new = _scored_once(load_config(configs["active"]), ids[2:3], features[2:3])
        _scored_once(load_config(configs["active"]), ids[2:3], features[2:3])
        _scored_once(load_config(configs["active"]), ids[2:3], features[2:3])
        assert "max_bits_per_row_per_day" in again.reasons[0]
        assert repeat.reasons == [None] and new.reasons == [None]
    finally:
        passive.write_text(original)
        _restart(tmp_path, configs)
        _train(configs, "ntee")  # the module's model
    views = [json.loads(line) for line in log.read_text().splitlines()]
    # the base record at each load is the size of one holding an entry per row asked before it
    # (refused, repeated or new alike), whatever the entries say, at its version (which its host knows)
    # (other tests of the module may have scored rows before: ``before`` entries, the same for all)
    asked, loads = 0, []
    for view in views:
        asked += view["summary"]["rows"] if "summary" in view else 0
        if "base_record" in view:
            loads.append((asked, view["base_record"], view["version"]))
    assert [a for a, _, _ in loads if a >= 12] == [12, 13, 14, 15, 16], loads

    def overheads(before):  # the seal's overhead alone, if the sizes hold an entry per row asked
        return {size - host_view.base_record_bytes(before + a, version) for a, size, version in loads}
    assert any(len(overheads(before)) == 1 for before in range(2000)), loads
    seen = [view for view in views if "summary" in view]
    assert len(seen) == 13, views  # one request per micro-batch: none scored again alone
    for view in seen:
        view["summary"].pop("version")  # one more per request, refused or not
    assert seen[1] == seen[2], seen  # the refused request and the next one look the same to the host
    assert seen[1]["summary"] == {"rows": 1, "refused": "", "detail": ""}
    assert seen[3] == seen[4] and seen[3]["summary"]["rows"] == 2, seen  # so do the two micro-batches
    assert seen[6] == seen[7] == seen[3], seen  # and a customer named twice


def _micro_batch(scorer, requests):
    """Requests scored as one micro-batch, as the scorer's batcher groups them under load."""
    found = scorer._serve_lookups(requests)
    return scorer._serve([(i, x, f) for (i, x), f in zip(requests, found)])
