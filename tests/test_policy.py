"""A passive party's [policy], checked routing, PSI-aligned prediction and audit log.

Each test drives a real ``PassiveService`` (the object ``teeboost party`` serves over gRPC)
through the active party's real code paths over the in-memory channel, and mounts the
request an active party would send to get more than the policy allows.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from teeboost.audit_report import read_audit, summarise
from teeboost.config import BoostParams, ProtocolOptions
from teeboost.deploy.config import load_config
from teeboost.deploy.messages import Finish, PredictData, Setup, Shutdown
from teeboost.deploy.passive import PassiveService
from teeboost.errors import ConfigError, ProtocolError
from teeboost.federation import train_active
from teeboost.parties.active import FederatedOracle, ensemble_digest
from teeboost.protocols.messages import RouteRequest
from teeboost.parties.psi import PsiPassive, PsiRequest, intersect_as_active
from teeboost.policy import Policy, PolicyRefused
from teeboost.protocols.env import ProtocolEnv
from teeboost.protocols.enclave.partition import encode_row_sets
from teeboost.transport.inmemory import InMemoryChannel

from .helpers import SMALL

PARAMS = BoostParams(n_trees=2, max_depth=3, subsample=0.8, max_bin=32)


@pytest.fixture
def parties(small_credit, tmp_path):
    """The active party's data and a passive party's CSV (ids shuffled, 5% missing)."""
    active, passives = small_credit
    passive = passives[0]
    rng = np.random.default_rng(0)
    keep = np.sort(rng.permutation(passive.n_rows)[: int(passive.n_rows * 0.95)])
    frame = pd.DataFrame(passive.features[keep], columns=list(passive.feature_names))
    frame.insert(0, "id", passive.ids[keep])
    frame.sample(frac=1.0, random_state=1).to_csv(tmp_path / "passive.csv", index=False)
    return active, tmp_path


#: The rules these tests do not exercise, lifted from their safe defaults so each test sees only
#: its own rule at work (tests/test_leakage_budget.py tests the defaults themselves).
LIFTED = {"min_rows_per_node": "1", "max_trees": '"none"', "max_depth": '"none"', "max_runs_per_day": '"none"',
          "max_outputs": '"none"', "output_bits": '"none"', "max_bits_per_row_per_day": '"none"'}


def service(tmp_path, policy: str = "", name: str = "telco", *, defaults: bool = False) -> PassiveService:
    """A passive party from its config; ``policy`` "" with ``defaults``: no [policy] table."""
    config = tmp_path / "passive.toml"
    if not defaults:
        named = {line.split("=")[0].strip() for line in policy.splitlines() if "=" in line}
        policy = "\n".join([policy, *(f"{k} = {v}" for k, v in LIFTED.items() if k not in named)]).strip()
    config.write_text(f'[party]\nname = "{name}"\nrole = "passive"\nindex = 1\nlisten = "127.0.0.1:0"\n'
                      'data = "passive.csv"\nid_column = "id"\n[tls]\ninsecure = true\n'
                      + (f"[policy]\n{policy}\n" if policy else ""))
    return PassiveService(load_config(config))


def entries(tmp_path, event=None):
    found = read_audit(tmp_path / "audit-telco.jsonl")
    return [e for e in found if event is None or e["event"] == event]


def align(channel, active, purpose="train"):
    rows, _ = intersect_as_active(channel, active.ids, purpose, allow_empty=True)
    return rows


def setup(channel, aligned, params=PARAMS, protocol="plain", outputs=1, run_id="run-1", held_out=0.2):
    n = aligned.n_rows
    train, test = np.arange(int(n * (1 - held_out))), np.arange(int(n * (1 - held_out)), n)
    channel.request_all({1: Setup(run_id, protocol, json.dumps(params.to_dict()), outputs, train, test,
                                  np.empty(0, dtype=np.int64))})
    return aligned.take(train), aligned.take(test)


OPT_IN = 'protocols = ["plain", "secureboost", "ntee", "onetee", "strict"]'


def predict_data(model, dataset="predict"):
    """Hold the last "predict" alignment as ``dataset``, for the saved model ``model`` names."""
    return PredictData(dataset, ensemble_digest(model.ensemble))


def train(channel, train_rows, params=PARAMS, protocol="plain", env=None):
    return train_active(train_rows, channel, params, protocol, env=env or ProtocolEnv(), party_names={1: "telco"})


# --- the policy itself

def test_policy_fields_are_checked_when_the_config_loads(tmp_path):
    for text, match in [('protocols = ["plain", "magic"]', "unknown protocol"), ("max_trees = 0", "max_trees"),
                        ("min_rows_per_node = -3", "min_rows_per_node"), ("max_tres = 5", "unknown field"),
                        ("protocols = []", "non-empty list")]:
        with pytest.raises(ConfigError, match=match):
            Policy.from_table(_toml(text), "p.toml")
    assert Policy().protocols == ("ntee", "onetee", "strict")  # plain and SecureBoost need an opt-in


def _toml(text):
    import tomllib

    return tomllib.loads(text)


# --- refusals at set-up, named at both ends, and in the audit log

@pytest.mark.parametrize("protocol", ["plain", "secureboost"])
def test_default_policy_refuses_protocols_that_reveal_aggregates(parties, protocol):
    active, tmp_path = parties
    party = service(tmp_path)
    channel = InMemoryChannel({1: party.handle})
    aligned = active.take(align(channel, active))
    with pytest.raises(ProtocolError, match=r"party 'telco' refuses by its policy \(\[policy\] protocols\).*"
                                            f"{protocol!r} is not allowed"):
        setup(channel, aligned, protocol=protocol)
    refused = entries(tmp_path, "refused")
    assert refused[-1]["rule"] == "protocols" and refused[-1]["request"] == "Setup"
    assert party.party is None  # nothing was built, no column touched


@pytest.mark.parametrize("policy, params, outputs, rule", [
    ("max_trees = 3", BoostParams(n_trees=4, max_depth=3, subsample=0.8, max_bin=32), 1, "max_trees"),
    ("max_trees = 5\nmax_outputs = 3\nmax_bits_per_row_per_day = 24", BoostParams(n_trees=2, max_depth=3, subsample=0.8, max_bin=32), 3, "max_trees"),  # multiclass: 2 rounds of 3 trees
    ("max_depth = 2", BoostParams(max_depth=3, n_trees=5, subsample=0.8, max_bin=32), 1, "max_depth"),
    ("min_rows_per_node = 50", BoostParams(min_samples_leaf=10, **SMALL), 1, "min_rows_per_node"),
])
def test_parameters_beyond_the_policy_are_refused_at_set_up(parties, policy, params, outputs, rule):
    active, tmp_path = parties
    channel = InMemoryChannel({1: service(tmp_path, f"{OPT_IN}\n{policy}").handle})
    aligned = active.take(align(channel, active))
    with pytest.raises(ProtocolError, match=rf"\[policy\] {rule}"):
        setup(channel, aligned, params=params, outputs=outputs)
    assert entries(tmp_path, "refused")[-1]["rule"] == rule


# --- refusals while training: the active party set up one run and runs another

def test_a_partition_smaller_than_k_never_leaves(parties):
    """Set-up promises min_samples_leaf = 40; the active party then scores with 1. The first
    split of this party's that would reveal fewer than 40 rows on a side is refused."""
    active, tmp_path = parties
    channel = InMemoryChannel({1: service(tmp_path, f"{OPT_IN}\nmin_rows_per_node = 40").handle})
    aligned = active.take(align(channel, active))
    train_rows, _ = setup(channel, aligned, params=BoostParams(n_trees=3, max_depth=6, min_samples_leaf=40, subsample=0.8, max_bin=32))
    with pytest.raises(ProtocolError, match=r"\[policy\] min_rows_per_node\).*on one side"):
        train(channel, train_rows, BoostParams(n_trees=3, max_depth=6, min_samples_leaf=1, subsample=0.8, max_bin=32))
    assert entries(tmp_path, "refused")[-1]["rule"] == "min_rows_per_node"


