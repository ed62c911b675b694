"""Sample weights: what they mean (duplicated rows, dropped rows, scale_pos_weight), that every
protocol grows plain's trees with them, that bad ones are named, and that SecureBoost's
passive party never receives them in the clear."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from teeboost.config import BoostParams, ProtocolOptions
from teeboost.core.gradients import EncodedGradients
from teeboost.core.loss import Logistic
from teeboost.data import DataWarning, PartyData, split_columns
from teeboost.errors import ConfigError, DataError
from teeboost.federation import build_passive, train_active, train_local
from teeboost.metrics import evaluate
from teeboost.protocols.env import ProtocolEnv
from teeboost.protocols.scoring.secureboost import EncryptedGradients
from teeboost.row_matching import match_rows
from teeboost.transport import inmemory, serde
from teeboost.transport.inmemory import InMemoryChannel

from .helpers import federated_descriptions

SMALL_KEY = ProtocolOptions(key_bits=768, insecure_key_bits=True, crypto_workers=1)
SIMULATED = ProtocolOptions(allow_simulated_tee=True)
PARAMS = BoostParams(n_trees=3, max_depth=3, subsample=1.0, max_bin=32)


def _frame(n=1200, seed=0, objective="binary"):
    """Integer features (8 values each, so every value is its own bin whichever rows are
    kept or repeated) at two parties."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 8, size=(n, 5)).astype(float)
    signal = 0.4 * x[:, 0] - 0.3 * x[:, 3] + 0.2 * x[:, 4] + rng.normal(size=n)
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(5)])
    frame["id"] = [f"c{i}" for i in range(n)]
    if objective == "binary":
        frame["y"] = (signal > np.median(signal)).astype(float)
    elif objective == "multiclass":
        frame["y"] = np.digitize(signal, np.quantile(signal, [1 / 3, 2 / 3])).astype(float)
    else:  # poisson
        frame["y"] = rng.poisson(np.exp(0.1 * signal)).astype(float)
    return frame


def _parties(frame):
    return split_columns(frame, [["f3", "f4"]], label="y", id_column="id")


def _structure(model):
    """Splits (column, threshold, missing side) and leaf values, without node statistics."""
    return federated_descriptions(model, statistics=False)


def _close(a, b, tolerance=1e-9):
    """Same splits everywhere; leaf values equal within ``tolerance`` (fixed-point precision
    is chosen per tree from the largest gradient and the row count, which duplication and
    weighting change by a bit)."""
    assert len(a) == len(b)
    for (out_a, nodes_a), (out_b, nodes_b) in zip(a, b):
        assert out_a == out_b and len(nodes_a) == len(nodes_b)
        for x, y in zip(nodes_a, nodes_b):
            if x[0] == "leaf":
                assert y[0] == "leaf" and abs(x[1] - y[1]) <= tolerance
            else:
                assert x == y


def _predict(model, active, passives):
    return model.predict(active.features, [p.features for p in passives])


@pytest.mark.parametrize("objective", ["binary", "multiclass", "poisson"])
def test_integer_weights_equal_duplicated_rows(objective):
    active, passives = _parties(_frame(objective=objective))
    weights = np.random.default_rng(1).integers(1, 4, active.n_rows).astype(float)
    params = PARAMS.replace(objective=objective)
    weighted, _ = train_local(active, passives, params, sample_weight=weights)
    repeat = np.repeat(np.arange(active.n_rows), weights.astype(int))
    ids = np.array([f"r{i}" for i in range(repeat.size)], dtype=object)  # repeated rows need ids of their own
    copies = [replace(p.take(repeat), ids=ids) for p in [active, *passives]]
    duplicated, _ = train_local(copies[0], copies[1:], params)
    _close(_structure(weighted), _structure(duplicated))
    assert np.allclose(_predict(weighted, active, passives), _predict(duplicated, active, passives),
                       rtol=0, atol=1e-9)
    unweighted, _ = train_local(active, passives, params)
    assert not np.allclose(_predict(weighted, active, passives), _predict(unweighted, active, passives))


