"""[policy] column_sampling and sample_weights: a passive party serves runs that sample its
columns or weigh rows only if its operator allows it.

Either lets the active party aim a tree at one row of one column (docs/enclaves.md): a ground
seed puts every split of a tree on a chosen column, and zero weights on all rows but a target
and rows it knows defeat min_rows_per_node, which counts rows, not weight. Each test drives
a real ``PassiveService`` through the active party's real code, as tests/test_policy.py does.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from teeboost.config import BoostParams, ProtocolOptions
from teeboost.deploy.messages import Finish
from teeboost.core.split import N_CRITERIA, SplitCriteria
from teeboost.errors import ConfigError, ProtocolError
from teeboost.federation import train_active, train_local
from teeboost.policy import Policy, PolicyRefused
from teeboost.protocols.env import ProtocolEnv
from teeboost.transport.inmemory import InMemoryChannel

from .helpers import SMALL
from .test_policy import OPT_IN, _toml, align, entries, parties, service, setup  # noqa: F401 - fixture

SIMULATED = ProtocolOptions(allow_simulated_tee=True)
SAMPLED = BoostParams(n_trees=2, max_depth=3, colsample_bytree=0.5, random_state=3, subsample=0.8, max_bin=32)
ALLOW = "column_sampling = true\nsample_weights = true"


def _weights(n: int) -> np.ndarray:
    weights = np.round(np.random.default_rng(1).random(n) * 3, 3)
    weights[:10] = 0.0
    return weights


def _tee_service(tmp_path, policy: str):
    from teeboost.federation import _environments

    party = service(tmp_path, policy)
    envs = _environments(True, SIMULATED, 1, None)
    party.env = lambda: envs[1]
    return party, envs[0]


def _run(channel, rows, params, protocol, env=None, weights=None):
    return train_active(rows, channel, params, protocol, env=env or ProtocolEnv(), party_names={1: "telco"},
                        sample_weight=weights)


# --- the policy and the criteria

def test_the_two_keys_parse_and_default_to_refusal():
    assert (Policy().column_sampling, Policy().sample_weights) == (False, False)
    policy = Policy.from_table(_toml(ALLOW), "p.toml")
    assert policy.column_sampling and policy.sample_weights
    assert policy.to_dict()["column_sampling"] is True and policy.to_dict()["sample_weights"] is True
    for text in ("column_sampling = 1", 'sample_weights = "yes"'):
        with pytest.raises(ConfigError, match="must be true or false"):
            Policy.from_table(_toml(text), "p.toml")


def test_the_weighted_criterion_is_appended_and_bound():
    criteria = SplitCriteria(colsample_bytree=0.5, column_seed=7, weighted=True)
    values = criteria.as_tuple()
    assert len(values) == N_CRITERIA and values[9] == 1 and values[8] == 7  # older indexes stay
    assert SplitCriteria.from_tuple(values) == criteria
    with pytest.raises(ValueError, match="out of range"):
        SplitCriteria.from_tuple((*values[:9], 2, *values[10:]))
    assert SplitCriteria.rows_weighted(1.0, None, np.ones(3)) is False
    assert SplitCriteria.rows_weighted(2.0) and SplitCriteria.rows_weighted(1.0, None, np.array([1.0, 0.0]))
    assert SplitCriteria.from_params(BoostParams(), weighted=True).weighted


def test_the_active_partys_own_policy_does_not_refuse_its_own_sample_or_weights():
    params = BoostParams(colsample_bytree=0.5, scale_pos_weight=2.0, **SMALL)
    Policy().check_params("bank", "ntee", params, serving=False)
    with pytest.raises(PolicyRefused, match=r"\[policy\] column_sampling\).*colsample_bytree = 0.5"):
        Policy().check_params("telco", "ntee", params)


# --- refusals: at set-up (every protocol), and in the criteria enclaves are bound to

@pytest.mark.parametrize("params, rule, named", [
    (BoostParams(n_trees=1, colsample_bytree=0.5, max_depth=3, subsample=0.8, max_bin=32), "column_sampling", "colsample_bytree = 0.5"),
    (BoostParams(n_trees=1, scale_pos_weight=3.0, max_depth=3, subsample=0.8, max_bin=32), "sample_weights", "scale_pos_weight = 3.0"),
])
def test_plain_set_up_refuses_sampling_and_weights_by_default(parties, params, rule, named):
    active, tmp_path = parties
    party = service(tmp_path, OPT_IN)
    channel = InMemoryChannel({1: party.handle})
    aligned = active.take(align(channel, active))
    with pytest.raises(ProtocolError, match=rf"\[policy\] {rule}\).*{named}.*{rule} = true in \[policy\]"):
        setup(channel, aligned, params=params)
    assert entries(tmp_path, "refused")[-1]["rule"] == rule
    assert party.party is None


@pytest.mark.parametrize("protocol", ["ntee", "strict"])
def test_tee_runs_refuse_column_sampling_in_the_attested_criteria(parties, protocol):
    """Set-up promises no sampling; the run's enclaves are then bound to colsample 0.5."""
    active, tmp_path = parties
    party, env = _tee_service(tmp_path, "")
    channel = InMemoryChannel({1: party.handle})
    train_rows, _ = setup(channel, active.take(align(channel, active)), params=BoostParams(n_trees=1, max_depth=3, subsample=0.8, max_bin=32),
                          protocol=protocol)
    with pytest.raises(ProtocolError, match=r"\[policy\] column_sampling\).*colsample_bytree = 0.5"):
        _run(channel, train_rows, SAMPLED.replace(n_trees=1), protocol, env)
    party.close()


