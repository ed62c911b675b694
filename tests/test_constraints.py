"""monotone_constraints and interaction_constraints: XGBoost's semantics, in every protocol.

Every protocol must grow plain's trees under constraints; plain must grow XGBoost hist's
trees on a table both bin alike; a monotone model's predictions must be monotone along each
constrained column (a grid over the column, the other columns of 200 rows fixed); and a path
may only combine columns an interaction set allows.
"""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb

from teeboost.config import BoostParams, ProtocolOptions
from teeboost.core.central import LocalOracle, train_central
from teeboost.core.constraints import RunConstraints, child_bounds, parse_interactions, parse_monotone
from teeboost.core.split import SplitCriteria
from teeboost.data import split_columns
from teeboost.errors import AttestationError, ConfigError, ProtocolError
from teeboost.estimator import VerticalBoostClassifier
from teeboost.federation import train_local

from .helpers import federated_descriptions, integer_table, split_descriptions

SIMULATED = ProtocolOptions(allow_simulated_tee=True)
OPTIONS = {
    "secureboost": ProtocolOptions(key_bits=768, insecure_key_bits=True, crypto_workers=1),
    "ntee": SIMULATED,
    "onetee": SIMULATED,
    "onetee-bins-once": ProtocolOptions(onetee_bins_once=True, allow_simulated_tee=True),
    "strict": SIMULATED,
}
ACTIVE = ["RevolvingUtilizationOfUnsecuredLines", "NumberOfTime30-59DaysPastDueNotWorse", "DebtRatio",
          "NumberOfTimes90DaysLate", "NumberOfTime60-89DaysPastDueNotWorse"]
MONOTONE = {"RevolvingUtilizationOfUnsecuredLines": 1, "DebtRatio": 1, "age": -1, "MonthlyIncome": -1}
INTERACTION = [["RevolvingUtilizationOfUnsecuredLines", "age"], ["DebtRatio", "MonthlyIncome", "NumberOfDependents"],
               ["NumberOfTimes90DaysLate"]]
PARAMS = BoostParams(n_trees=3, max_depth=3, subsample=1.0, max_bin=32, monotone_constraints=MONOTONE,
                     interaction_constraints=INTERACTION)


@pytest.fixture(scope="module")
def parties(small_credit):
    active, passives = small_credit
    rows = np.arange(1500)
    return active.take(rows), [p.take(rows) for p in passives]


@pytest.fixture(scope="module")
def reference(parties):
    active, passives = parties
    return train_local(active, passives, PARAMS)[0]


def _paths(tree, tables):
    """Every root-to-node path's (party, column name) list."""
    out, stack = [], [(0, [])]
    while stack:
        node, path = stack.pop()
        if tree.is_leaf(node):
            out.append(path)
            continue
        owner, names = tables[tree.party[node]]
        step = path + [names[owner.get(tree.record[node]).feature]]
        out.append(step)
        stack += [(tree.left[node], step), (tree.right[node], step)]
    return out


# ---------------------------------------------------------------- the rules themselves

def test_xgboosts_forms_parse_and_bad_ones_are_named():
    names = ["a", "b", "c"]
    assert parse_monotone("(1,0,-1)", names) == parse_monotone((1, 0, -1), names) == {"a": 1, "c": -1}
    assert parse_monotone("a:1, c:-1") == parse_monotone({"c": -1, "a": 1, "b": 0}) == {"a": 1, "c": -1}
    assert parse_interactions("[[0, 2], [1]]", names) == parse_interactions([["c", "a"], ["b"]]) == (("a", "c"), ("b",))
    for bad, match in (({"a": 2}, "direction 2"), ((1, 0), "2 directions for 3 columns"), ("a=1", "column:direction")):
        with pytest.raises(ValueError, match=match):
            parse_monotone(bad, names)
    with pytest.raises(ValueError, match="index 7"):
        parse_interactions([[0, 7]], names)
    with pytest.raises(ConfigError, match="direction 'up'"):
        BoostParams(monotone_constraints={"age": "up"})


def test_bounds_follow_the_children_mean_and_the_digest_binds_the_rules():
    assert child_bounds(-1.0, 1.0, 1, -0.25, 0.75) == ((-1.0, 0.25), (0.25, 1.0))
    assert child_bounds(-1.0, 1.0, -1, 0.75, -0.25) == ((0.25, 1.0), (-1.0, 0.25))
    assert child_bounds(-1.0, 1.0, 0, 0.75, -0.25) == ((-1.0, 1.0), (-1.0, 1.0))
    one, other = PARAMS.constraints, PARAMS.replace(monotone_constraints={"age": 1}).constraints
    assert one.digest() != other.digest() and RunConstraints.decode(one.encode()) == one
    criteria = SplitCriteria.from_params(PARAMS)
    assert criteria.monotone and criteria.constraints == one.digest()
    assert SplitCriteria.from_tuple(criteria.as_tuple()) == criteria  # the rules travel beside, by digest