def test_zero_weights_equal_dropping_the_rows():
    active, passives = _parties(_frame())
    rng = np.random.default_rng(2)
    weights = np.where(rng.random(active.n_rows) < 0.25, 0.0, 1.0)
    weights[weights > 0] = rng.integers(1, 3, int((weights > 0).sum()))
    kept = np.flatnonzero(weights > 0)
    with_zeros, _ = train_local(active, passives, PARAMS, sample_weight=weights)
    dropped, _ = train_local(active.take(kept), [p.take(kept) for p in passives], PARAMS,
                             sample_weight=weights[kept])
    _close(_structure(with_zeros), _structure(dropped))
    assert np.allclose(_predict(with_zeros, active, passives), _predict(dropped, active, passives), rtol=0, atol=1e-9)


def test_scale_pos_weight_equals_weighting_the_positive_rows_by_it():
    active, passives = _parties(_frame())
    positive = active.labels == 1
    scaled, _ = train_local(active, passives, PARAMS.replace(scale_pos_weight=3.0))
    weighted, _ = train_local(active, passives, PARAMS, sample_weight=np.where(positive, 3.0, 1.0))
    assert federated_descriptions(scaled) == federated_descriptions(weighted)
    # on top of sample weights: the product
    weights = np.random.default_rng(3).random(active.n_rows) + 0.5
    both, _ = train_local(active, passives, PARAMS.replace(scale_pos_weight=3.0), sample_weight=weights)
    product, _ = train_local(active, passives, PARAMS, sample_weight=weights * np.where(positive, 3.0, 1.0))
    assert federated_descriptions(both) == federated_descriptions(product)
    assert np.array_equal(_predict(both, active, passives), _predict(product, active, passives))
    # the base margin is the weighted positive rate
    assert scaled.active.ensemble.base_margin == pytest.approx(
        Logistic().base_margin(active.labels.astype(float), np.where(positive, 3.0, 1.0)))


def test_scale_pos_weight_of_an_inferred_multiclass_run_is_refused():
    active, passives = _parties(_frame(objective="multiclass"))
    with pytest.raises(ConfigError, match="scale_pos_weight=2.0 applies to binary"):
        train_local(active, passives, PARAMS.replace(scale_pos_weight=2.0))


@pytest.fixture(scope="module")
def weighted_reference(small_credit):
    active, passives = small_credit
    rng = np.random.default_rng(4)
    weights = np.round(rng.random(active.n_rows) * 3, 3)
    weights[rng.random(active.n_rows) < 0.1] = 0.0
    params = BoostParams(n_trees=3, max_depth=3, scale_pos_weight=2.5, subsample=0.8, max_bin=32)
    model, _ = train_local(active, passives, params, sample_weight=weights)
    return weights, params, model


@pytest.mark.parametrize("protocol, options", [
    ("secureboost", SMALL_KEY), ("ntee", SIMULATED), ("onetee", SIMULATED),
    ("onetee", ProtocolOptions(onetee_bins_once=True, allow_simulated_tee=True)), ("strict", SIMULATED),
], ids=["secureboost", "ntee", "onetee", "onetee-bins-once", "strict"])
def test_every_protocol_grows_plains_trees_with_weights(small_credit, weighted_reference, protocol, options):
    active, passives = small_credit
    weights, params, reference = weighted_reference
    model, _ = train_local(active, passives, params, protocol, options=options, sample_weight=weights)
    statistics = protocol != "strict"  # strict publishes no gains or node sizes
    assert federated_descriptions(model, statistics) == federated_descriptions(reference, statistics)
    assert np.array_equal(_predict(model, active, passives), _predict(reference, active, passives))