def test_the_honest_run_with_the_same_floor_trains(parties):
    active, tmp_path = parties
    channel = InMemoryChannel({1: service(tmp_path, f"{OPT_IN}\nmin_rows_per_node = 40").handle})
    aligned = active.take(align(channel, active))
    params = BoostParams(n_trees=3, max_depth=6, min_samples_leaf=40, subsample=0.8, max_bin=32)
    train_rows, _ = setup(channel, aligned, params=params)
    model, _ = train(channel, train_rows, params)
    assert len(model.ensemble.trees) == 3


def test_more_trees_than_the_policy_allows_are_refused_mid_run(parties):
    active, tmp_path = parties
    channel = InMemoryChannel({1: service(tmp_path, f"{OPT_IN}\nmax_trees = 2").handle})
    aligned = active.take(align(channel, active))
    train_rows, _ = setup(channel, aligned, params=BoostParams(n_trees=2, max_depth=3, subsample=0.8, max_bin=32))
    with pytest.raises(ProtocolError, match=r"\[policy\] max_trees\).*tree 2"):
        train(channel, train_rows, BoostParams(n_trees=6, max_depth=3, subsample=1.0, max_bin=32))


@pytest.mark.parametrize("protocol", ["ntee", "onetee"])
def test_enclave_criteria_below_k_are_refused(parties, protocol):
    """In N-TEE the passive enclave scores and partitions by the criteria the run's hello
    binds; in 1-TEE the active enclave does. Either way the passive host checks them first."""
    from teeboost.federation import _environments

    active, tmp_path = parties
    party = service(tmp_path, "min_rows_per_node = 30")
    envs = _environments(True, ProtocolOptions(allow_simulated_tee=True), 1, None)
    party.env = lambda: envs[1]
    channel = InMemoryChannel({1: party.handle})
    aligned = active.take(align(channel, active))
    train_rows, _ = setup(channel, aligned, params=BoostParams(n_trees=1, min_samples_leaf=30, max_depth=3, subsample=0.8, max_bin=32), protocol=protocol)
    with pytest.raises(ProtocolError, match=r"\[policy\] min_rows_per_node\).*nodes of 1 row"):
        train(channel, train_rows, BoostParams(n_trees=1, min_samples_leaf=1, max_depth=3, subsample=0.8, max_bin=32), protocol, env=envs[0])
    party.close()


