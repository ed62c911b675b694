import json

import numpy as np
import pytest

from teeboost import VerticalBoostClassifier
from teeboost.errors import ModelFileError
from teeboost.federation import FederatedModel


@pytest.fixture(scope="module")
def fitted(small_credit):
    active, passives = small_credit
    return VerticalBoostClassifier(n_trees=3, max_depth=3, subsample=0.8, max_bin=32).fit(active, passives)


def test_save_load_predicts_identically(tmp_path, fitted, small_credit):
    active, passives = small_credit
    written = fitted.save(tmp_path)
    assert sorted(p.name for p in written) == ["active.json", "passive-1.json"]
    loaded = VerticalBoostClassifier.load(tmp_path)
    assert np.array_equal(loaded.predict_proba(active, passives), fitted.predict_proba(active, passives))


def test_each_party_file_holds_only_its_own_splits(tmp_path, fitted):
    fitted.save(tmp_path)
    active = json.loads((tmp_path / "active.json").read_text())
    passive = json.loads((tmp_path / "passive-1.json").read_text())
    assert passive["role"] == "passive" and "ensemble" not in passive
    assert set(passive["features"]).isdisjoint(active["features"])
    passive_nodes = sum(1 for t in active["ensemble"]["trees"] for p in t["party"] if p == 1)
    assert passive_nodes == len(passive["records"]) > 0
    assert "threshold" not in json.dumps(active["ensemble"])


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(version=99), "version 99"),
    (lambda d: d.update(format="other"), "not a teeboost model"),
    (lambda d: d.update(role="passive"), "expected 'active'"),
    (lambda d: d["ensemble"]["trees"][0]["party"].__setitem__(0, 7), "unknown party 7"),
])
def test_corrupt_or_foreign_files_are_refused(tmp_path, fitted, change, message):
    fitted.save(tmp_path)
    path = tmp_path / "active.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ModelFileError, match=message):
        FederatedModel.load(tmp_path)


def test_missing_passive_file(tmp_path, fitted):
    fitted.save(tmp_path)
    (tmp_path / "passive-1.json").unlink()
    with pytest.raises(ModelFileError, match="passive-1.json: model file not found"):
        FederatedModel.load(tmp_path)