def test_weighted_validation_in_strict_stops_where_plain_does(small_credit):
    """Validation weights weight the metrics early stopping watches, in plain and inside the
    strict enclave alike (which publishes none of them)."""
    active, passives = small_credit
    rng = np.random.default_rng(5)
    train, valid = np.arange(2400), np.arange(2400, 3000)
    v_active = active.take(valid).with_weights(rng.random(valid.size) * 4)
    params = BoostParams(n_trees=10, max_depth=4, learning_rate=0.9, early_stopping_rounds=2,
                         eval_metric=("auc", "logloss"), subsample=0.8, max_bin=32)
    data = (active.take(train), [p.take(train) for p in passives])
    weights = rng.random(train.size) + 0.5
    validation = (v_active, [p.take(valid) for p in passives])
    plain, run = train_local(*data, params, validation=validation, sample_weight=weights)
    strict, _ = train_local(*data, params, "strict", options=SIMULATED, validation=validation, sample_weight=weights)
    assert federated_descriptions(strict, False) == federated_descriptions(plain, False)
    assert run.best_iteration == strict.active.ensemble.best_round
    prediction = _predict(plain, v_active, validation[1])
    final = run.evals_result["validation_0"]["logloss"][run.best_iteration]
    assert final == pytest.approx(evaluate("logloss", v_active.labels, prediction, v_active.weights), rel=1e-12)
    assert final != pytest.approx(evaluate("logloss", v_active.labels, prediction), rel=1e-6)


def test_secureboost_passive_never_receives_the_weights_in_the_clear(monkeypatch, small_credit):
    active, passives = small_credit
    rows = np.arange(800)
    active, passives = active.take(rows), [p.take(rows) for p in passives]
    weights = 0.5 + np.random.default_rng(6).random(rows.size) * 2  # distinctive, none zero
    received = []
    original = inmemory.answer_frame

    def answer(handler, frame):
        received.append(frame)
        return original(handler, frame)

    monkeypatch.setattr(inmemory, "answer_frame", answer)
    params = BoostParams(n_trees=2, max_depth=2, subsample=1.0, max_bin=32)
    train_local(active, passives, params, "secureboost", options=SMALL_KEY, sample_weight=weights)
    messages = [serde.decode(frame) for frame in received]
    assert any(isinstance(m, EncryptedGradients) for m in messages)
    # neither the weights nor the first tree's weighted fixed-point gradients, in any form
    y = active.labels.astype(float)
    margin = np.tile(Logistic().base_margin(y, weights), (y.size, 1))
    g, h = Logistic().gradients(y, margin)
    encoded = EncodedGradients.encode(g[:, 0] * weights, h[:, 0] * weights, np.arange(y.size), y.size)
    secrets = [weights.astype("<f8"), weights.astype("<f4"), encoded.g.astype("<i8"), encoded.h.astype("<i8")]
    for frame in received:
        for values in secrets:
            found = sum(value.tobytes() in frame for value in values[:200])
            # 8-byte values never occur by chance; a 4-byte one can, in a frame of random
            # ciphertext (about 1 in 20 runs): weights sent in the clear would show all 200
            assert found == 0 if values.dtype.itemsize == 8 else found <= 2, (values.dtype, found)
    for message in messages:
        for value in vars(message).values():
            if isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.size >= 10:
                assert not np.isin(np.round(weights, 12), np.round(value.ravel(), 12)).any()


def test_train_active_takes_weights_of_its_rows(small_credit):
    active, passives = small_credit
    weights = np.random.default_rng(7).random(active.n_rows) + 0.1
    reference, _ = train_local(active, passives, PARAMS, sample_weight=weights)
    party = build_passive(1, passives[0], PARAMS, "plain", ProtocolEnv())
    try:
        model, _ = train_active(active, InMemoryChannel({1: party.handle}), PARAMS, "plain", env=ProtocolEnv(),
                                party_names={1: party.name}, sample_weight=weights)
    finally:
        party.close()
    assert np.array_equal(model.ensemble.base_margin, reference.active.ensemble.base_margin)
    assert [t.value for t in model.ensemble.trees] == [t.value for t in reference.active.ensemble.trees]


