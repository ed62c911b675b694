"""reg_alpha, max_delta_step and colsample_bytree: XGBoost's semantics, the same in every protocol.

Column samples are drawn per party and per tree (``sampled_features``); every protocol must
grow plain's trees with them, plain must equal a central run sampling the same per-party
segments, and without column sampling the L1 term and the weight cap must give XGBoost's
trees.
"""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb

from teeboost.config import BoostParams, ProtocolOptions
from teeboost.core.central import LocalOracle, train_central
from teeboost.core.split import N_CRITERIA, SplitCriteria, sampled_features
from teeboost.data import split_columns
from teeboost.errors import AttestationError, ProtocolError
from teeboost.federation import train_local
from teeboost.protocols.enclave import messages as em

from .helpers import SMALL, federated_descriptions, split_descriptions
from .helpers import integer_table as _integer_table

PARAMS = BoostParams(n_trees=3, max_depth=3, reg_alpha=0.5, max_delta_step=0.3, colsample_bytree=0.5,
                     random_state=3, subsample=0.8, max_bin=32)
SIMULATED = ProtocolOptions(allow_simulated_tee=True)
OPTIONS = {
    "secureboost": ProtocolOptions(key_bits=768, insecure_key_bits=True, crypto_workers=1),
    "ntee": SIMULATED,
    "onetee": SIMULATED,
    "onetee-bins-once": ProtocolOptions(onetee_bins_once=True, allow_simulated_tee=True),
    "strict": SIMULATED,
}


@pytest.fixture(scope="module")
def reference(small_credit):
    active, passives = small_credit
    return train_local(active, passives, PARAMS)[0]


# ---------------------------------------------------------------- the formulas

def test_weight_and_score_are_xgboosts():
    plain = SplitCriteria()
    g, h = np.array([2.0, -0.3, 0.0]), np.array([3.0, 1.0, 2.0])
    assert np.array_equal(plain.score(g, h), g * g / (h + 1.0))  # unchanged without alpha and cap
    assert np.array_equal(plain.weight(g, h), -g / (h + 1.0))
    l1 = SplitCriteria(reg_alpha=0.5)
    assert np.allclose(l1.weight(g, h), [-1.5 / 4, 0.0, 0.0])  # |G| <= alpha: no weight at all
    assert np.allclose(l1.score(g, h), [1.5**2 / 4, 0.0, 0.0])
    capped = SplitCriteria(reg_alpha=0.5, max_delta_step=0.3)
    assert np.allclose(capped.weight(g, h), [-0.3, 0.0, 0.0])
    # XGBoost's CalcGainGivenWeight at the capped weight takes the raw G
    assert np.allclose(capped.score(g, h), [-(2 * 2.0 * -0.3 + 4.0 * 0.09), 0.0, 0.0])


def test_params_resolve_into_the_criteria():
    criteria = SplitCriteria.from_params(PARAMS)
    assert (criteria.reg_alpha, criteria.max_delta_step, criteria.colsample_bytree, criteria.column_seed) == \
        (0.5, 0.3, 0.5, 3)
    assert SplitCriteria.from_params(BoostParams(objective="poisson", **SMALL)).max_delta_step == 0.7
    assert SplitCriteria.from_params(BoostParams(objective="poisson", max_delta_step=0, **SMALL)).max_delta_step == 0.0
    assert len(criteria.as_tuple()) == N_CRITERIA
    assert SplitCriteria.from_tuple(criteria.as_tuple()) == criteria


def test_a_63_bit_seed_is_bound_exactly():
    big = SplitCriteria(column_seed=2**63 - 1)
    assert SplitCriteria.from_tuple(list(big.as_tuple())) == big
    keys = np.zeros((2, 32), dtype=np.uint8)
    contexts = {em.run_context("ntee", "r", 32, 128, keys, SplitCriteria(column_seed=s).as_tuple())
                for s in (2**62, 2**62 + 1)}
    assert len(contexts) == 2  # a float would have made these one seed


@pytest.mark.parametrize("values", [
    (1.0, 1.0, 1, 0.0, 1, 0.0, 0.0, 1.0),  # one short
    (1.0, 1.0, 1, 0.0, 1, -0.1, 0.0, 1.0, 0),  # negative alpha
    (1.0, 1.0, 1, 0.0, 1, 0.0, -1.0, 1.0, 0),  # negative cap
    (1.0, 1.0, 1, 0.0, 1, 0.0, 0.0, 0.0, 0),  # no columns
    (1.0, 1.0, 1, 0.0, 1, 0.0, 0.0, 1.5, 0),
    (1.0, 1.0, 1, 0.0, 1, 0.0, 0.0, 1.0, 0.5),  # a seed that is not an integer
    (1.0, 1.0, 1, 0.0, 1, 0.0, 0.0, 1.0, 2**63),
    (1.0, 1.0, 1, 0.0, 1, 0.0, 0.0, 1.0, 10**400),
    (1.0, 1.0, 1, 0.0, 2, 0.0, 0.0, 1.0, 0),
    (1.0, 1.0, 1, 0.0, 1, float("nan"), 0.0, 1.0, 0),
])
def test_criteria_out_of_range_are_refused(values):
    with pytest.raises(ValueError):
        SplitCriteria.from_tuple(values)