# ---------------------------------------------------------------- every protocol grows plain's trees

def test_plain_equals_central_and_constraints_change_the_model(parties, reference):
    active, passives = parties
    features = np.hstack([active.features, *[p.features for p in passives]])
    names = list(active.feature_names) + [n for p in passives for n in p.feature_names]
    widths = [len(active.feature_names)] + [len(p.feature_names) for p in passives]
    ensemble, owner = train_central(features, active.labels, PARAMS, "binary", party_features=widths,
                                    feature_names=names)
    assert federated_descriptions(reference) == split_descriptions(ensemble, {0: (owner, names)})
    assert np.array_equal(reference.predict(active.features, [p.features for p in passives]),
                          ensemble.predict(features.shape[0], LocalOracle(owner, features)))
    free, _ = train_local(active, passives, PARAMS.replace(monotone_constraints=None, interaction_constraints=None))
    assert federated_descriptions(free) != federated_descriptions(reference)
    assert any(t.party[n] == 1 for t in reference.active.ensemble.trees for n in range(t.n_nodes)
               if not t.is_leaf(n)), "the passive party must own splits, or the test proves nothing"


@pytest.mark.parametrize("protocol", list(OPTIONS))
def test_every_protocol_grows_plains_trees_under_constraints(parties, reference, protocol):
    active, passives = parties
    model, _ = train_local(active, passives, PARAMS, protocol.removesuffix("-bins-once"), options=OPTIONS[protocol])
    statistics = protocol != "strict"  # strict publishes no gains or node sizes
    assert federated_descriptions(model, statistics) == federated_descriptions(reference, statistics)
    features = [p.features for p in passives]
    assert np.array_equal(model.predict(active.features, features), reference.predict(active.features, features))


def test_paths_combine_only_columns_a_set_allows(reference):
    tables = {0: (reference.active.owner, reference.active.feature_names),
              **{m.index: (m.owner, m.feature_names) for m in reference.passives}}
    sets = [set(s) for s in INTERACTION]
    seen = 0
    for tree in reference.active.ensemble.trees:
        for path in _paths(tree, tables):
            used = set(path)
            seen += len(used) > 1
            assert len(used) <= 1 or any(used <= s for s in sets), path
    assert seen, "some path must combine two columns, or the test proves nothing"


def test_monotone_along_every_constrained_column(parties, reference):
    active, passives = parties
    a, p = active.features[:200], passives[0].features[:200]
    moved = set()
    for name, direction in MONOTONE.items():
        mine = name in active.feature_names
        column = list(active.feature_names if mine else passives[0].feature_names).index(name)
        values = (a if mine else p)[:, column]
        grid = np.unique(np.nanquantile(values, np.linspace(0, 1, 40)))
        predictions = []
        for value in grid:
            a2, p2 = a.copy(), p.copy()
            (a2 if mine else p2)[:, column] = value
            predictions.append(reference.predict(a2, [p2]))
        steps = np.diff(np.array(predictions), axis=0) * direction
        assert steps.min() >= 0, (name, steps.min())
        if steps.max() > 0:
            moved.add(name)
    assert {"age", "RevolvingUtilizationOfUnsecuredLines"} <= moved, "constrained columns must be used, or the " \
                                                                    "test proves nothing"


# ---------------------------------------------------------------- against XGBoost

@pytest.mark.parametrize("objective, xgb_objective", [("binary", "binary:logistic"),
                                                      ("regression", "reg:squarederror")])