def test_strict_enclave_enforces_the_model_limits(parties):
    """Strict mode: the trees and levels run inside enclaves, so the passive enclave itself
    counts them against the limits its host loaded with its columns."""
    from teeboost.federation import _environments

    active, tmp_path = parties
    party = service(tmp_path, "max_depth = 2")
    envs = _environments(True, ProtocolOptions(allow_simulated_tee=True), 1, None)
    party.env = lambda: envs[1]
    channel = InMemoryChannel({1: party.handle})
    aligned = active.take(align(channel, active))
    train_rows, _ = setup(channel, aligned, params=BoostParams(n_trees=1, max_depth=2, subsample=0.8, max_bin=32), protocol="strict")
    with pytest.raises(Exception, match=r"max_depth\) allows depth 2"):
        train(channel, train_rows, BoostParams(n_trees=1, max_depth=3, subsample=0.8, max_bin=32), "strict", env=envs[0])
    party.close()


# --- budgets, counted from the audit log (a restart does not reset them)

def test_daily_budgets_hold_across_restarts(parties):
    active, tmp_path = parties
    policy = f"{OPT_IN}\nmax_runs_per_day = 1\nmax_psi_ids_per_day = {2 * active.n_rows + 10}"
    channel = InMemoryChannel({1: service(tmp_path, policy).handle})
    aligned = active.take(align(channel, active))
    setup(channel, aligned)
    with pytest.raises(ProtocolError, match=r"\[policy\] max_runs_per_day\).*1 already served"):
        setup(channel, aligned, run_id="run-2")
    restarted = InMemoryChannel({1: service(tmp_path, policy).handle})
    align(restarted, active)  # the second alignment still fits
    with pytest.raises(ProtocolError, match=r"\[policy\] max_psi_ids_per_day\)"):
        align(restarted, active)
    aligned_again = active.take(align(InMemoryChannel({1: service(tmp_path, OPT_IN).handle}), active))
    assert aligned_again.n_rows > 0  # without the budget, the same log does not block anything


def test_prediction_rows_budget(parties):
    active, tmp_path = parties
    party = service(tmp_path, f"{OPT_IN}\nmax_prediction_rows_per_day = 100")
    channel = InMemoryChannel({1: party.handle})
    aligned = active.take(align(channel, active))
    train_rows, _ = setup(channel, aligned, held_out=0)
    model, _ = train(channel, train_rows)
    channel.request_all({1: Finish("plain")})
    batch = active.take(np.arange(80))
    align(channel, batch, "predict")
    channel.request_all({1: predict_data(model)})
    align(channel, batch, "predict")
    with pytest.raises(ProtocolError, match=r"max_prediction_rows_per_day\).*7[0-9] already served"):
        channel.request_all({1: predict_data(model)})


# --- checked routing

@pytest.fixture
def trained(parties):
    """A passive service after a plain run (before Finish), and the active party's model."""
    active, tmp_path = parties
    party = service(tmp_path, OPT_IN)
    channel = InMemoryChannel({1: party.handle})
    aligned = active.take(align(channel, active))
    train_rows, test_rows = setup(channel, aligned, params=BoostParams(n_trees=3, max_depth=3, subsample=0.8, max_bin=32))
    model, _ = train(channel, train_rows, BoostParams(n_trees=3, max_depth=3, subsample=0.8, max_bin=32))
    return party, channel, model, test_rows, tmp_path