@pytest.mark.parametrize("protocol", ["ntee", "strict"])
def test_tee_runs_refuse_weighted_criteria(parties, protocol):
    """Sample weights are not in the set-up's parameters: the attested criteria say so."""
    active, tmp_path = parties
    party, env = _tee_service(tmp_path, "")
    channel = InMemoryChannel({1: party.handle})
    params = BoostParams(n_trees=1, max_depth=3, subsample=0.8, max_bin=32)
    train_rows, _ = setup(channel, active.take(align(channel, active)), params=params, protocol=protocol)
    with pytest.raises(ProtocolError, match=r"\[policy\] sample_weights\).*weighs rows"):
        _run(channel, train_rows, params, protocol, env, weights=_weights(train_rows.n_rows))
    party.close()


def test_runs_the_policy_allows_grow_plains_trees(parties):
    active, tmp_path = parties
    party, env = _tee_service(tmp_path, f"{OPT_IN}\n{ALLOW}")
    channel = InMemoryChannel({1: party.handle})
    aligned = active.take(align(channel, active))
    leaves = {}
    for protocol in ("plain", "ntee", "strict"):
        train_rows, _ = setup(channel, aligned, params=SAMPLED, protocol=protocol, run_id=f"run-{protocol}")
        model, _ = _run(channel, train_rows, SAMPLED, protocol, env, weights=_weights(train_rows.n_rows))
        channel.request_all({1: Finish(protocol)})  # one live run at a time: the next is set up after this
        trees = model.ensemble.trees
        assert len(trees) == 2
        leaves[protocol] = [[(t.party[n], t.value[n]) if t.is_leaf(n) else t.party[n] for n in range(t.n_nodes)]
                            for t in trees]
    assert leaves["ntee"] == leaves["plain"] == leaves["strict"]
    party.close()


# --- strict: the active host cannot attest "unweighted" and weigh rows in its enclave

@pytest.mark.parametrize("weighting", ["sample_weight", "scale_pos_weight"])
def test_strict_enclave_refuses_weights_its_host_attested_away(monkeypatch, small_credit, weighting):
    """The host tells its enclave (and so every passive party) weighted=False, then loads
    weights: the enclave derives the flag from what it was loaded with and refuses."""
    from teeboost.protocols.strict import hosts as strict

    original = strict.attest_enclaves

    def lying(program, protocol, channel, criteria, *rest):
        return original(program, protocol, channel, replace(criteria, weighted=False), *rest)

    monkeypatch.setattr(strict, "attest_enclaves", lying)
    active, passives = small_credit
    params = BoostParams(n_trees=1, max_depth=2, subsample=0.8, max_bin=32)
    if weighting == "scale_pos_weight":
        params, weights = params.replace(scale_pos_weight=2.0), None
    else:
        weights = _weights(active.n_rows)
    with pytest.raises(ProtocolError, match="attested for an unweighted run"):
        train_local(active, passives, params, "strict", options=SIMULATED, sample_weight=weights)