@pytest.mark.parametrize("monotone, interaction", [
    ({"f0": 1, "f1": -1, "f3": 1}, None),
    (None, [["f0", "f3"], ["f1", "f2", "f4"]]),
    ({"f0": 1, "f3": -1}, [["f0", "f3"], ["f1", "f2"]]),
], ids=["monotone", "interaction", "both"])
def test_predictions_equal_xgboost_hist(objective, xgb_objective, monotone, interaction):
    x, y, (active, passives) = integer_table(objective, seed=1)
    params = BoostParams(n_trees=6, max_depth=4, learning_rate=0.3, subsample=1.0, max_bin=32, objective=objective,
                         monotone_constraints=monotone, interaction_constraints=interaction)
    model, _ = train_local(active, passives, params)
    ours = model.predict(active.features, [p.features for p in passives])
    names = [f"f{i}" for i in range(5)]
    extra = {}
    if monotone:
        extra["monotone_constraints"] = "(" + ",".join(str(monotone.get(n, 0)) for n in names) + ")"
    if interaction:
        extra["interaction_constraints"] = json.dumps([[names.index(n) for n in s] for s in interaction])
    booster = xgb.train({"objective": xgb_objective, "max_depth": 4, "eta": 0.3, "reg_lambda": 1.0,
                         "min_child_weight": 1.0, "max_bin": 32, "tree_method": "hist", "subsample": 1.0,
                         "nthread": 1, "base_score": float(np.mean(y)), **extra},
                        xgb.DMatrix(x, label=y), params.n_trees)
    theirs = booster.predict(xgb.DMatrix(x))
    assert np.abs(ours - theirs).max() < 1e-5  # float32 and fixed-point gradients only
    free, _ = train_local(active, passives, params.replace(monotone_constraints=None, interaction_constraints=None))
    assert np.abs(free.predict(active.features, [p.features for p in passives]) - ours).max() > 1e-3


# ---------------------------------------------------------------- what users meet

def test_bad_constraints_are_named(parties):
    active, passives = parties
    with pytest.raises(ConfigError, match="no party holds: agee"):
        train_local(active, passives, PARAMS.replace(monotone_constraints={"agee": 1}))
    with pytest.raises(ConfigError, match="no party holds: Income"):
        train_local(active, passives, PARAMS.replace(interaction_constraints=[["age", "Income"]]))
    frame = pd.DataFrame({"city": ["a", "b", "c", "a"] * 50, "x": np.arange(200.0), "z": np.arange(200.0) % 7,
                          "y": [0, 1] * 100})
    a, ps = split_columns(frame, [["z"]], label="y")
    with pytest.raises(ConfigError, match="column 'city' of party .* is categorical"):
        train_local(a, ps, BoostParams(n_trees=1, monotone_constraints={"city": 1}))


def test_the_estimator_takes_xgboosts_forms(credit_frame):
    frame = credit_frame.iloc[:800]
    x, y = frame.drop(columns=["SeriousDlqin2yrs", "id"]), frame["SeriousDlqin2yrs"]
    parties = {"bureau": ["age", "MonthlyIncome", "NumberOfDependents"]}
    by_name = VerticalBoostClassifier(parties=parties, n_estimators=2, monotone_constraints={"age": -1},
                                      interaction_constraints=[["age", "DebtRatio"]]).fit(x, y)
    order = tuple(-1 if c == "age" else 0 for c in x.columns)
    at = [list(x.columns).index("age"), list(x.columns).index("DebtRatio")]
    by_position = VerticalBoostClassifier(parties=parties, n_estimators=2, monotone_constraints=order,
                                          interaction_constraints=[at]).fit(x, y)
    assert np.array_equal(by_name.predict_proba(x), by_position.predict_proba(x))
    assert by_name.model_.active.params["monotone_constraints"] == {"age": -1}


@pytest.mark.parametrize("protocol", ["ntee", "strict"])
def test_a_passive_host_cannot_give_its_enclave_other_constraints(monkeypatch, parties, protocol):
    """The rules an enclave applies must be those whose digest the run context binds."""
    from teeboost.protocols.ntee import hosts as ntee

    original = ntee.init_message

    def rogue(protocol, role, party, criteria, max_bin, env, run_id):
        if role == "passive":
            criteria = criteria.__class__(**{**criteria.__dict__,
                                             "rules": RunConstraints({"age": 1}).encode()})
        return original(protocol, role, party, criteria, max_bin, env, run_id)

    monkeypatch.setattr(ntee, "init_message", rogue)
    active, passives = parties
    with pytest.raises((ProtocolError, AttestationError), match="constraints given do not match"):
        train_local(active, passives, PARAMS.replace(n_trees=1), protocol, options=SIMULATED)