def test_weights_follow_their_rows_when_ids_are_matched():
    frame = _frame(n=600)
    active, (passive,) = _parties(frame)
    weights = np.random.default_rng(8).random(active.n_rows) + 0.5
    # the passive party holds a subset of the ids, in another order
    subset = np.random.default_rng(9).permutation(active.n_rows)[:500]
    with pytest.warns(DataWarning, match="500 rows have ids held by every party"):
        model, _ = train_local(active, [passive.take(subset)], PARAMS, sample_weight=weights)
    kept = np.sort(subset)
    reference, _ = train_local(active.take(kept), [passive.take(kept)], PARAMS, sample_weight=weights[kept])
    assert federated_descriptions(model) == federated_descriptions(reference)
    with pytest.warns(DataWarning):
        matched, _ = match_rows(active.with_weights(weights), [passive.take(subset)])
    assert np.array_equal(matched.weights, weights[kept])


def test_weight_column_of_a_csv_becomes_the_weights(tmp_path):
    frame = _frame(n=300)
    weights = np.random.default_rng(10).random(300) + 0.5
    frame["w"] = weights
    path = tmp_path / "active.csv"
    frame[["id", "f0", "f1", "f2", "w", "y"]].to_csv(path, index=False)
    active = PartyData.from_csv(path, id_column="id", label="y", weight_column="w")
    assert active.feature_names == ("f0", "f1", "f2")
    assert np.allclose(active.weights, weights)
    joined, _ = split_columns(frame, [["f3", "f4"]], label="y", id_column="id", weight_column="w")
    assert "w" not in joined.feature_names and np.array_equal(joined.weights, active.weights)
    passive = PartyData.from_frame(frame[["id", "f3", "f4"]], id_column="id")
    from_file, _ = train_local(active, [passive], PARAMS)
    unweighted = PartyData.from_frame(frame[["id", "f0", "f1", "f2", "y"]], id_column="id", label="y")
    given, _ = train_local(unweighted, [passive], PARAMS, sample_weight=active.weights)
    assert federated_descriptions(from_file) == federated_descriptions(given)


@pytest.mark.parametrize("weights, match", [
    (np.ones(5), r"sample_weight has 5 value\(s\) for 300 row\(s\)"),
    (np.r_[np.ones(299), -2.0], r"negative value -2.0 in data row 300"),
    (np.r_[np.ones(10), np.nan, np.ones(289)], r"non-finite value nan in data row 11"),
    (np.r_[np.inf, np.ones(299)], r"non-finite value inf in data row 1"),
    (np.zeros(300), r"every sample_weight is zero"),
    (["a"] * 300, r"sample_weight must be numbers"),
], ids=["length", "negative", "nan", "inf", "all-zero", "text"])
def test_bad_weights_are_named(weights, match):
    active, passives = _parties(_frame(n=300))
    with pytest.raises(DataError, match=match):
        train_local(active, passives, PARAMS, sample_weight=weights)


@pytest.mark.parametrize("column, match", [
    ([1.0] * 299 + [-1.0], r"weight column 'w' has negative value -1.0 in data row 300"),
    (["1"] * 150 + ["heavy"] + ["1"] * 149, r"weight column 'w' has non-numeric value 'heavy' in data row 151"),
    ([1.0] * 7 + [np.nan] + [1.0] * 292, r"weight column 'w' is empty in data row 8"),
], ids=["negative", "text", "empty"])
def test_bad_weight_columns_are_named(tmp_path, column, match):
    frame = _frame(n=300)
    frame["w"] = column
    path = tmp_path / "bank.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(DataError, match=r"bank\.csv: " + match):
        PartyData.from_csv(path, id_column="id", label="y", weight_column="w")
    with pytest.raises(DataError, match=r"weight column 'weight' not found"):
        PartyData.from_csv(path, id_column="id", label="y", weight_column="weight")


def test_weights_given_twice_are_refused():
    active, passives = _parties(_frame(n=300))
    with pytest.raises(ConfigError, match="sample weights given twice"):
        train_local(active.with_weights(np.ones(300)), passives, PARAMS, sample_weight=np.ones(300))