def route(channel, dataset, n_rows, asked):
    encodings, offsets, payload = encode_row_sets([rows for _, rows in asked], n_rows)
    records = np.array([record for record, _ in asked], dtype=np.int64)
    return channel.request_all({1: RouteRequest(dataset, n_rows, records, encodings, offsets, payload)})[1]


def test_routing_a_row_outside_the_run_is_refused(trained):
    party, channel, model, test_rows, _ = trained
    record = next(iter(dict(party.party.owner.items())))
    n = test_rows.n_rows
    with pytest.raises(ProtocolError, match=f"holds {n}"):  # claims a larger dataset
        route(channel, "test", n + 1, [(record, np.array([n]))])
    with pytest.raises(ProtocolError, match="no dataset 'everyone'"):
        route(channel, "everyone", n, [(record, np.array([0]))])
    with pytest.raises(ProtocolError, match="unknown split record id 999999"):  # not a record this party made
        route(channel, "test", n, [(999_999, np.array([0]))])
    assert len(entries(trained[4], "refused")) == 3


def test_routing_follows_one_path_per_tree(trained):
    """The active party may ask a row about at most max_depth of this party's splits per
    tree: enough for the row's path, not for every threshold this party holds."""
    party, channel, model, test_rows, tmp_path = trained
    held = dict(party.party.owner.items())
    by_tree: dict[int, list[int]] = {}
    for record, split in held.items():
        by_tree.setdefault(split.tree, []).append(record)
    tree, records = max(by_tree.items(), key=lambda item: len(item[1]))
    assert len(records) >= 2
    asks = (records * 4)[:4]  # every threshold of the tree, then again: a fourth split for a depth-3 path
    row = np.array([0])
    for record in asks[:3]:
        route(channel, "test", test_rows.n_rows, [(record, row)])
    with pytest.raises(ProtocolError, match=r"\[policy\] max_depth\).*than a path of depth 3 crosses"):
        route(channel, "test", test_rows.n_rows, [(asks[3], row)])
    # the honest held-out evaluation of every row (a fresh batch: counts start again) is not affected
    party.party.add_dataset("test", party.party._datasets["test"], party.party._row_keys["test"])
    margin = model.ensemble.margin(test_rows.n_rows, FederatedOracle(channel, "test", model.owner,
                                                                     test_rows.features))
    assert np.isfinite(margin).all()


# --- prediction only for rows aligned by PSI; new ids without a restart

def test_prediction_needs_a_psi_aligned_batch_and_echoes_no_ids(trained, parties):
    party, channel, model, _, tmp_path = trained
    channel.request_all({1: Finish("plain")})
    active, _ = parties
    with pytest.raises(ProtocolError, match="aligned by PSI"):
        channel.request_all({1: predict_data(model)})
    strangers = active.take(np.arange(20))
    strangers = type(strangers)(**{**strangers.__dict__, "ids": np.array([f"stranger-{i}" for i in range(20)])})
    shared = align(channel, strangers, "predict")
    assert shared.size == 0  # the passive party never saw these ids, only blinded points
    assert "stranger" not in (tmp_path / "audit-telco.jsonl").read_text()


def test_new_ids_are_scored_after_the_file_changes_without_a_restart(trained, parties, small_credit):
    party, channel, model, _, tmp_path = trained
    channel.request_all({1: Finish("plain")})
    active, _ = parties
    _, passives = small_credit
    csv = tmp_path / "passive.csv"
    frame = pd.read_csv(csv, dtype={"id": str})
    missing = sorted(set(map(str, active.ids)) - set(frame["id"]))[:10]
    batch = active.take(np.flatnonzero(np.isin(active.ids.astype(str), missing)))
    assert align(channel, batch, "predict").size == 0
    position = {str(i): k for k, i in enumerate(passives[0].ids)}
    extra = pd.DataFrame(passives[0].features[[position[i] for i in missing]], columns=frame.columns[1:])
    extra.insert(0, "id", missing)
    pd.concat([frame, extra]).to_csv(csv, index=False)
    shared = align(channel, batch, "predict")
    assert shared.size == len(missing)
    channel.request_all({1: predict_data(model)})
    margin = model.ensemble.margin(shared.size, FederatedOracle(channel, "predict", model.owner,
                                                                batch.features[shared]))
    assert np.isfinite(margin).all()
    assert entries(tmp_path, "reload")[-1]["rows"] == len(frame) + len(missing)


# --- the audit log