# ---------------------------------------------------------------- the column sample

def test_the_column_sample_is_the_documented_draw():
    criteria = SplitCriteria(colsample_bytree=0.5, column_seed=7)
    for n in (1, 2, 5, 11):
        for party in (0, 1, 2):
            mask = sampled_features(criteria, party, 4, n)
            assert mask.dtype == bool and mask.sum() == max(1, int(0.5 * n))
            expected = np.zeros(n, dtype=bool)
            expected[np.random.default_rng([7, party, 4]).choice(n, mask.sum(), replace=False)] = True
            assert np.array_equal(mask, expected)
    masks = [tuple(sampled_features(criteria, 1, tree, 10)) for tree in range(10)]
    assert len(set(masks)) > 1, "the sample must change from tree to tree"
    assert masks == [tuple(sampled_features(criteria, 1, tree, 10)) for tree in range(10)]  # deterministic
    other_seed = replace(criteria, column_seed=8)
    assert masks != [tuple(sampled_features(other_seed, 1, tree, 10)) for tree in range(10)]
    assert [tuple(sampled_features(criteria, 0, t, 10)) for t in range(10)] != masks  # per party
    assert sampled_features(SplitCriteria(), 1, 0, 4).all()
    assert sampled_features(SplitCriteria(colsample_bytree=0.01), 1, 0, 4).sum() == 1  # at least one column


def test_each_tree_splits_only_on_its_sampled_columns(small_credit, reference):
    criteria = SplitCriteria.from_params(PARAMS)
    tables = {0: reference.active.owner, **{m.index: m.owner for m in reference.passives}}
    widths = {0: len(reference.active.feature_names), **{m.index: len(m.feature_names) for m in reference.passives}}
    used = set()
    for index, tree in enumerate(reference.active.ensemble.trees):
        for node in range(tree.n_nodes):
            if tree.is_leaf(node):
                continue
            party = tree.party[node]
            feature = tables[party].get(tree.record[node]).feature
            assert sampled_features(criteria, party, index, widths[party])[feature], (index, party, feature)
            used.add((party, feature))
    assert {p for p, _ in used} == {0, 1}, "both parties must own splits, or the test proves nothing"


def test_the_parameters_change_the_model(small_credit, reference):
    active, passives = small_credit
    for change in ({"reg_alpha": 0.0}, {"max_delta_step": 0.0}, {"colsample_bytree": 1.0}):
        other, _ = train_local(active, passives, PARAMS.replace(**change))
        assert federated_descriptions(other) != federated_descriptions(reference), change


# ---------------------------------------------------------------- every protocol, and central

@pytest.mark.parametrize("protocol", list(OPTIONS))
def test_every_protocol_grows_plains_trees(small_credit, reference, protocol):
    active, passives = small_credit
    model, _ = train_local(active, passives, PARAMS, protocol.removesuffix("-bins-once"), options=OPTIONS[protocol])
    statistics = protocol != "strict"  # strict publishes no gains or node sizes
    assert federated_descriptions(model, statistics) == federated_descriptions(reference, statistics)
    features = [p.features for p in passives]
    assert np.array_equal(model.predict(active.features, features), reference.predict(active.features, features))


def central(active, passives, params, objective, n_classes=2):
    features = np.hstack([active.features, *[p.features for p in passives]])
    names = list(active.feature_names) + [n for p in passives for n in p.feature_names]
    widths = [len(active.feature_names)] + [len(p.feature_names) for p in passives]
    ensemble, owner = train_central(features, active.labels, params, objective, n_classes, party_features=widths)
    prediction = ensemble.predict(features.shape[0], LocalOracle(owner, features))
    return split_descriptions(ensemble, {0: (owner, names)}), prediction


def test_plain_equals_central_with_per_party_samples(small_credit, reference):
    active, passives = small_credit
    trees, prediction = central(active, passives, PARAMS, "binary")
    assert federated_descriptions(reference) == trees
    assert np.array_equal(reference.predict(active.features, [p.features for p in passives]), prediction)


def test_three_passive_parties_multiclass_equals_central(credit_frame):
    frame = credit_frame.iloc[:2000].copy()
    frame["risk_class"] = pd.cut(frame["DebtRatio"].rank(pct=True), [0, 0.3, 0.7, 1.0], labels=False)
    frame = frame.drop(columns=["SeriousDlqin2yrs", "DebtRatio"])
    groups = [["age", "MonthlyIncome", "NumberOfDependents"], ["NumberOfOpenCreditLinesAndLoans"],
              ["NumberRealEstateLoansOrLines", "NumberOfTimes90DaysLate"]]
    active, passives = split_columns(frame, groups, label="risk_class", id_column="id")
    params = BoostParams(n_trees=3, max_depth=3, subsample=0.9, colsample_bytree=0.6, reg_alpha=0.2,
                         max_delta_step=0.8, random_state=11, max_bin=32)
    model, _ = train_local(active, passives, params)
    trees, prediction = central(active, passives, params, "multiclass", 3)
    assert federated_descriptions(model) == trees
    assert np.array_equal(model.predict(active.features, [p.features for p in passives]), prediction)


