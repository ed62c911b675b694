"""``party.toml`` mistakes: one ConfigError naming the file and the field, before any network."""

import pytest

from teeboost.deploy.config import load_config
from teeboost.errors import ConfigError

GOOD = """
[party]
name = "passive-1"
role = "passive"
index = 1
listen = "127.0.0.1:0"
data = "passive.csv"
id_column = "id"

[tls]
insecure = true
"""


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace('role = "passive"', 'role = "observer"'), "role = 'observer' must be 'active' or 'passive'"),
    (lambda t: t.replace("index = 1", "index = 0"), "index = 0 must be >= 1"),
    (lambda t: t.replace('name = "passive-1"', 'name = "passive 1/x"'), "may use letters, digits"),
    (lambda t: t + "\n[network]\ntimeout = -5\n", "[network] timeout = -5.0 is out of range"),
    (lambda t: t + "\n[network]\nretries = \"three\"\n", "retries = 'three' must be int"),
    (lambda t: t + "\n[protocol]\nkey_size = 2048\n", "[protocol] has unknown field(s) key_size"),
    (lambda t: t.replace("[party]", "[party\n"), "not valid TOML"),
    (lambda t: t.replace('id_column = "id"\n', ""), "[party] needs 'id_column'"),
], ids=["role", "index", "name", "timeout", "retries-type", "protocol-field", "toml", "missing-field"])
def test_bad_party_config_names_file_and_field(tmp_path, edit, message):
    path = tmp_path / "passive.toml"
    path.write_text(edit(GOOD))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(path) in str(caught.value) and message in str(caught.value)


def test_good_config_defaults_checkpoints_beside_the_model(tmp_path):
    path = tmp_path / "passive.toml"
    path.write_text(GOOD)
    config = load_config(path)
    assert config.checkpoint_dir == tmp_path / "model-passive-1" / "checkpoint"
    assert (config.retries, config.recover_timeout) == (3, 120.0)


def test_active_config_takes_xgboost_names_and_a_weight_column(tmp_path):
    path = tmp_path / "active.toml"
    path.write_text("""
[party]
name = "bank"
role = "active"
data = "active.csv"
id_column = "id"
label = "y"
weight_column = "w"

[tls]
insecure = true

[[peers]]
name = "telco"
index = 1
address = "127.0.0.1:50051"

[training]
n_estimators = 12
eta = 0.1
gamma = 0.5
colsample_bytree = 0.8
eval_metric = ["logloss", "auc"]
""")
    config = load_config(path)
    assert config.weight_column == "w"
    assert (config.params.n_trees, config.params.learning_rate, config.params.min_split_gain) == (12, 0.1, 0.5)
    assert config.params.colsample_bytree == 0.8 and config.params.eval_metric == ("logloss", "auc")
    path.write_text(path.read_text().replace("eta = 0.1", "eta = 0.1\nlearning_rate = 0.2"))
    with pytest.raises(ConfigError, match="name the same parameter"):
        load_config(path)