def test_every_event_is_audited(trained, parties):
    party, channel, model, test_rows, tmp_path = trained
    channel.request_all({1: Finish("plain")})
    active, _ = parties
    batch = active.take(np.arange(30))
    shared = align(channel, batch, "predict")
    channel.request_all({1: predict_data(model)})
    model.ensemble.margin(shared.size, FederatedOracle(channel, "predict", model.owner, batch.features[shared]))
    with pytest.raises(ProtocolError):
        route(channel, "predict", shared.size, [(999_999, np.array([0]))])
    channel.request_all({1: Shutdown("test over")})
    log = entries(tmp_path)
    events = [e["event"] for e in log]
    for event in ("start", "align", "aligned", "setup", "route", "finish", "predict", "refused", "queries",
                  "shutdown"):
        assert event in events, event
    setup_entry = next(e for e in log if e["event"] == "setup")
    assert setup_entry["run_id"] == "run-1" and setup_entry["protocol"] == "plain"
    assert setup_entry["params"]["n_trees"] == 3 and setup_entry["rows"]["train"] > 0
    assert setup_entry["peer"] == "in-process"  # over gRPC: the client certificate's SHA-256
    finish = next(e for e in log if e["event"] == "finish")
    assert finish["queries"]["HistogramRequest"] > 0 and finish["queries"]["SplitRequest"] > 0
    assert next(e for e in log if e["event"] == "predict")["rows"] == shared.size
    assert next(e for e in log if e["event"] == "start")["policy"]["protocols"][0] == "plain"
    for entry in log:
        assert {"time", "epoch", "party", "event"} <= set(entry)
    text = summarise(log)
    assert "runs: 1" in text and f"prediction batches: 1, rows scored: {shared.size}" in text
    assert "refusals: 1" in text


def test_the_audit_log_is_private_and_survives_a_torn_line(parties):
    active, tmp_path = parties
    party = service(tmp_path, OPT_IN)
    party.close()
    path = tmp_path / "audit-telco.jsonl"
    assert path.stat().st_mode & 0o777 == 0o600
    with path.open("a") as handle:
        handle.write('{"event": "setup", "ep')  # a crash mid-line
    assert [e["event"] for e in read_audit(path)] == ["start"]
    path.write_text('{"event": "start", "epoch": 1}\nnot json\n{"event": "x", "epoch": 2}\n')
    with pytest.raises(ConfigError, match="line 2"):
        read_audit(path)


def test_the_psi_reply_order_does_not_depend_on_the_file_order(monkeypatch):
    from teeboost.parties import psi

    scalar = psi.new_scalar()
    monkeypatch.setattr(psi, "new_scalar", lambda: scalar)
    ids = np.array([f"customer-{i}" for i in range(200)])
    points = psi.blind(psi.hash_ids(["customer-3", "x"]), scalar)
    first = PsiPassive(ids).handle(PsiRequest("train", points))
    second = PsiPassive(ids[np.random.default_rng(1).permutation(200)]).handle(PsiRequest("train", points))
    assert np.array_equal(first.theirs, second.theirs)
    keys = [bytes(row) for row in first.theirs]
    assert keys == sorted(keys)


def test_refusal_is_a_protocol_error_naming_party_and_rule():
    error = PolicyRefused("bank-b", "max_depth", "too deep")
    assert isinstance(error, ProtocolError) and error.rule == "max_depth"
    assert str(error) == "party 'bank-b' refuses by its policy ([policy] max_depth): too deep"


def test_the_active_party_checks_its_own_policy_before_connecting(parties):
    """Plain sends the labels' gradients in the clear: the active party needs its own opt-in."""
    from teeboost.deploy.active import run_training

    active, tmp_path = parties
    frame = pd.DataFrame(active.features, columns=list(active.feature_names))
    frame.insert(0, "id", active.ids)
    frame["label"] = active.labels
    frame.to_csv(tmp_path / "active.csv", index=False)
    config = tmp_path / "active.toml"
    config.write_text('[party]\nname = "bank"\nrole = "active"\ndata = "active.csv"\nid_column = "id"\n'
                      'label = "label"\n[tls]\ninsecure = true\n[[peers]]\nindex = 1\nname = "telco"\n'
                      'address = "127.0.0.1:9"\n[training]\nprotocol = "plain"\n')
    with pytest.raises(PolicyRefused, match=r"party 'bank' refuses by its policy \(\[policy\] protocols\)"):
        run_training(load_config(config))


def test_split_records_per_tree_are_bounded_by_the_depth():
    """However the active party drives a protocol, a tree of depth d has at most 2^d - 1
    splits, and tree indices stop at max_trees."""
    policy = Policy(max_trees=4, max_depth=2)
    policy.check_records("telco", {0: 3, 3: 1})
    with pytest.raises(PolicyRefused, match=r"max_depth\).*tree 1 asks this party for 4 splits"):
        policy.check_records("telco", {0: 3, 1: 4})
    with pytest.raises(PolicyRefused, match=r"max_trees\).*tree 4"):
        policy.check_records("telco", {4: 1})


