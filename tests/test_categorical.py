"""Native categorical features: category-subset splits, identical in every protocol, routed
by their owner with its own vocabulary, and unseen or rare categories handled."""

import itertools

import numpy as np
import pandas as pd
import pytest

from teeboost.categories import Vocabulary
from teeboost.config import BoostParams, ProtocolOptions
from teeboost.core.gradients import GradientCodec
from teeboost.core.split import SplitCriteria, best_splits, split_gains
from teeboost.data import PartyData
from teeboost.errors import DataError
from teeboost.estimator import VerticalBoostClassifier, party_features
from teeboost.federation import FederatedModel, train_local

from .helpers import federated_descriptions

FAST = ProtocolOptions(allow_simulated_tee=True, key_bits=512, insecure_key_bits=True)
CITIES = ["München", "Berlin", "Köln", "Hamburg", "Bonn", "Essen", "Kiel", "Ulm"]
EFFECT = {"München": 1.0, "Berlin": -1.0, "Köln": 0.8, "Hamburg": -0.7, "Bonn": 0.9, "Essen": -0.9,
          "Kiel": 0.1, "Ulm": -0.2}


def customers(n: int = 1500, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    city = rng.choice(CITIES, n)
    plan = rng.choice(["basic", "plus", "pro", "family"], n)
    x = rng.normal(size=n)
    logit = np.vectorize(EFFECT.get)(city) + (plan == "pro") * 1.0 + 0.5 * x + rng.normal(size=n) * 0.5
    frame = pd.DataFrame({"cid": [f"c{i}" for i in range(n)], "x": x, "plan": plan, "city": city,
                          "score": rng.normal(size=n), "y": (logit > 0).astype(int)})
    frame.loc[::17, "city"] = None  # missing categories
    frame.loc[5::23, "plan"] = None
    return frame


def parties(frame: pd.DataFrame) -> tuple[PartyData, list[PartyData]]:
    active = PartyData.from_frame(frame[["cid", "x", "plan", "y"]], id_column="cid", label="y", name="bank")
    passive = PartyData.from_frame(frame[["cid", "city", "score"]], id_column="cid", name="telco")
    return active, [passive]


def test_text_columns_become_categorical_with_a_frequency_vocabulary():
    active, (passive,) = parties(customers())
    assert list(active.categorical_mask) == [False, True]
    assert list(passive.categorical_mask) == [True, False]
    vocabulary = passive.vocabularies["city"]
    assert set(vocabulary.names) == set(CITIES) and not vocabulary.other
    codes = passive.features[:, 0]
    assert np.isnan(codes[::17]).all() and not np.isnan(np.delete(codes, np.arange(0, codes.size, 17))).any()


def test_rare_categories_share_other_code_and_unseen_ones_join_them():
    frame = pd.DataFrame({"c": [f"v{i % 70}" for i in range(700)] + ["v0"] * 300})
    data = PartyData.from_frame(frame, name="p")
    vocabulary = data.vocabularies["c"]
    assert vocabulary.other and len(vocabulary.names) == 61 and vocabulary.names[0] == "v0"
    assert data.features[:, 0].max() == 61  # every rare category is code 61 ("other")
    later = PartyData.from_frame(pd.DataFrame({"c": ["v0", "never-seen", None]}), name="p")
    coded = later.with_vocabularies(data.vocabularies).features[:, 0]
    assert coded[0] == 0 and coded[1] == 61 and np.isnan(coded[2])
    closed = Vocabulary(("a", "b"), other=False)  # no rare categories at training: unseen counts as missing
    assert np.isnan(closed.codes(later.with_vocabularies({"c": closed}).categorical["c"])[1])


def test_subset_split_is_the_best_over_all_subsets():
    """Sorting by gradient ratio finds the best two-way partition (Fisher 1958), checked by brute force."""
    rng = np.random.default_rng(3)
    codec = GradientCodec(16)
    criteria = SplitCriteria(min_child_weight=0.0)
    n_cat = 6
    hist = np.zeros((1, 1, 9, 3), dtype=np.int64)
    hist[0, 0, :n_cat, 0] = codec.encode(rng.normal(size=n_cat) * 20)
    hist[0, 0, :n_cat, 1] = codec.encode(rng.uniform(5, 30, size=n_cat))
    hist[0, 0, :n_cat, 2] = rng.integers(10, 50, size=n_cat)
    (best,) = best_splits(hist, np.array([n_cat]), codec, criteria, np.array([True]))
    total = hist[0, 0].sum(axis=0)
    brute = -np.inf
    for size in range(1, n_cat):
        for subset in itertools.combinations(range(n_cat), size):
            left = hist[0, 0, list(subset)].sum(axis=0)
            brute = max(brute, float(split_gains(left[None], total[None], codec, criteria)[0]))
    assert best.gain == pytest.approx(brute, rel=1e-12)
    assert 0 < best.bin < 2 ** n_cat


def test_the_split_separates_categories_by_effect_not_by_name_order():
    frame = customers(3000, seed=1)
    active, passives = parties(frame)
    model, _ = train_local(active, passives, BoostParams(n_trees=1, max_depth=1, subsample=1.0, max_bin=32))
    tree = model.active.ensemble.trees[0]
    assert tree.party[0] == 1  # the city is the strongest signal
    record = model.passives[0].owner.get(tree.record[0])
    names = set(passives[0].vocabularies["city"].describe(record.categories))
    positive = {c for c, e in EFFECT.items() if e > 0.5}
    negative = {c for c, e in EFFECT.items() if e < -0.5}
    assert positive <= names and not (negative & names) or negative <= names and not (positive & names)


@pytest.mark.parametrize("protocol", ["secureboost", "ntee", "onetee", "strict"])
def test_every_protocol_grows_plain_trees_with_categories(protocol):
    frame = customers(900, seed=2)
    active, passives = parties(frame)
    params = BoostParams(n_trees=2, max_depth=3, max_bin=5, subsample=0.8)  # 8 cities in 5 bins: the rarest share one
    plain, _ = train_local(active, passives, params)
    other, _ = train_local(active, passives, params, protocol, options=FAST)
    statistics = protocol != "strict"  # strict publishes no gains or node sizes
    assert federated_descriptions(other, statistics) == federated_descriptions(plain, statistics)
    assert any(r.categorical for _, r in plain.passives[0].owner.items())
    assert any(r.categorical for _, r in plain.active.owner.items())
    a, p = party_features(plain, active, passives)
    assert np.array_equal(other.predict(a, p), plain.predict(a, p))


def test_prediction_codes_new_data_with_the_models_vocabulary(tmp_path):
    frame = customers(1200, seed=4)
    active, passives = parties(frame)
    model = VerticalBoostClassifier(n_trees=3, max_depth=3, subsample=0.8, max_bin=32).fit(active, passives)
    expected = model.predict_proba(active, passives)
    model.save(tmp_path)
    loaded = VerticalBoostClassifier.load(tmp_path)
    # the same customers in another file: other row order, other category frequencies, one row at a time
    shuffled = frame.sample(frac=1.0, random_state=0).head(40)
    again_active, again_passives = parties(shuffled)
    proba = loaded.predict_proba(again_active, again_passives)
    rows = pd.Index(frame["cid"]).get_indexer(shuffled["cid"])
    assert np.allclose(proba, expected[rows])
    single_active, single_passives = parties(shuffled.head(1))
    assert np.allclose(loaded.predict_proba(single_active, single_passives), expected[rows[:1]])


def test_unseen_category_at_prediction_is_scored():
    frame = customers(800, seed=5)
    active, passives = parties(frame)
    model, _ = train_local(active, passives, BoostParams(n_trees=2, max_depth=2, subsample=0.8, max_bin=32))
    new = frame.head(3).copy()
    new["city"] = ["Paris", "Rom", None]
    a, p = parties(new)
    x_active, x_passive = party_features(model, a, p)
    assert np.isnan(x_passive[0][:, 0]).all()  # no "other" code in training: unseen counts as missing
    assert np.all(np.isfinite(model.predict(x_active, x_passive)))


def test_model_file_lists_each_partys_own_categories(tmp_path):
    frame = customers(600, seed=6)
    active, passives = parties(frame)
    model, _ = train_local(active, passives, BoostParams(n_trees=1, max_depth=2, subsample=0.8, max_bin=32))
    model.save(tmp_path)
    import json
    passive_file = json.loads((tmp_path / "passive-1.json").read_text())
    active_file = json.loads((tmp_path / "active.json").read_text())
    assert set(passive_file["categories"]) == {"city"} and "city" not in json.dumps(active_file["categories"])
    assert set(active_file["categories"]) == {"plan"}
    loaded = FederatedModel.load(tmp_path)
    assert loaded.passives[0].vocabularies == model.passives[0].vocabularies


def test_category_masks_out_of_range_are_refused():
    from teeboost.core.tree import OwnerTable
    from teeboost.errors import ModelFileError, ProtocolError
    from teeboost.protocols.strict.enclave.messages import go_left_by_record

    entry = {"id": 0, "feature": 0, "threshold": 0.0, "missing_left": False, "tree": 0, "categories": 1 << 62}
    with pytest.raises(ModelFileError, match="category mask"):
        OwnerTable.from_list([entry], 1)
    with pytest.raises(ProtocolError, match="category mask"):
        go_left_by_record(np.array([1]), np.array([0]), np.array([0.0]), np.array([False]), np.array([-1]),
                          np.zeros((2, 1)))


@pytest.mark.parametrize("protocol", ["plain", "strict"])
def test_a_passive_party_cannot_read_labels_from_single_row_categories(protocol):
    """The attack: a passive party gives 24 chosen rows a category each, in columns that
    follow its real features so they win nodes. Sorting by gradient ratio would put every
    y=1 row first, and its own masks would name them. Categories with fewer than
    MIN_CATEGORY_ROWS of the node's rows are never split off, so no mask names one."""
    from teeboost.data import split_columns
    from teeboost.datasets import GIVE_ME_SOME_CREDIT_LABEL, GIVE_ME_SOME_CREDIT_PASSIVE, load_give_me_some_credit

    frame = load_give_me_some_credit().head(2000).copy()
    rng = np.random.default_rng(7)
    targets = rng.permutation(len(frame))[:24 * 4].reshape(4, 24)
    probes = []
    for p, rows in enumerate(targets):
        base = frame[GIVE_ME_SOME_CREDIT_PASSIVE[p]].rank(method="first")
        column = np.array([f"g{int(v)}" if v == v else "gna" for v in pd.qcut(base, 7, labels=False)], dtype=object)
        column[rows] = [f"r{r}" for r in rows]
        frame[f"probe{p}"] = column
        probes.append(f"probe{p}")
    active, passives = split_columns(frame, [GIVE_ME_SOME_CREDIT_PASSIVE + probes], label=GIVE_ME_SOME_CREDIT_LABEL,
                                     id_column="id", categorical=probes)
    model, _ = train_local(active, passives, BoostParams(n_trees=10, max_depth=4, subsample=0.8, max_bin=32), protocol, options=FAST)
    passive = model.passives[0]
    probe_records = [r for _, r in passive.owner.items() if passive.feature_names[r.feature] in probes]
    assert probe_records  # the probes do win nodes ...
    for record in probe_records:  # ... but no single row's category is ever split off
        named = passive.vocabularies[passive.feature_names[record.feature]].describe(record.categories)
        assert not [n for n in named if n.startswith("r")], named


def test_numeric_feature_arriving_as_text_at_prediction_is_refused():
    frame = customers(600, seed=7)
    active, passives = parties(frame)
    model, _ = train_local(active, passives, BoostParams(n_trees=1, max_depth=2, subsample=0.8, max_bin=32))
    new = frame.head(10).copy()
    new["score"] = new["score"].astype(object)
    new.loc[new.index[3], "score"] = "unknown"
    a, p = parties(new)
    with pytest.raises(DataError, match="column 'score' holds text .* learnt it as numbers"):
        party_features(model, a, p)


def test_category_names_that_look_like_numbers_survive_prediction(tmp_path):
    rng = np.random.default_rng(8)
    n = 800
    code = rng.choice(["01", "02", "10", "A1"], n)
    frame = pd.DataFrame({"cid": range(n), "x": rng.normal(size=n), "branch": code,
                          "y": np.isin(code, ["01", "10"]).astype(int)})
    active = PartyData.from_frame(frame[["cid", "x", "y"]], id_column="cid", label="y", name="bank")
    passive = PartyData.from_frame(frame[["cid", "branch"]], id_column="cid", name="shop")
    model = VerticalBoostClassifier(n_trees=2, max_depth=2, subsample=0.8, max_bin=32).fit(active, [passive])
    expected = model.predict_proba(active, [passive])[:, 1]
    batch = frame[frame["branch"] != "A1"].head(30)  # every value now looks like a number
    batch[["cid", "branch"]].to_csv(tmp_path / "shop.csv", index=False)
    again = PartyData.from_csv(tmp_path / "shop.csv", id_column="cid", name="shop", categorical=["branch"])
    from_frame = PartyData.from_frame(batch[["cid", "branch"]], id_column="cid", name="shop")
    bank = PartyData.from_frame(batch[["cid", "x"]], id_column="cid", name="bank")
    rows = batch.index.to_numpy()
    assert np.allclose(model.predict_proba(bank, [again])[:, 1], expected[rows])
    assert np.allclose(model.predict_proba(bank, [from_frame])[:, 1], expected[rows])


def test_enclaves_refuse_rows_in_bins_beyond_a_features_count():
    from teeboost.core.split import bins_fit_counts

    assert bins_fit_counts(np.array([[0, 1, 32], [2, 0, 1]]), np.array([2, 3]), 32)
    assert not bins_fit_counts(np.array([[0, 2, 32], [2, 0, 1]]), np.array([2, 3]), 32)
    hist = np.zeros((1, 1, 9, 3), dtype=np.int64)
    codec = GradientCodec(16)
    hist[0, 0, :5, 0] = codec.encode(np.array([-5.0, 5.0, -4.0, 4.0, -9.0]))
    hist[0, 0, :5, 1] = codec.encode(np.full(5, 10.0))
    hist[0, 0, :5, 2] = 20
    (best,) = best_splits(hist, np.array([4]), codec, SplitCriteria(min_child_weight=0.0), np.array([True]))
    assert best.valid and best.bin < 2 ** 4  # the phantom bin 4 is never part of a mask


def test_number_coded_categories_match_however_the_batch_writes_them(tmp_path):
    """Codes learnt as '1', '2', '3' match '2.0' (pandas writes floats next to an empty cell);
    names like '01' that numbers cannot spell ask for the column to be read as text."""
    rng = np.random.default_rng(9)
    n = 600
    code = rng.choice([1, 2, 3], n)
    frame = pd.DataFrame({"cid": range(n), "x": rng.normal(size=n), "code": code, "y": (code == 2).astype(int)})
    active = PartyData.from_frame(frame[["cid", "x", "y"]], id_column="cid", label="y", name="bank")
    passive = PartyData.from_frame(frame[["cid", "code"]], id_column="cid", name="shop", categorical=["code"])
    model = VerticalBoostClassifier(n_trees=2, max_depth=2, subsample=0.8, max_bin=32).fit(active, [passive])
    expected = model.predict_proba(active, [passive])[:, 1]
    batch = frame.head(40)[["cid", "code"]].astype({"code": float})
    batch.loc[batch.index[0], "code"] = np.nan
    batch.to_csv(tmp_path / "shop.csv", index=False)
    assert "2.0" in (tmp_path / "shop.csv").read_text()
    shop = PartyData.from_csv(tmp_path / "shop.csv", id_column="cid", name="shop", categorical=["code"])
    bank = PartyData.from_frame(frame.head(40)[["cid", "x"]], id_column="cid", name="bank")
    assert np.allclose(model.predict_proba(bank, [shop])[1:, 1], expected[1:40])
    padded = frame.assign(code=[f"0{c}" for c in code])
    passive = PartyData.from_frame(padded[["cid", "code"]], id_column="cid", name="shop", categorical=["code"])
    model = VerticalBoostClassifier(n_trees=2, max_depth=2, subsample=0.8, max_bin=32).fit(active, [passive])
    as_numbers = PartyData.from_frame(frame.head(40)[["cid", "code"]], id_column="cid", name="shop")
    with pytest.raises(DataError, match="categories include '0[123]', which numbers cannot spell"):
        model.predict_proba(bank, [as_numbers])


def test_a_batch_of_mostly_unseen_categories_is_warned_about():
    from teeboost.data import DataWarning

    frame = customers(500, seed=10)
    active, passives = parties(frame)
    model, _ = train_local(active, passives, BoostParams(n_trees=1, max_depth=2, subsample=0.8, max_bin=32))
    new = frame.head(10).assign(city=["Paris"] * 8 + ["Berlin"] * 2)
    a, p = parties(new)
    with pytest.warns(DataWarning, match="8 of 10 values of column 'city' are categories the model never saw"):
        party_features(model, a, p)


@pytest.mark.parametrize("protocol", ["secureboost", "ntee", "onetee", "strict"])
def test_code_order_cuts_only_when_the_label_owner_says_so(protocol):
    frame = customers(700, seed=11)
    active, passives = parties(frame)
    params = BoostParams(n_trees=2, max_depth=3, category_subsets=False, subsample=0.8, max_bin=32)
    plain, _ = train_local(active, passives, params)
    other, _ = train_local(active, passives, params, protocol, options=FAST)
    statistics = protocol != "strict"
    assert federated_descriptions(other, statistics) == federated_descriptions(plain, statistics)
    masks = [r.categories for m in (plain.active, *plain.passives) for _, r in m.owner.items() if r.categorical]
    assert masks and all(((m + 1) & m) == 0 or m >= (1 << 30) for m in masks)  # prefixes of the code order


def test_a_passive_host_cannot_switch_its_enclave_to_subsets(monkeypatch):
    """The label owner's choice is part of the run context every quote binds."""
    from teeboost.errors import AttestationError
    from teeboost.protocols.ntee import hosts as ntee

    original = ntee.init_message

    def rogue(protocol, role, party, criteria, max_bin, env, run_id):
        if role == "passive":
            from dataclasses import replace
            criteria = replace(criteria, category_subsets=True)
        return original(protocol, role, party, criteria, max_bin, env, run_id)

    monkeypatch.setattr(ntee, "init_message", rogue)
    active, passives = parties(customers(400, seed=12))
    with pytest.raises(AttestationError):
        train_local(active, passives, BoostParams(n_trees=1, category_subsets=False, max_depth=3, subsample=0.8, max_bin=32), "ntee", options=FAST)
