"""Strict mode: plain's trees, and hosts that see only the schedule, fixed sizes and the model."""

from dataclasses import replace

import numpy as np
import pytest

from teeboost.config import BoostParams, ProtocolOptions
from teeboost.data import PartyData
from teeboost.errors import IntegrityError, ProtocolError
from teeboost.federation import train_local
from teeboost.protocols.messages import RouteRequest
from teeboost.protocols.ntee.hosts import SealedMessage
from teeboost.transport import inmemory, serde
from teeboost.transport.transcript import NOTE, RECEIVED, SENT, read_transcript

from .helpers import federated_descriptions

SIMULATED = ProtocolOptions(allow_simulated_tee=True)
PARAMS = BoostParams(n_trees=3, max_depth=3, subsample=0.8, max_bin=32)


def same_model(a, b) -> bool:
    return federated_descriptions(a, statistics=False) == federated_descriptions(b, statistics=False)


@pytest.mark.parametrize("params", [
    BoostParams(n_trees=3, max_depth=3, subsample=0.8, max_bin=32),
    BoostParams(n_trees=2, max_depth=5, subsample=0.6, min_samples_leaf=20, reg_lambda=3.0, max_bin=16),
    BoostParams(n_trees=2, max_depth=2, objective="regression", subsample=1.0, max_bin=32),
    BoostParams(n_trees=3, max_depth=3, reg_alpha=0.5, max_delta_step=0.3, colsample_bytree=0.5, random_state=5, subsample=0.8, max_bin=32),
], ids=["default", "deep-sampled", "regression", "xgboost-regularised"])
def test_same_trees_and_predictions_as_plain(small_credit, params):
    active, passives = small_credit
    if params.objective == "regression":  # regress on a passive-party-independent number
        active = replace(active, labels=active.features[:, 0].copy())
        active = PartyData(active.name, active.source, active.features[:, 1:], active.feature_names[1:],
                           ids=active.ids, labels=active.labels, label_name="income")
    plain, _ = train_local(active, passives, params)
    strict, run = train_local(active, passives, params, "strict", options=SIMULATED)
    assert same_model(strict, plain)
    assert any(t.party[n] == 1 for t in strict.active.ensemble.trees for n in range(t.n_nodes))
    features = [p.features for p in passives]
    assert np.array_equal(strict.predict(active.features, features), plain.predict(active.features, features))
    assert "simulated" in run.enclaves


def test_multiclass_three_parties_with_early_stopping(credit_parties):
    active, (passive,) = credit_parties
    rows, held = np.arange(2000), np.arange(2000, 2600)
    labels = np.digitize(np.nan_to_num(active.features[:, 1]), [1.0, 3.0])  # 3 classes from a column
    active = PartyData(active.name, active.source, np.delete(active.features, 1, axis=1),
                       tuple(n for i, n in enumerate(active.feature_names) if i != 1), ids=active.ids,
                       labels=labels.astype(float), label_name="band")
    parts = [PartyData(f"passive-{i}", "test", passive.features[:, cols],
                       tuple(passive.feature_names[c] for c in cols), ids=active.ids)
             for i, cols in ((1, [0, 1]), (2, [2, 3, 4]))]
    params = BoostParams(n_trees=6, max_depth=3, objective="multiclass", early_stopping_rounds=1, subsample=0.8, max_bin=32)
    validation = (active.take(held), [p.take(held) for p in parts])
    plain, plain_run = train_local(active.take(rows), [p.take(rows) for p in parts], params, validation=validation)
    strict, strict_run = train_local(active.take(rows), [p.take(rows) for p in parts], params, "strict",
                                     options=SIMULATED, validation=validation)
    assert same_model(strict, plain)  # early stopping cut the same trees, inside the enclave
    assert len(strict.active.ensemble.trees) < 6 * 3 and strict.active.ensemble.best_round is not None
    # no validation metric leaves the enclave (with validation rows of the host's choosing it is a
    # prediction oracle); plain reports it
    assert all(t.valid_metric is None for t in strict_run.trees)
    assert any(t.valid_metric is not None for t in plain_run.trees)


def test_published_model_has_no_gains_or_node_sizes(small_credit):
    active, passives = small_credit
    model, _ = train_local(active, passives, PARAMS, "strict", options=SIMULATED)
    for tree in model.active.ensemble.trees:
        assert set(tree.gain) == {0.0} and set(tree.n_rows) == {0}
    ids = [i for i, _ in model.passives[0].owner.items()]
    assert len(ids) > 1 and max(ids) > 2**40  # random ids: their order does not tell where a split sits