def test_discarding_trees_does_not_buy_more_partitions(parties):
    """An active party grows tree 0, tells the passive party to discard it, and grows tree 0
    again (and again): what was revealed is counted, not what is currently kept."""
    from teeboost.protocols.messages import DiscardTrees

    active, tmp_path = parties
    channel = InMemoryChannel({1: service(tmp_path, f"{OPT_IN}\nmax_trees = 1\nmax_depth = 4").handle})
    aligned = active.take(align(channel, active))
    params = BoostParams(n_trees=1, max_depth=4, subsample=1.0, max_bin=32)
    train_rows, _ = setup(channel, aligned, params=params)
    with pytest.raises(ProtocolError, match=r"\[policy\] max_depth\).*tree 0 asks this party for 1[6-8] splits"):
        for _ in range(8):  # 3 passive splits per growth: the sixth exceeds a depth-4 tree's 15
            train(channel, train_rows, params)
            channel.request_all({1: DiscardTrees(0)})


# --- red-team findings, each mounted again

class RelabelledTrees(InMemoryChannel):
    """An active party that numbers its trees -1, -2, ... (its own bookkeeping is its own)."""

    def request_all(self, messages):
        return {p: relabel(r) for p, r in super().request_all({p: relabel(m) for p, m in messages.items()}).items()}


def relabel(msg):
    from dataclasses import fields, is_dataclass, replace

    if is_dataclass(msg) and "tree" in {f.name for f in fields(msg)}:
        return replace(msg, tree=-1 - msg.tree)  # an involution: tree t <-> -1 - t
    return msg


def test_trees_are_numbered_from_zero_and_grown_in_order(parties):
    active, tmp_path = parties
    party = service(tmp_path, f"{OPT_IN}\nmax_trees = 2")
    aligned = active.take(align(InMemoryChannel({1: party.handle}), active))
    train_rows, _ = setup(InMemoryChannel({1: party.handle}), aligned, params=BoostParams(n_trees=2, max_depth=4, subsample=0.8, max_bin=32))
    with pytest.raises(ProtocolError, match=r"\[policy\] max_trees\).*(trees count from 0|numbered from 0)"):
        train(RelabelledTrees({1: party.handle}), train_rows, BoostParams(n_trees=30, max_depth=4, subsample=1.0, max_bin=32))


def test_a_node_below_the_runs_depth_is_not_split(parties):
    """Set-up says depth 2; the active party grows depth 5. This party refuses to split a node
    at depth 2, whoever split the nodes above it."""
    active, tmp_path = parties
    channel = InMemoryChannel({1: service(tmp_path, OPT_IN).handle})
    aligned = active.take(align(channel, active))
    train_rows, _ = setup(channel, aligned, params=BoostParams(n_trees=3, max_depth=2, subsample=0.8, max_bin=32))
    with pytest.raises(ProtocolError, match=r"\[policy\] max_depth\).*at depth [2-4] would grow the tree beyond "
                                            r"depth 2"):
        train(channel, train_rows, BoostParams(n_trees=3, max_depth=5, subsample=0.8, max_bin=32))


def test_set_up_positions_are_distinct_rows(parties):
    """Red-team finding: a row repeated 40 times met k = 40 alone, and 200 copies of one row
    in the held-out set each had their own routing count."""
    active, tmp_path = parties
    channel = InMemoryChannel({1: service(tmp_path, f"{OPT_IN}\nmin_rows_per_node = 40").handle})
    align(channel, active)
    params = json.dumps(BoostParams(min_samples_leaf=40, **SMALL).to_dict())
    empty = np.empty(0, dtype=np.int64)
    for train_rows, test_rows in ((np.repeat(np.arange(30), 40), empty), (np.arange(100), np.full(200, 5)),
                                  (np.arange(100), np.arange(50, 150))):
        with pytest.raises(ProtocolError, match="distinct rows, each once"):
            channel.request_all({1: Setup("run-1", "plain", params, 1, train_rows, test_rows, empty)})


def test_a_psi_result_cannot_claim_more_rows_than_were_submitted(parties):
    """Red-team finding: zero ids submitted, every position claimed: the whole file aligned."""
    from teeboost.parties.psi import PsiResult

    _, tmp_path = parties
    party = service(tmp_path, f"{OPT_IN}\nmax_psi_ids_per_day = 10")
    with pytest.raises(ProtocolError, match="an empty PSI request aligns nothing"):  # each stored the id list
        party.handle(PsiRequest("train", np.empty((0, 32), dtype=np.uint8)))
    from teeboost.crypto.psi import hash_ids

    one = hash_ids(["someone"])  # one id submitted, every position claimed
    reply = party.handle(PsiRequest("train", one))
    with pytest.raises(ProtocolError, match="more shared rows than ids the active party submitted"):
        party.handle(PsiResult("train", np.arange(reply.theirs.shape[0])))
    assert "train" not in party._aligned


