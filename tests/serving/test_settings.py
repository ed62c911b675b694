"""``[serving]`` in the active party's config, the flags over it, and what they make: errors name
the file, the table, the key and the value."""

from __future__ import annotations

from pathlib import Path

import pytest

from teeboost.cli import main
from teeboost.deploy.config import load_config
from teeboost.errors import ConfigError
from teeboost.serving.settings import model_specs, parse_listen

ACTIVE = """
[party]
name = "bank"
role = "active"
data = "active.csv"
id_column = "id"
label = "y"

[tls]
insecure = true

[[peers]]
index = 1
name = "telco"
address = "127.0.0.1:9"
"""


def config(tmp_path: Path, serving: str):
    path = tmp_path / "active.toml"
    path.write_text(ACTIVE + serving)
    return path


def test_the_serving_table_is_read_relative_to_the_config(tmp_path):
    loaded = load_config(config(tmp_path, """
[serving]
listen = "0.0.0.0:9000"
fallback_model = "credit-active"
max_rows_per_request = 50

[serving.models]
credit = ["model-v2", "model-v1"]
credit-active = "model-active"
"""))
    serving = loaded.serving
    assert parse_listen(serving.listen, "listen") == ("0.0.0.0", 9000) and serving.max_rows_per_request == 50
    assert serving.models == {"credit": (tmp_path / "model-v2", tmp_path / "model-v1"),
                              "credit-active": (tmp_path / "model-active",)}
    specs = {s.name: s for s in model_specs(serving.models, serving.fallback_model, serving.on_unmatched)}
    assert (specs["credit"].fallback, specs["credit"].on_unmatched) == ("credit-active", "fallback")
    assert (specs["credit-active"].fallback, specs["credit-active"].on_unmatched) == (None, "error")
    assert load_config(config(tmp_path, "")).serving.listen == "127.0.0.1:8080"


@pytest.mark.parametrize("serving, message", [
    ('listen = "8080"', "[serving] listen = '8080' must be 'host:port'"),
    ("max_rows_per_request = 0", "[serving] max_rows_per_request = 0 must be an integer >= 1"),
    ('on_unmatched = "ignore"', "[serving] on_unmatched = 'ignore' must be 'error' or 'fallback'"),
    ("models = 3", "[serving] models must be a table"),
    ("fallback_model = 3", "[serving] fallback_model = 3 must be a served model's name"),
    ("[serving.models]\ncredit = 3", "[serving] models.credit = 3 must be a directory"),
    ("[serving.on_unmatched]\ncredit = \"maybe\"", "[serving] on_unmatched = 'maybe' must be"),
    ("modles = {}", "[serving] has unknown field(s) modles (did you mean models?)"),
], ids=["listen", "rows", "on_unmatched", "models", "fallback", "model-dir", "policy-table", "typo"])
def test_a_wrong_serving_key_is_named(tmp_path, serving, message):
    text = serving if serving.startswith("[serving") else f"[serving]\n{serving}"
    with pytest.raises(ConfigError) as caught:
        load_config(config(tmp_path, "\n" + text + "\n"))
    assert message in str(caught.value) and str(tmp_path / "active.toml") in str(caught.value)


def test_per_model_policies_and_fallbacks():
    models = {"a": (Path("a"),), "b": (Path("b"),), "fb": (Path("fb"),)}
    specs = {s.name: s for s in model_specs(models, {"a": "fb"}, {"b": "error"})}
    assert (specs["a"].fallback, specs["a"].on_unmatched) == ("fb", "fallback")
    assert (specs["b"].fallback, specs["b"].on_unmatched) == (None, "error")
    specs = {s.name: s for s in model_specs(models, "fb", "error")}
    assert (specs["a"].fallback, specs["a"].on_unmatched) == ("fb", "error")
    with pytest.raises(ConfigError, match=r"\[serving\]: 'c' is not a served model \(served: a, b, fb\)"):
        model_specs(models, {"c": "fb"}, None)
    with pytest.raises(ConfigError, match="on_unmatched = 'fallback' needs a fallback model"):
        model_specs(models, None, "fallback")


def test_serve_runs_at_the_active_party_only(models, tmp_path, capsys):
    passive = tmp_path / "passive.toml"
    passive.write_text(ACTIVE.replace('role = "active"', 'role = "passive"').replace('label = "y"', 'index = 1\n'
                       'listen = "127.0.0.1:0"').split("[[peers]]")[0])
    assert main(["serve", "--config", str(passive)]) == 2
    assert "teeboost serve runs at the active party" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--model", "credit"], "--model 'credit' must be NAME=DIR"),
    (["--model", "a b=x"], "model name 'a b' may use letters"),
    (["--model", "credit=/nonexistent/dir"], "model 'credit': /nonexistent/dir is not a directory"),
    ([], "nothing to serve: give --model NAME=DIR"),
    (["--model", "credit=.", "--max-rows", "0"], "--max-rows 0 must be >= 1"),
], ids=["no-dir", "bad-name", "no-such-dir", "nothing", "max-rows"])
def test_wrong_flags_are_named(argv, message, capsys):
    assert main(["serve", *argv, "--port", "0"]) == 2
    assert message in capsys.readouterr().err