def wire(path):
    """Every frame a host relays or receives, as (direction, type, size, sealed label, tree)."""
    out = []
    for record in read_transcript(path):
        if record.kind == NOTE:
            continue
        msg = record.message
        out.append((record.kind, type(msg).__name__, len(serde.encode(msg)),
                    getattr(msg, "kind", None), getattr(msg, "tree", None)))
    return out


def test_every_message_a_host_sees_has_the_same_type_and_size_for_two_datasets(tmp_path, credit_parties):
    """Same shape, other people: rows 0-1999 vs 4000-5999 with labels shuffled. Early
    stopping is off (the number of trees is the model's)."""
    active, (passive,) = credit_parties
    params = BoostParams(n_trees=3, max_depth=4, subsample=0.8, max_bin=32)
    runs = []
    for k, rows in enumerate((np.arange(2000), np.arange(4000, 6000))):
        a, p = active.take(rows), passive.take(rows)
        if k:
            a = replace(a, labels=np.random.default_rng(1).permutation(a.labels))
        path = tmp_path / f"run-{k}.tbt"
        model, _ = train_local(a, [p], params, "strict", options=SIMULATED, transcript=path)
        runs.append((wire(path), model))
    (first, model_a), (second, model_b) = runs
    assert federated_descriptions(model_a, statistics=False) != federated_descriptions(model_b, statistics=False)
    assert first == second
    kinds = {(direction, name) for direction, name, *_ in first}
    assert {name for direction, name in kinds if direction == RECEIVED} <= {
        "Ack", "HelloReply", "EnclaveHelloReply", "EnclaveFinished", "SealedMessage"}
    labels = [(label, tree) for direction, name, _, label, tree in first if name == "SealedMessage" and direction == SENT]
    per_tree = [sum(1 for label, t in labels if t == tree and label == "level") for tree in range(3)]
    assert per_tree == [params.max_depth] * 3  # every tree pads to max_depth levels


def test_transcript_holds_nothing_but_sealed_records_and_the_published_trees(tmp_path, small_credit):
    active, passives = small_credit
    path = tmp_path / "run.tbt"
    train_local(active, passives, PARAMS, "strict", options=SIMULATED, transcript=path)
    records = list(read_transcript(path))
    notes = {type(r.message).__name__ for r in records if r.kind == NOTE}
    assert notes == {"RunNote", "TreeNote"}
    hello = next(r.message for r in records if type(r.message).__name__ == "HelloReply")
    assert hello.n_value_bins.size == 5 and not hello.n_value_bins.any()  # bin counts stay with the party
    for record in records:
        msg = record.message
        if isinstance(msg, SealedMessage):
            assert b"TBM1" not in bytes(msg.record)
            with pytest.raises(Exception):
                serde.decode(msg.record)


def test_passive_host_answers_no_routing_question_in_the_clear(small_credit):
    """After training the active host asks party 1 directly where training rows go."""
    active, passives = small_credit
    asked = {}
    original = inmemory.InMemoryChannel.close

    def ask_then_close(self):
        handler = self._handlers.get(1) if hasattr(self, "_handlers") else None
        if handler is not None:
            from teeboost.protocols.enclave.partition import encode_row_sets
            encodings, offsets, payload = encode_row_sets([np.arange(100)], 3000)
            try:
                handler(RouteRequest("train", 3000, np.array([1], dtype=np.int64), encodings, offsets, payload))
                asked["answered"] = True
            except ProtocolError as exc:
                asked["refused"] = str(exc)
        return original(self)

    pytest.MonkeyPatch().setattr(inmemory.InMemoryChannel, "close", ask_then_close)
    try:
        train_local(active, passives, PARAMS, "strict", options=SIMULATED)
    finally:
        pytest.MonkeyPatch().undo()
        inmemory.InMemoryChannel.close = original
    assert "strict" in asked.get("refused", ""), asked


def _edit_records(monkeypatch, label, edit):
    original = inmemory.answer_frame
    state: dict = {"seen": []}

    def answer(handler, frame):
        reply = serde.decode(original(handler, frame))
        if isinstance(reply, SealedMessage) and reply.kind == label:
            state["seen"].append(reply)
            reply = edit(reply, state)
        return serde.encode(reply)

    monkeypatch.setattr(inmemory, "answer_frame", answer)