def test_after_training_only_prediction_batches_are_routed(trained):
    """Red-team finding: the finished model scored every row of a held-out set as large as
    the intersection, outside the prediction budget. After Finish the run's own rows are gone,
    and held-out rows count against the prediction budget at set-up."""
    party, channel, model, test_rows, tmp_path = trained
    record = next(iter(dict(party.party.owner.items())))
    route(channel, "test", test_rows.n_rows, [(record, np.array([0]))])  # the held-out evaluation
    channel.request_all({1: Finish("plain")})
    for dataset in ("test", "train"):
        with pytest.raises(ProtocolError, match=f"no dataset '{dataset}'"):
            route(channel, dataset, test_rows.n_rows, [(record, np.array([0]))])


def test_held_out_rows_count_against_the_prediction_budget(parties):
    active, tmp_path = parties
    channel = InMemoryChannel({1: service(tmp_path, f"{OPT_IN}\nmax_prediction_rows_per_day = 100").handle})
    aligned = active.take(align(channel, active))
    with pytest.raises(ProtocolError, match=r"max_prediction_rows_per_day\)"):
        setup(channel, aligned)  # 20% of the rows held out: more than 100


def test_frames_refused_before_decoding_are_audited(parties):
    from teeboost.transport.base import answer_frame

    _, tmp_path = parties
    party = service(tmp_path, OPT_IN)
    answer_frame(party.handle, b"\x00garbage", party.undecodable)
    assert entries(tmp_path, "refused")[-1]["request"] == "undecodable frame"


def test_psi_exchanges_waiting_for_their_result_are_bounded():
    """Each exchange keeps the party's shuffled order until its result: at most MAX_PENDING
    wait, the oldest forgotten (its result refused by name, never matched to another's rows)."""
    from teeboost.crypto.psi import hash_ids
    from teeboost.parties.psi import MAX_PENDING, PsiPassive, PsiResult

    psi = PsiPassive(np.array([f"id-{i}" for i in range(50)]))
    for k in range(MAX_PENDING + 1):
        psi.handle(PsiRequest(f"predict.s{k}", hash_ids([f"id-{k}"])))
    with pytest.raises(ProtocolError, match="without its PSI exchange"):
        psi.handle(PsiResult("predict.s0", np.array([0])))
    with pytest.raises(ProtocolError, match="already under way"):  # a session's name, once at a time (red team)
        psi.handle(PsiRequest(f"predict.s{MAX_PENDING}", hash_ids(["id-1"])))
    psi.handle(PsiResult(f"predict.s{MAX_PENDING}", np.array([0])))
    assert psi.rows[f"predict.s{MAX_PENDING}"].size == 1
    with pytest.raises(ProtocolError, match="neither 'train.<run>' nor 'predict.<session>'"):
        psi.handle(PsiRequest("predict/../x", hash_ids(["a"])))


def test_an_unexpected_fault_is_a_refusal_with_a_reference_and_the_session_goes_on(parties, monkeypatch, capfd):
    """Any exception in a handler (here a bug planted in PSI) reaches the peer as a reason code
    and a reference, never its text or traceback; its operator gets both; the next request of
    the same session is served."""
    from teeboost.parties import psi as psi_module

    active, tmp_path = parties
    party = service(tmp_path, OPT_IN)
    channel = InMemoryChannel({1: party.handle})
    original = psi_module.PsiPassive.handle
    monkeypatch.setattr(psi_module.PsiPassive, "handle",
                        lambda self, msg: (_ for _ in ()).throw(ZeroDivisionError(f"row {party.data.ids[3]} / 0")))
    with pytest.raises(ProtocolError, match=r"Refused: party 'telco' cannot serve PsiRequest \(internal; reference "
                                            r"[0-9a-f]{8}\)") as refused:
        align(channel, active)
    assert str(party.data.ids[3]) not in str(refused.value) and "ZeroDivisionError" not in str(refused.value)
    err = capfd.readouterr().err
    assert "ZeroDivisionError" in err and "Traceback" in err and str(party.data.ids[3]) in err
    reference = str(refused.value).split("reference ")[1][:8]
    assert any(reference in str(e.get("detail", "")) for e in entries(tmp_path, "refused"))
    monkeypatch.setattr(psi_module.PsiPassive, "handle", original)
    assert align(channel, active).size > 0  # the same session goes on


