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