def test_cli_trains_with_constraints(tmp_path, credit_frame):
    data = tmp_path / "credit.csv"
    credit_frame.iloc[:600].to_csv(data, index=False)
    done = subprocess.run([sys.executable, "-m", "teeboost.cli", "train", "--data", str(data),
                           "--label", "SeriousDlqin2yrs", "--passive-columns", "age,MonthlyIncome",
                           "--n-trees", "2", "--max-depth", "3", "--max-bin", "32",
                           "--monotone-constraints", "age:-1,DebtRatio:1",
                           "--interaction-constraints", "age,DebtRatio;MonthlyIncome",
                           "--model-dir", str(tmp_path / "model"), "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    saved = json.loads((tmp_path / "model" / "active.json").read_text())
    assert saved["params"]["monotone_constraints"] == {"DebtRatio": 1, "age": -1}
    assert saved["params"]["interaction_constraints"] == [["DebtRatio", "age"], ["MonthlyIncome"]]
    wrong = subprocess.run([sys.executable, "-m", "teeboost.cli", "train", "--data", str(data),
                            "--label", "SeriousDlqin2yrs", "--n-trees", "1",
                            "--monotone-constraints", "age=1", "--model-dir", str(tmp_path / "m2")],
                           capture_output=True, text=True)
    assert wrong.returncode != 0 and "column:direction" in wrong.stderr


# ---------------------------------------------------------------- what the active host learns

def test_the_audit_uses_the_constraints_an_ntee_active_host_learns(tmp_path, parties):
    """N-TEE hides which passive column a split uses, but under constraints its active host
    learns the column's public direction and interaction sets: the transcript keeps them, and
    the leakage audit groups and names cuts by them (docs/constraints.md)."""
    from teeboost.attack.attribution import PublicFeature, public_signatures
    from teeboost.attack.infer import infer_orders
    from teeboost.attack.view import read_view

    active, passives = parties
    passive = list(passives[0].feature_names)
    params = BoostParams(n_trees=8, max_depth=4, subsample=1.0, max_bin=32, monotone_constraints={"age": 1},
                         interaction_constraints=[[ACTIVE[0], "age"], [ACTIVE[2], "MonthlyIncome"],
                                                  [ACTIVE[3], "NumberOfDependents"]])
    path = tmp_path / "run.tbt"
    model, _ = train_local(active, passives, params, "ntee", transcript=path, options=SIMULATED)
    view = read_view(path)
    owner = model.passives[0].owner
    truth = public_signatures(params.to_dict(), passive)
    assert view.splits and all(s.feature == -1 for s in view.splits)  # the column itself stays hidden
    for split in view.splits:
        assert split.signature == truth[owner.get(split.record).feature]
    rng = np.random.default_rng(0)
    public = [PublicFeature(**{**PublicFeature.from_sample(name, passives[0].features[:, j],
                                                           int(view.n_value_bins[1][j]), rng=rng).__dict__,
                               "signature": truth[j]}) for j, name in enumerate(passive)]
    order = infer_orders(view, 1, public, [0])[0]  # age: the only column with its constraints
    chosen = {owner.get(view.splits[int(i)].record).feature for i in order.cuts}
    assert chosen == {0}


@pytest.mark.parametrize("rule", ["interaction_constraints", "monotone_constraints"])
def test_a_passive_party_refuses_constraints_unless_its_policy_allows(rule):
    from teeboost.policy import Policy, PolicyRefused

    value = [["age", "DebtRatio"]] if rule == "interaction_constraints" else {"age": 1}
    params = BoostParams(n_trees=2, **{rule: value})
    careful = Policy(protocols=("ntee", "onetee", "strict"))
    for protocol in ("ntee", "onetee"):
        with pytest.raises(PolicyRefused, match=f"{rule} = true"):
            careful.check_params("bureau", protocol, params)
    careful.check_params("bureau", "strict", params)  # the grower runs in the enclave there
    careful.check_params("bureau", "ntee", params.replace(**{rule: None}))
    Policy(protocols=("ntee",), **{rule: True}).check_params("bureau", "ntee", params)


def test_the_xgboost_export_carries_the_constraints_effect(parties, reference):
    """XGBoost loads the exported trees and predicts what federated prediction predicts: the
    constraints live in the trees (XGBoost keeps no training parameter in a model file)."""
    from teeboost.export import export_part, merge_parts

    from . import trained_models as tm

    active, passives = parties
    booster = tm.load_booster(merge_parts([export_part(p) for p in [reference.active, *reference.passives]]))
    joined = np.hstack([active.features, passives[0].features])
    theirs = booster.predict(tm.joined_matrix(booster, joined)).astype(np.float64)
    assert np.abs(theirs - reference.predict(active.features, [p.features for p in passives])).max() <= 1e-6


# ---------------------------------------------------------------- hosts that lie (red team, 2026-11-27)

ONE_SET = BoostParams(n_trees=2, max_depth=3, subsample=1.0, max_bin=32,
                      interaction_constraints=[ACTIVE + ["age", "MonthlyIncome", "NumberOfDependents",
                                                         "NumberOfOpenCreditLinesAndLoans", "NumberRealEstateLoansOrLines"]])


@pytest.mark.parametrize("protocol", ["ntee", "onetee"])
def test_an_active_host_cannot_pin_a_passive_column_with_forged_sets(monkeypatch, parties, protocol):
    """With every column in one set no honest tree ever leaves a node no set: a host naming
    sets 0 below the root (to keep a passive party on the column it split on) is refused."""
    from teeboost.protocols.enclave import limits
    from teeboost.protocols.ntee import hosts as ntee
    from teeboost.protocols.onetee import hosts as onetee

    def forged(limits_, nodes):
        fields = limits.limits_fields(limits_, nodes)
        if fields and 0 not in nodes:
            fields["sets"] = np.zeros(len(nodes), dtype=np.int64)
        return fields

    monkeypatch.setattr(ntee if protocol == "ntee" else onetee, "limits_fields", forged)
    active, passives = parties
    with pytest.raises(ProtocolError, match="bounds or interaction sets other than the tree implies"):
        train_local(active, passives, ONE_SET, protocol, options=SIMULATED)


@pytest.mark.parametrize("protocol", ["ntee", "strict"])
def test_a_passive_host_that_renames_its_columns_for_its_enclave_is_refused(monkeypatch, parties, protocol):
    """Renaming 'age' when loading the enclave would free it from age's direction: the active
    enclave finds no enclave holding age."""
    from teeboost.protocols.ntee import hosts as ntee
    from teeboost.protocols.strict import hosts as strict

    cls = ntee.NteePassive if protocol == "ntee" else strict.StrictPassive
    original = cls._load_columns

    def renamed(self):
        self.columns.names = [n + " " if n == "age" else n for n in self.columns.names]
        return original(self)

    monkeypatch.setattr(cls, "_load_columns", renamed)
    active, passives = parties
    with pytest.raises(ProtocolError, match="holds constrained column.* age"):
        train_local(active, passives, PARAMS.replace(n_trees=1), protocol, options=SIMULATED)


def test_a_passive_hello_with_other_directions_is_refused(monkeypatch, parties):
    from teeboost.parties import passive as passive_party

    original = passive_party.PassiveParty.handle

    def lying(self, msg):
        reply = original(self, msg)
        if isinstance(reply, passive_party.HelloReply):
            reply = reply.__class__(**{**reply.__dict__, "directions": np.zeros_like(reply.directions)})
        return reply

    monkeypatch.setattr(passive_party.PassiveParty, "handle", lying)
    active, passives = parties
    with pytest.raises(ProtocolError, match="described its columns' constraints other than the run's"):
        train_local(active, passives, PARAMS.replace(n_trees=1))


def test_a_constrained_level_without_bounds_is_refused(monkeypatch, parties):
    from teeboost.protocols.ntee import hosts as ntee

    monkeypatch.setattr(ntee, "limits_fields", lambda limits, nodes: {})
    active, passives = parties
    with pytest.raises(ProtocolError, match="without its nodes' bounds and interaction sets"):
        train_local(active, passives, PARAMS.replace(n_trees=1), "ntee", options=SIMULATED)


def test_a_passive_party_declares_its_own_columns_directions(tmp_path):
    """``[party] monotone_constraints`` in a passive party's config: the run must carry them."""
    from teeboost.deploy.config import load_config
    from teeboost.deploy.demo import write_federation
    from teeboost.policy import PolicyRefused
    from teeboost.run_constraints import check_declared_directions

    configs = write_federation(tmp_path, n_passive=1, training={"n_trees": 1})
    passive = configs["passive-1"]
    passive.write_text(passive.read_text().replace("[party]\n", "[party]\nmonotone_constraints = {age = -1}\n", 1))
    config = load_config(passive)
    assert config.monotone == {"age": -1}
    columns = ["age", "MonthlyIncome"]
    with pytest.raises(PolicyRefused, match=r"declares column 'age' monotone -1; the run has \+0"):
        check_declared_directions(config.name, config.monotone, BoostParams(n_trees=1), columns)
    check_declared_directions(config.name, config.monotone, BoostParams(n_trees=1, monotone_constraints={"age": -1}),
                              columns)
    with pytest.raises(ConfigError, match="not among its columns"):
        check_declared_directions(config.name, {"agee": 1}, BoostParams(n_trees=1), columns)
    passive.write_text(passive.read_text().replace("{age = -1}", "{age = 2}"))
    with pytest.raises(ConfigError, match="direction 2"):
        load_config(passive)