def test_two_runs_aligning_at_once_never_take_each_others_rows(parties):
    """Red-team finding: a second process's PSI request between the first's request and result
    re-shuffled the passive party's order, so the first run trained on misaligned rows with no
    error. Each run now aligns under its own purpose (train.<run id>); a name is used once at a time."""
    active, tmp_path = parties
    party = service(tmp_path, OPT_IN)
    reference = active.take(align(InMemoryChannel({1: party.handle}), active, "train.A"))
    expected = party._aligned.pop("train.A").ids.copy()
    other = active.take(np.arange(500))

    class Interleaving(InMemoryChannel):
        """Process B's alignment starts while process A waits for its result."""
        done = False

        def request_all(self, messages):
            from teeboost.parties.psi import PsiResult

            if not self.done and isinstance(messages[1], PsiResult):
                self.done = True
                intersect_as_active(InMemoryChannel({1: party.handle}), other.ids, "train.B", allow_empty=True)
            return super().request_all(messages)

    rows = align(Interleaving({1: party.handle}), active, "train.A")
    assert np.array_equal(party._aligned["train.A"].ids, expected) and rows.size == reference.n_rows
    assert party._aligned["train.B"].n_rows == len(set(other.ids) & set(party.data.ids))
    from teeboost.crypto.psi import hash_ids

    for purpose in ("train.C", "train"):  # any purpose: one exchange at a time
        party.handle(PsiRequest(purpose, hash_ids(["x"])))
        with pytest.raises(ProtocolError, match="already under way"):
            party.handle(PsiRequest(purpose, hash_ids(["y"])))


def test_a_prediction_session_name_in_use_is_never_replaced(trained, parties):
    party, channel, model, _, tmp_path = trained
    channel.request_all({1: Finish("plain")})
    active, _ = parties
    first, second = active.take(np.arange(40)), active.take(np.arange(40, 90))
    rows = align(channel, first, "predict.same")
    channel.request_all({1: predict_data(model, "predict.same")})
    align(channel, second, "predict.same")
    with pytest.raises(ProtocolError, match="'predict.same' is already under way"):
        channel.request_all({1: predict_data(model, "predict.same")})
    # the first session's rows are still its own: the same margins as a session alone
    got = model.ensemble.margin(rows.size, FederatedOracle(channel, "predict.same", model.owner,
                                                           first.take(rows).features))
    alone = align(channel, first, "predict.alone")
    channel.request_all({1: predict_data(model, "predict.alone")})
    expected = model.ensemble.margin(alone.size, FederatedOracle(channel, "predict.alone", model.owner,
                                                                 first.take(alone).features))
    assert np.array_equal(got, expected)


def test_the_label_owner_caps_the_columns_a_passive_party_brings():
    """Issue #32: made-up columns are how a passive party probes labels; the label owner may cap
    them per run (``max_passive_features``), named in the refusal."""
    policy = Policy.from_table({"max_passive_features": 12}, role="active")
    policy.check_passive_features("bank", 12)
    with pytest.raises(PolicyRefused, match=r"max_passive_features.*bank brings 300 columns; at most 12"):
        policy.check_passive_features("bank", 300)
    assert Policy.from_table({}, role="active").max_passive_features is None
    assert Policy.from_table({}, role="passive").max_passive_features is None


def test_the_active_party_refusing_secureboost_says_what_it_reveals_of_its_labels(parties):
    """The label owner's own refusal speaks of its labels (SecureBoost sends their gradients,
    encrypted), not of passive features, and names the config to allow it in."""
    from teeboost.deploy.active import run_training

    active, tmp_path = parties
    frame = pd.DataFrame(active.features, columns=list(active.feature_names))
    frame.insert(0, "id", active.ids)
    frame["label"] = active.labels
    frame.to_csv(tmp_path / "active.csv", index=False)
    config = tmp_path / "active.toml"
    config.write_text('[party]\nname = "bank"\nrole = "active"\ndata = "active.csv"\nid_column = "id"\n'
                      'label = "label"\n[tls]\ninsecure = true\n[[peers]]\nindex = 1\nname = "telco"\n'
                      'address = "127.0.0.1:9"\n[training]\nprotocol = "secureboost"\n')
    with pytest.raises(PolicyRefused) as refused:
        run_training(load_config(config))
    text = str(refused.value)
    assert "labels" in text and "encrypted" in text and "gradients" in text, text
    assert "features" not in text, text
    assert f"adding 'secureboost' to [policy] protocols of {config}" in text, text