@pytest.mark.parametrize("label", ["level", "split"])
def test_tampered_or_replayed_records_are_refused(monkeypatch, small_credit, label):
    active, passives = small_credit

    def flip(reply, state):
        data = bytearray(reply.record)
        data[-1] ^= 1
        return replace(reply, record=bytes(data))

    _edit_records(monkeypatch, label, flip)
    with pytest.raises(IntegrityError):
        train_local(active, passives, PARAMS, "strict", options=SIMULATED)
    monkeypatch.undo()
    _edit_records(monkeypatch, label, lambda r, s: replace(r, record=s["seen"][0].record) if len(s["seen"]) > 1 else r)
    with pytest.raises(IntegrityError):
        train_local(active, passives, PARAMS, "strict", options=SIMULATED)


def test_prediction_is_bound_to_the_trained_model(small_credit):
    """The active host gives its enclave a model of its own making: one tree on party 1's
    first record with leaves 0 and 1, so each margin would be that record's bit for the row.
    Party 1's enclave answers only for the model its records were released with."""
    active, passives = small_credit
    model, _ = train_local(active, passives, PARAMS, "strict", options=SIMULATED)
    features = [p.features[:200] for p in passives]
    honest = model.predict(active.features[:200], features)
    assert honest.shape == (200,)
    from teeboost.core.tree import Tree

    record = next(i for i, _ in model.passives[0].owner.items())
    crafted = Tree(left=[1, -1, -1], right=[2, -1, -1], party=[1, -1, -1], record=[record, -1, -1],
                   value=[0.0, 0.0, 1.0], gain=[0.0] * 3, n_rows=[0] * 3)
    model.active.ensemble.trees = [crafted]
    with pytest.raises(ProtocolError, match="another model"):
        model.predict(active.features[:200], features)


def test_sealed_checkpoints_have_sizes_fixed_by_the_schedule(tmp_path, credit_parties):
    """The passive host may ask its enclave for a sealed checkpoint at any time; its size must
    not count the splits its party won (red-team finding). Two datasets of one shape."""
    from teeboost.protocols.strict import hosts as strict_module

    active, (passive,) = credit_parties
    sizes = []
    original = strict_module.StrictPassive.handle

    for k, rows in enumerate((np.arange(1500), np.arange(6000, 7500))):
        seen = []

        def spy(self, msg, seen=seen):
            reply = original(self, msg)
            if isinstance(msg, SealedMessage) and msg.kind == "split":
                seen.append(len(self.sealed_state()))
            return reply

        strict_module.StrictPassive.handle = spy
        try:
            a, p = active.take(rows), passive.take(rows)
            if k:
                a = replace(a, labels=np.random.default_rng(2).permutation(a.labels))
            train_local(a, [p], BoostParams(n_trees=2, max_depth=4, subsample=0.8, max_bin=32), "strict", options=SIMULATED)
        finally:
            strict_module.StrictPassive.handle = original
        sizes.append(seen)
    assert sizes[0] == sizes[1] and len(set(sizes[0])) > 1


def test_rows_cannot_be_moved_from_training_to_validation(small_credit):
    """The active host declares its last training rows validation rows (whose metric it would
    read): the passive enclave knows its own training rows and refuses."""
    from teeboost.protocols.strict import hosts as strict_module

    active, passives = small_credit
    original = strict_module.StrictActive.fit

    def shifted(self, labels, *args, valid_binned=None, valid_labels=None, **kwargs):
        train = self.columns.binned_by_feature
        self.columns.binned_by_feature = train[:, :-100]
        return original(self, labels[:-100], *args, valid_binned=train[:, -100:], valid_labels=labels[-100:],
                        **kwargs)

    strict_module.StrictActive.fit = shifted
    try:
        with pytest.raises(ProtocolError, match="training rows"):
            train_local(active, passives, PARAMS, "strict", options=SIMULATED)
    finally:
        strict_module.StrictActive.fit = original