def test_central_refuses_party_widths_that_do_not_add_up():
    with pytest.raises(ValueError, match="do not add up"):
        train_central(np.zeros((10, 3)), np.arange(10) % 2, BoostParams(n_trees=1, max_depth=3, subsample=0.8, max_bin=32), "binary", party_features=[1, 1])


# ---------------------------------------------------------------- against XGBoost

@pytest.mark.parametrize("objective, xgb_objective", [("binary", "binary:logistic"),
                                                      ("regression", "reg:squarederror")])
@pytest.mark.parametrize("alpha, delta", [(1.0, 0.5), (1.0, 0.0), (0.0, 0.5), (5.0, 0.3)])
def test_predictions_equal_xgboost_hist(objective, xgb_objective, alpha, delta):
    x, y, (active, passives) = _integer_table(objective)
    params = BoostParams(n_trees=4, max_depth=2, learning_rate=0.3, subsample=1.0, max_bin=32, reg_alpha=alpha,
                         max_delta_step=delta, objective=objective)
    model, _ = train_local(active, passives, params)
    ours = model.predict(active.features, [p.features for p in passives])
    booster = xgb.train({"objective": xgb_objective, "max_depth": 2, "eta": 0.3, "reg_lambda": 1.0, "alpha": alpha,
                         "max_delta_step": delta, "min_child_weight": 1.0, "max_bin": 32, "tree_method": "hist",
                         "subsample": 1.0, "nthread": 1, "base_score": float(np.mean(y))},
                        xgb.DMatrix(x, label=y), params.n_trees)
    theirs = booster.predict(xgb.DMatrix(x))
    assert np.abs(ours - theirs).max() < 1e-5  # float32 and fixed-point gradients only
    default, _ = train_local(active, passives, params.replace(reg_alpha=0.0, max_delta_step=0.0))
    assert np.abs(default.predict(active.features, [p.features for p in passives]) - ours).max() > 1e-3


# ---------------------------------------------------------------- the attested values

@pytest.mark.parametrize("protocol", ["ntee", "strict"])
@pytest.mark.parametrize("change", [{"colsample_bytree": 1.0}, {"column_seed": 4}, {"reg_alpha": 0.0},
                                    {"max_delta_step": 0.0}])
def test_a_passive_host_cannot_change_its_enclaves_sample_or_regularisation(monkeypatch, small_credit, protocol,
                                                                             change):
    """A passive host that gets its enclave to score all its columns (or another sample)
    would win nodes the run's sample excludes: the criteria are part of the run context."""
    from teeboost.protocols.ntee import hosts as ntee

    original = ntee.init_message

    def rogue(protocol, role, party, criteria, max_bin, env, run_id):
        if role == "passive":
            criteria = replace(criteria, **change)
        return original(protocol, role, party, criteria, max_bin, env, run_id)

    monkeypatch.setattr(ntee, "init_message", rogue)
    active, passives = small_credit
    with pytest.raises(AttestationError):
        train_local(active, passives, PARAMS.replace(n_trees=1), protocol, options=SIMULATED)


def test_onetee_active_host_cannot_tell_passives_another_sample(monkeypatch, small_credit):
    """1-TEE: the passive parties attest the active enclave against the criteria the host
    names; naming others than its enclave was given fails attestation."""
    from teeboost.protocols.onetee import hosts as onetee

    original = onetee.criteria_tuple
    monkeypatch.setattr(onetee, "criteria_tuple",
                        lambda criteria: original(replace(criteria, colsample_bytree=1.0)))
    active, passives = small_credit
    with pytest.raises(ProtocolError, match="AttestationError: remote attestation failed"):  # the passive refuses
        train_local(active, passives, PARAMS.replace(n_trees=1), "onetee", options=SIMULATED)


def test_enclave_refuses_out_of_range_sampling():
    from teeboost.protocols.env import enclave_code, init_message

    from .test_malicious_host import Federation

    federation = Federation()
    env = federation.env(0)
    for criteria in (SplitCriteria(colsample_bytree=0.0), SplitCriteria(colsample_bytree=1.5),
                     SplitCriteria(reg_alpha=-1.0), SplitCriteria(max_delta_step=float("nan"))):
        with env.backend().load(enclave_code("teeboost.protocols.onetee.enclave.program", env.trusted_roots, env.options)) as enclave:
            with pytest.raises(ProtocolError, match="out of range"):
                enclave.ecall("init", init_message("onetee", "active", 0, criteria, 32, env, "r"))
