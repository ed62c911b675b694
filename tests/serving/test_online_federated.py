"""Online scoring against a real passive party process (gRPC, mutual TLS): the federated
scorer gives exactly batch prediction's answers, says which rows it could not score, and
never runs PSI over the passive party's whole id list per request."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
import pandas as pd
import pytest

from teeboost.data import PartyData
from teeboost.deploy.config import load_config
from teeboost.deploy.demo import set_peer_addresses, start_passive, write_federation
from teeboost.model_files import load_active
from teeboost.policy import SealedRefusal
from teeboost.serving.federated import FederatedScorer
from teeboost.serving.scorer import PeerUnavailable

from ..helpers import stop_passive_parties

TRAINING = {"n_trees": 5, "max_depth": 3}
federation_processes: list = []  # passive processes a test restarted, stopped with the federation


def cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "teeboost.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("online")
    configs = write_federation(tmp_path, n_passive=1, training=TRAINING)
    process, address = start_passive(configs["passive-1"], tmp_path / "passive-1.address", tmp_path / "passive-1.log")
    set_peer_addresses(configs["active"], {1: ("passive-1", address)})
    yield tmp_path, configs, process
    stop_passive_parties(configs["active"], [p for p in [process, *federation_processes] if p.poll() is None])


def _owner(configs) -> str:
    """The label owner's name in the passive party's strict ledger files (its key's digest)."""
    import hashlib

    return hashlib.sha256(load_config(configs["passive-1"]).identities[0]).hexdigest()[:16]


def _rows(tmp_path, n=300):
    frame = pd.read_csv(tmp_path / "active.csv", dtype={"id": str}).head(n).drop(columns=["SeriousDlqin2yrs"])
    return frame


def _batch_predictions(tmp_path, config, frame):
    new = tmp_path / "new.csv"
    frame.to_csv(new, index=False)
    out = tmp_path / "batch.csv"
    done = cli("predict", "--config", str(config), "--data", str(new), "--output", str(out), "--json")
    assert done.returncode == 0, done.stderr
    return pd.read_csv(out, dtype={"id": str})


@pytest.mark.parametrize("protocol", ["ntee", "strict"])
def test_online_scores_equal_batch_prediction_and_unheld_ids_are_named(federation, protocol):
    tmp_path, configs, _ = federation
    trained = cli("party", "--config", str(configs["active"]), "--protocol", protocol, "--json")
    assert trained.returncode == 0, trained.stderr
    frame = _rows(tmp_path)
    frame.loc[frame.index[:3], "id"] = ["nobody-1", "nobody-2", "nobody-3"]  # ids the passive party does not hold
    batch = _batch_predictions(tmp_path, configs["active"], frame)
    config = load_config(configs["active"])
    scorer = FederatedScorer(config, "credit")
    try:
        model = load_active(config.model_dir / "active.json")
        data = PartyData.from_frame(frame[["id", *model.feature_names]], id_column="id", name="active",
                                    source="test").conform(model.feature_names, model.vocabularies, "model")
        ids = list(frame["id"])
        # twenty concurrent callers, one row each, then the rest in one request
        with ThreadPoolExecutor(20) as pool:
            singles = list(pool.map(lambda i: scorer.score([ids[i]], data.features[i:i + 1]), range(40)))
        rest = scorer.score(ids[40:], data.features[40:])
    finally:
        scorer.close()
    values = np.concatenate([s.values for s in singles] + [rest.values])[:, 0]
    reasons = [r for s in singles for r in s.reasons] + rest.reasons
    expected = batch.filter(like="probability_").to_numpy()[:, 0]
    assert [r is not None for r in reasons] == list(np.isnan(expected))
    assert all("does not hold this id" in r for r in reasons[:3])
    np.testing.assert_allclose(values[3:], expected[3:], rtol=0, atol=1e-12)
    assert scorer.counts["id_set_fetches"] == 1


def _scorer_rows(tmp_path, config, n=50, skip=0):
    frame = _rows(tmp_path, n + skip).iloc[skip:]
    model = load_active(config.model_dir / "active.json")
    data = PartyData.from_frame(frame[["id", *model.feature_names]], id_column="id", name="active",
                                source="test").conform(model.feature_names, model.vocabularies, "model")
    return list(frame["id"]), data.features


@pytest.mark.serial
def test_a_passive_data_change_is_seen_and_a_restart_is_survived(federation):
    """The passive party's data changes under a running scorer (a row's values and a new
    customer): the next request uses the new id set, never an old handle on new rows. Then the
    passive process is killed: requests fail fast, naming it; restarted, scoring resumes by
    itself with the same answers."""
    tmp_path, configs, process = federation
    trained = cli("party", "--config", str(configs["active"]), "--protocol", "ntee", "--json")
    assert trained.returncode == 0, trained.stderr
    config = load_config(configs["active"])
    ids, features = _scorer_rows(tmp_path, config)
    scorer = FederatedScorer(config, "credit")
    try:
        first = scorer.score(ids, features)
        version = scorer.caches[1].version
        passive = tmp_path / "passive-1.csv"
        original = passive.read_text()
        frame = pd.read_csv(passive, dtype={"id": str})
        shuffled = frame.sample(frac=1.0, random_state=7)  # every row moves: old handles would point elsewhere
        tmp = tmp_path / "passive-1.tmp"
        shuffled.to_csv(tmp, index=False)
        tmp.replace(passive)
        during = scorer.score(ids, features)  # while the new set is built, the previous one answers
        np.testing.assert_array_equal(first.values, during.values)
        deadline = time.monotonic() + 30
        while scorer.caches[1].version == version and time.monotonic() < deadline:
            scorer.health()
            time.sleep(0.2)
        second = scorer.score(ids, features)
        assert scorer.caches[1].version != version  # fetched again
        np.testing.assert_array_equal(first.values, second.values)
        tmp.write_text(original)
        tmp.replace(passive)

        process.kill()
        process.wait()
        started = time.monotonic()
        with pytest.raises(PeerUnavailable, match="passive-1"):
            scorer.score(ids[:1], features[:1])
        assert time.monotonic() - started < 5.0
        new, address = start_passive(configs["passive-1"], tmp_path / "passive-1.address2", tmp_path / "passive-1.log2")
        federation_processes.append(new)
        set_peer_addresses(configs["active"], {1: ("passive-1", address)})
        scorer.config = load_config(configs["active"])  # the passive party's new port (a real one keeps its address)
        third = scorer.score(ids, features)
        np.testing.assert_array_equal(first.values, third.values)
    finally:
        scorer.close()


@pytest.mark.serial  # a refusal drops the session: the next score waits for a new one within one timeout
def test_strict_online_and_batch_scoring_share_one_budget_per_row(federation):
    """A passive party's daily bits per row are one budget whichever way a row is scored: with
    8-bit outputs and 16 bits a day, a row scored online with two different active inputs has
    spent its day; a third online score and a batch score of it are refused, while another row
    is still scored. The budget survives a new online session (the log is replayed)."""
    tmp_path, configs, _ = federation
    passive = configs["passive-1"]
    text = passive.read_text()
    passive.write_text(text.replace("max_bits_per_row_per_day = 256", "max_bits_per_row_per_day = 16"))
    try:
        trained = cli("party", "--config", str(configs["active"]), "--protocol", "strict", "--json")
        assert trained.returncode == 0, trained.stderr
        config = load_config(configs["active"])
        ids, features = _scorer_rows(tmp_path, config, 3, skip=500)
        ids = _new_customers(tmp_path, ids)  # never scored before (a run's held-out rows are scored too)
        # the passive party re-reads its policy only at start: restart it with the 16-bit budget
        # (and with the new customers: it builds its id set as it starts)
        _restart_passive(federation)
        config = load_config(configs["active"])
        scorer = FederatedScorer(config, "credit")
        try:
            assert scorer.score(ids[:1], features[:1]).reasons == [None]
            changed = features[:1].copy()
            changed[0, 0] += 1.0  # other active inputs: a new answer about the passive row
            assert scorer.score(ids[:1], changed).reasons == [None]
            assert scorer.score(ids[:1], features[:1]).reasons == [None]  # the same answer again: free
            changed[0, 0] += 1.0
            assert "max_bits_per_row_per_day" in scorer.score(ids[:1], changed).reasons[0]  # refused, by name
            assert scorer.score(ids[1:2], features[1:2]).reasons == [None]
            # the refusal was sealed by the passive enclave in its answer's place: the session
            # stayed in step and was kept (one only its host said dropped it, and the next
            # request fell back while a new one was attested)
            assert scorer._strict.sessions == 1
        finally:
            scorer.close()
        scorer = FederatedScorer(config, "credit")  # a new session replays the ledger's log
        try:
            assert "max_bits_per_row_per_day" in scorer.score(ids[:1], changed + 1.0).reasons[0]
        finally:
            scorer.close()
        frame = _rows(tmp_path, 501).iloc[500:].copy()
        frame["id"] = ids[:1]
        frame.iloc[0, 1] = float(frame.iloc[0, 1]) + 5.0  # batch prediction of the spent row, other inputs
        new = tmp_path / "spent.csv"
        frame.to_csv(new, index=False)
        done = cli("predict", "--config", str(configs["active"]), "--data", str(new), "--output",
                   str(tmp_path / "spent-out.csv"))
        assert done.returncode != 0 and "max_bits_per_row_per_day" in done.stderr
        # a fresh customer scored in a batch, then online with exactly the same inputs: the same
        # answer again, free; with other inputs it is charged (8 more bits: the day's 16)
        fresh = _rows(tmp_path, 503).iloc[502:].copy()
        fresh["id"] = ids[2:3]
        fresh.to_csv(tmp_path / "fresh.csv", index=False)
        done = cli("predict", "--config", str(configs["active"]), "--data", str(tmp_path / "fresh.csv"), "--output",
                   str(tmp_path / "fresh-out.csv"))
        assert done.returncode == 0, done.stderr
        model = load_active(config.model_dir / "active.json")
        same = PartyData.from_frame(fresh[["id", *model.feature_names]], id_column="id", name="active",
                                    source="test").conform(model.feature_names, model.vocabularies, "model").features
        scorer = FederatedScorer(config, "credit")
        try:
            assert scorer.score(ids[2:3], same).reasons == [None]
            assert scorer.score(ids[2:3], same + 1.0).reasons == [None]
            refused = scorer.score(ids[2:3], same + 2.0)
            assert "max_bits_per_row_per_day" in refused.reasons[0] and np.isnan(refused.values).all()
        finally:
            scorer.close()
        # the passive host's audit log says how many rows each strict online request scored, and
        # nothing of what its enclave charged (which told it whether a customer was new today)
        lines = [json.loads(line) for line in (tmp_path / "audit-passive-1.jsonl").read_text().splitlines()]
        strict_online = [e for e in lines if e.get("dataset") == "online" and e.get("protocol") == "strict"]
        assert strict_online and all(not {"charged_rows", "bits", "largest_in_batch"} & set(e) for e in strict_online)
    finally:
        passive.write_text(text)
        _restart_passive(federation)


def test_a_strict_passive_host_cannot_tell_from_a_batch_which_rows_were_scored_online(federation, monkeypatch):
    """Strict, 16 bits a day, 8 a score. Customer X scored online, Y not, then each scored in a
    batch with the same inputs (X's is the same answer again: free); then Z scored online twice
    (its day spent) and in a batch with other inputs: refused, the active party told why. The
    passive host sees the three batch sessions alike: the same audit line, the same growth of
    the sealed batch ledger, the same messages from the active party. (Red teams read X's online
    score from the session's summary, whose charged rows, bits and largest spending counted
    online scoring, and from a ledger that grew only by the rows charged; and Z's from a refusal
    its host saw, then from the Abandon the active party sent after it.)"""
    from teeboost.deploy.active import run_prediction
    from teeboost.transport.base import Channel

    sent: list = []
    honest_all, honest_one = Channel.request_all, Channel.request
    monkeypatch.setattr(Channel, "request_all", lambda self, messages: (
        sent.append(sorted(type(m).__name__ for m in messages.values())), honest_all(self, messages))[1])
    monkeypatch.setattr(Channel, "request", lambda self, party, msg: (
        sent.append([type(msg).__name__]), honest_one(self, party, msg))[1])
    tmp_path, configs, _ = federation
    with _strict_at(federation, 16) as config:
        ids, _ = _scorer_rows(tmp_path, config, 3, skip=700)
        ids = _new_customers(tmp_path, ids)
        assert len(ids) == 3
        _restart_passive(federation)
        config = load_config(configs["active"])
        model = load_active(config.model_dir / "active.json")
        frames = []
        for i, customer in enumerate(ids):
            frame = _rows(tmp_path, 702 + i).iloc[701 + i:].copy()
            frame["id"] = [customer]
            frames.append(frame)
        inputs = [PartyData.from_frame(f[["id", *model.feature_names]], id_column="id", name="active", source="test")
                  .conform(model.feature_names, model.vocabularies, "model").features for f in frames]
        scorer = FederatedScorer(config, "credit")
        try:
            assert scorer.score(ids[:1], inputs[0]).reasons == [None]  # X online
            assert scorer.score(ids[2:3], inputs[2] + 1.0).reasons == [None]  # Z online, twice
            assert scorer.score(ids[2:3], inputs[2] + 2.0).reasons == [None]
        finally:
            scorer.close()
        sealed = tmp_path / f"audit-passive-1.{_owner(configs)}.strict-ledger.sealed"
        views = []
        for i, frame in enumerate(frames):  # X, Y, Z, each in a batch of its own
            before = sealed.stat().st_size if sealed.exists() else 0
            frame.to_csv(tmp_path / f"batch-{i}.csv", index=False)
            sent.clear()
            try:
                run_prediction(load_config(configs["active"]), tmp_path / f"batch-{i}.csv",
                               tmp_path / f"batch-{i}-out.csv")
                assert i < 2
            except SealedRefusal as exc:  # Z's day is spent: the active party is told by the rule's name
                assert i == 2 and exc.rule == "max_bits_per_row_per_day"
            messages = list(sent)
            lines = [json.loads(line) for line in (tmp_path / "audit-passive-1.jsonl").read_text().splitlines()]
            charged = [e for e in lines if e["event"] == "charged"][-1]
            shown = {k: v for k, v in charged.items() if k not in ("epoch", "time", "dataset", "window_rows")}
            views.append((shown, sealed.stat().st_size - before, messages))
        assert views[0] == views[1] == views[2], views
        assert views[0][0]["rows"] == 1 and views[0][1] > 0
        refused = [e for e in lines if e["event"] == "refused" and e.get("rule") == "max_bits_per_row_per_day"]
        assert not refused, refused


def test_a_customer_whose_passive_values_changed_is_charged_again(federation):
    """Strict, 8 bits a day: a customer scored online, then the same question again after the
    passive party changed the customer's values (a daily data update): a new answer, refused,
    where the same answer again was free and gave the active host the new values (red team:
    the tag named the model and the active inputs only)."""
    tmp_path, configs, _ = federation
    with _strict_at(federation, 8) as config:
        ids, features = _scorer_rows(tmp_path, config, 2, skip=900)
        ids = _new_customers(tmp_path, ids)
        _set_passive_values(tmp_path, ids, -1e9)  # every numeric passive split: left
        _restart_passive(federation)
        scorer = FederatedScorer(load_config(configs["active"]), "credit")
        try:
            assert scorer.score(ids[:1], features[:1]).reasons == [None]
            assert scorer.score(ids[:1], features[:1]).reasons == [None]  # the same answer again: free
            _set_passive_values(tmp_path, ids, 1e9)  # and now right: another answer
            changed = _eventually(lambda: scorer.score(ids[:1], features[:1]),
                                  lambda out: out.reasons[0] is not None)
            assert "max_bits_per_row_per_day" in changed.reasons[0] and np.isnan(changed.values).all()
            assert scorer.score(ids[1:2], features[1:2]).reasons == [None]  # another customer: scored
        finally:
            scorer.close()


@contextmanager
def _strict_at(federation, bits: int):
    """A strict model trained, with the passive party's budget at ``bits`` a day (it reads its
    policy at start: the test restarts it, once it has added its customers); put back after."""
    tmp_path, configs, _ = federation
    passive = configs["passive-1"]
    text = passive.read_text()
    passive.write_text(text.replace("max_bits_per_row_per_day = 256", f"max_bits_per_row_per_day = {bits}"))
    try:
        trained = cli("party", "--config", str(configs["active"]), "--protocol", "strict", "--json")
        assert trained.returncode == 0, trained.stderr
        yield load_config(configs["active"])
    finally:
        passive.write_text(text)
        _restart_passive(federation)


def _set_passive_values(tmp_path, ids, value):
    """The passive party's numeric columns of these customers set to ``value`` (its file
    replaced atomically; the party re-reads it)."""
    path = tmp_path / "passive-1.csv"
    frame = pd.read_csv(path, dtype={"id": str})
    numeric = [c for c in frame.columns if c != "id" and pd.api.types.is_numeric_dtype(frame[c])]
    frame.loc[frame["id"].isin(ids), numeric] = value
    tmp = tmp_path / "passive-1.tmp"
    frame.to_csv(tmp, index=False)
    tmp.replace(path)


def _eventually(call, done, seconds=30.0):
    """``call()`` until ``done(its answer)`` (the passive party re-reads its file within a few
    seconds) -> the last answer."""
    deadline = time.monotonic() + seconds
    while True:
        out = call()
        if done(out) or time.monotonic() > deadline:
            return out
        time.sleep(0.5)


def _new_customers(tmp_path, ids):
    """The passive party gains customers with these rows' values under new ids (its file is
    replaced atomically and re-read): -> the new ids."""
    path = tmp_path / "passive-1.csv"
    frame = pd.read_csv(path, dtype={"id": str})
    rows = frame[frame["id"].isin(ids)].set_index("id").loc[[i for i in ids if i in set(frame["id"])]].reset_index()
    fresh = [f"fresh-{i}-{time.time_ns()}" for i in rows["id"]]
    rows["id"] = fresh
    tmp = tmp_path / "passive-1.tmp"
    pd.concat([frame, rows]).to_csv(tmp, index=False)
    tmp.replace(path)
    return fresh


def _restart_passive(federation):
    tmp_path, configs, process = federation
    for p in [process, *federation_processes]:
        if p.poll() is None:
            p.terminate()
            p.wait(timeout=30)
    n = len(federation_processes)  # a name no earlier start used: its ready file would name a dead port
    ready = tmp_path / f"passive-1.restart{n}.address"
    new, address = start_passive(configs["passive-1"], ready, tmp_path / f"passive-1.restart{n}.log")
    federation_processes.append(new)
    set_peer_addresses(configs["active"], {1: ("passive-1", address)})


def test_a_strict_session_takes_the_passive_partys_changed_table_without_failing_a_request(federation):
    """Strict: the passive party's data grows (150,000 more customers) under a running scorer
    whose requests time out after 0.15 s. Its enclave's new table takes longer than that to
    load; the scorer has it loaded over its set-up channel before the next request, so that
    request is answered (the same scores), in the same attested session. (Loaded within the
    request, it timed out, and the session was dropped and attested again: a serving run at 1e6
    ids once waited 1.3 s for that.)"""
    import dataclasses

    tmp_path, configs, _ = federation
    trained = cli("party", "--config", str(configs["active"]), "--protocol", "strict", "--json")
    assert trained.returncode == 0, trained.stderr
    config = load_config(configs["active"])
    config.serving = dataclasses.replace(config.serving, timeout=0.15)
    ids, features = _scorer_rows(tmp_path, config)
    passive = tmp_path / "passive-1.csv"
    original = passive.read_text()
    scorer = FederatedScorer(config, "credit")
    try:
        first = scorer.score(ids, features)
        held = [r is None for r in first.reasons]
        assert sum(held) > 40 and scorer._strict.sessions == 1
        version = scorer.caches[1].version
        frame = pd.read_csv(passive, dtype={"id": str})
        more = frame.sample(n=150_000, replace=True, random_state=3)
        more["id"] = [f"made-up-{i}" for i in range(len(more))]
        tmp = tmp_path / "passive-1.tmp"
        pd.concat([frame, more]).to_csv(tmp, index=False)
        tmp.replace(passive)
        deadline = time.monotonic() + 120
        while scorer.caches[1].version == version and time.monotonic() < deadline:
            scorer.health()
            time.sleep(0.2)
        assert scorer.caches[1].version != version and scorer.caches[1].n_ids == len(frame) + 150_000
        second = scorer.score(ids, features)
        assert second.reasons == first.reasons  # every held row scored, none refused or timed out
        np.testing.assert_array_equal(first.values, second.values)
        assert scorer._strict.sessions == 1  # not attested again
    finally:
        scorer.close()
        tmp = tmp_path / "passive-1.tmp"
        tmp.write_text(original)
        tmp.replace(passive)


ROLLBACK_PATCH = '''
import sys
from teeboost import budget

first = []
honest = budget.SealedLedgerFile.load_online


def rolled_back(self):
    """The log as it was when the party first loaded it (an old copy of the file put back):
    every later table load, in a new session or within one whose data changed, gets it."""
    log, version = honest(self)
    if not first:
        first.append(log)
    return first[0], version


budget.SealedLedgerFile.load_online = rolled_back
from teeboost.cli import main
sys.exit(main(sys.argv[1:]))
'''


def test_a_passive_host_that_rolls_its_online_ledger_back_is_refused(federation):
    """Strict: a passive host patched to hand its enclave the online ledger log as it was when
    it first read it (forgetting every row scored since) is refused, both when its data changes
    within a session (the enclave holds a newer version) and when a new session starts (the
    version the host recorded is past the old log's end): no row is scored against the forgotten
    ledger, and the refusal names the rollback. (A host that also puts back the old recorded
    version is not caught: docs/online-scoring.md, what is left.)"""
    tmp_path, configs, _ = federation
    trained = cli("party", "--config", str(configs["active"]), "--protocol", "strict", "--json")
    assert trained.returncode == 0, trained.stderr
    config = load_config(configs["active"])
    ids, features = _scorer_rows(tmp_path, config, 24, skip=700)
    scorer = FederatedScorer(config, "credit")  # the stock host first: its log has records to forget
    try:
        # the last test put the passive party's file back: wait for the id set it builds anew
        held = len(pd.read_csv(tmp_path / "passive-1.csv", usecols=["id"]))
        deadline = time.monotonic() + 120
        while scorer.health()["passive-1"].get("ids") != held and time.monotonic() < deadline:
            time.sleep(0.2)
        stock = scorer.score(ids[20:], features[20:])
        assert any(r is None for r in stock.reasons), stock.reasons
    finally:
        scorer.close()
    for p in [federation[2], *federation_processes]:
        if p.poll() is None:
            p.terminate()
            p.wait(timeout=30)
    patch = tmp_path / "rollback_patch.py"
    patch.write_text(ROLLBACK_PATCH)
    ready = tmp_path / "passive-1.rollback.address"
    process = subprocess.Popen([sys.executable, str(patch), "party", "--config", str(configs["passive-1"]),
                                "--ready-file", str(ready)], stdout=(tmp_path / "rollback.log").open("w"),
                               stderr=subprocess.STDOUT)
    federation_processes.append(process)
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "rollback.log").read_text()
        time.sleep(0.1)
    set_peer_addresses(configs["active"], {1: ("passive-1", ready.read_text().strip())})
    passive = tmp_path / "passive-1.csv"
    original = passive.read_text()
    config = load_config(configs["active"])
    ids, features = ids[:20], features[:20]
    scorer = FederatedScorer(config, "credit")
    try:
        first = scorer.score(ids[:10], features[:10])  # charged: the log grows, its version is recorded
        assert any(r is None for r in first.reasons)
        time.sleep(1.2)  # past the log's group sync: the next append records its version
        assert any(r is None for r in scorer.score(ids[10:], features[10:]).reasons)
        version = scorer.caches[1].version
        _new_customers(tmp_path, ids[:2])  # the data changes: the session loads a new table
        deadline = time.monotonic() + 60
        while scorer.caches[1].version == version and time.monotonic() < deadline:
            scorer.health()
            time.sleep(0.2)
        within = scorer.score(ids, features)
        assert all(r is not None and "rolled back" in r for r in within.reasons), within.reasons
        assert np.isnan(within.values).all()
        again = scorer.score(ids, features)  # a new session is attested: its table load is refused too
        assert all(r is not None and "rolled back" in r for r in again.reasons), again.reasons
        assert np.isnan(again.values).all()
    finally:
        scorer.close()
        tmp = tmp_path / "passive-1.tmp"
        tmp.write_text(original)
        tmp.replace(passive)
        _restart_passive(federation)