def test_a_checkpoints_published_trees_are_the_published_ensembles_text_as_trees_come_change_and_go():
    """A strict checkpoint turns each finished tree into JSON once (``PublishedTrees``): its text
    is ``published_ensemble``'s, byte for byte, as trees are added, when one changes in place
    (it is turned into JSON again), and when an early stop drops the last ones."""
    import json

    from teeboost.core.model import Ensemble
    from teeboost.core.tree import Tree
    from teeboost.protocols.strict.enclave.trainer import PublishedTrees, published_ensemble

    def tree(value: float) -> Tree:
        t = Tree()
        left, right = t.add_split(0, 1, 7, 3.5)
        t.value[left], t.value[right] = value, -value
        t.cover = [2.0, 1.0, 1.0]
        return t

    ensemble = Ensemble(objective="binary", base_margin=np.array([0.25]), trees=[], classes=[0, 1], best_score=0.9)
    published = PublishedTrees()
    for value in (0.5, 0.25, 0.125):
        ensemble.trees.append(tree(value))
        assert published.text(ensemble) == json.dumps(published_ensemble(ensemble))
    ensemble.trees[1].value[1] = 9.0  # changed in place
    assert published.text(ensemble) == json.dumps(published_ensemble(ensemble))
    del ensemble.trees[2:]
    assert published.text(ensemble) == json.dumps(published_ensemble(ensemble))
    assert '"gain": [0.0, 0.0, 0.0]' in published.text(ensemble) and "0.9" not in published.text(ensemble)


def test_the_oblivious_partition_sends_each_row_where_its_positions_split_sends_it():
    """``go_left_all`` picks each position's column by arithmetic, not by index: row by row it
    agrees with the rule read straight off the split (threshold or category mask, missing to
    its default side), for positions not split here, features out of range and any dtype."""
    from teeboost.protocols.strict.enclave.oblivious import go_left_all

    rng = np.random.default_rng(5)
    for trial in range(200):
        n, n_features, width = int(rng.integers(1, 200)), int(rng.integers(1, 6)), int(rng.choice([4, 33, 257]))
        bins = rng.integers(0, width, (n_features, n)).astype(np.uint8 if width < 256 else np.uint16)
        k_max = int(rng.integers(1, 20))
        positions = rng.integers(-1, k_max, n)
        features = rng.integers(-1, n_features + 1, k_max)
        categorical = rng.random(n_features) < 0.4
        masks = np.array([categorical[f] if 0 <= f < n_features else False for f in features])
        # a threshold below the missing bin, or a mask of categories
        split_bins = np.where(masks, rng.integers(0, 2**40, k_max), rng.integers(-1, width - 1, k_max))
        default_left, mine = rng.random(k_max) < 0.5, rng.random(k_max) < 0.7
        expected = np.zeros(n, dtype=bool)
        for i, k in enumerate(positions):
            if k < 0 or not mine[k] or not 0 <= features[k] < n_features:
                continue
            value = int(bins[features[k], i])
            if value == width - 1:
                expected[i] = default_left[k]
            elif categorical[features[k]]:
                expected[i] = bool((int(split_bins[k]) >> min(value, 63)) & 1) if split_bins[k] >= 0 else False
            else:
                expected[i] = value <= split_bins[k]
        got = go_left_all(bins, positions, width - 1, features, split_bins, default_left, mine, categorical)
        assert np.array_equal(got, expected), trial


def test_strict_enclaves_score_every_split_candidate_whatever_the_bins_hold(monkeypatch):
    """The sparse split search (``core/split_sparse``) does work that follows which bins each
    node's rows fill; strict enclaves keep accesses fixed by the histogram's shape: every call
    of ``best_splits`` in their code asks for every candidate, and then the sparse search is
    never reached."""
    import ast
    from pathlib import Path

    import teeboost.core.split as split
    from teeboost.core.gradients import GradientCodec
    from teeboost.protocols.strict import enclave

    calls = []
    for path in Path(enclave.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "best_splits":
                kept = {k.arg: k.value for k in node.keywords}
                calls.append((path.name, isinstance(kept.get("every_candidate"), ast.Constant)
                              and kept["every_candidate"].value is True))
    assert len(calls) >= 2 and all(ok for _, ok in calls), calls

    def refuse(*args, **kwargs):
        raise AssertionError("the sparse search ran")

    monkeypatch.setattr(split, "best_candidates", None)
    monkeypatch.setattr(split, "best_candidates_numpy", refuse)
    hist = np.zeros((2, 1, 5, 3), dtype=np.int64)
    hist[:, 0, 1] = (4, 2, 2)
    hist[:, 0, 3] = (-4, 2, 2)
    best = split.best_splits(hist, np.array([4]), GradientCodec(0), split.SplitCriteria(min_samples_leaf=1),
                             every_candidate=True)
    assert all(b.valid for b in best)
