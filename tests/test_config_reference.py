"""``docs/configuration.md`` is the config schema's, and a key in the wrong table names its table.

The reference is generated from ``teeboost.deploy.config_schema``, which the parser reads; the
committed file must be what the generator writes now. Every key of every table, put in a table
that does not take it, is refused naming the table it belongs in (issue #35: ``[training]
scheme`` was reported as merely "unknown").
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from teeboost.compute import ComputeOptions
from teeboost.config import BoostParams, ProtocolOptions
from teeboost.deploy.config import load_config
from teeboost.deploy.config_reference import DEFAULT_PATH, main, render
from teeboost.deploy.config_schema import TABLES
from teeboost.errors import ConfigError
from teeboost.policy import Policy

ROOT = Path(__file__).resolve().parents[1]

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


def test_the_committed_reference_is_current():
    assert DEFAULT_PATH == ROOT / "docs" / "configuration.md"
    assert DEFAULT_PATH.read_text() == render(), "run: python -m teeboost.deploy.config_reference"
    assert main(["--check"]) == 0


def test_a_stale_reference_is_found(tmp_path, capsys):
    stale = tmp_path / "configuration.md"
    stale.write_text(render().replace("`key_bits`", "`key_size`"))
    assert main(["--check", str(stale)]) == 1
    assert "out of date" in capsys.readouterr().err


@pytest.mark.parametrize("table, cls", [("training", BoostParams), ("protocol", ProtocolOptions),
                                        ("compute", ComputeOptions), ("policy", Policy)])
def test_every_setting_of_a_settings_class_is_in_the_reference(table, cls):
    text = render()
    section = text.split(f"## `[{table}]`", 1)[1].split("\n## ", 1)[0]
    for f in fields(cls):
        assert f"| `{f.name}` |" in section, f"[{table}] {f.name}"


def test_the_reference_is_linked_from_the_docs_that_explain_configs():
    for doc in ("docs/architecture.md", "docs/scaling.md", "docs/hardening.md"):
        assert "configuration.md" in (ROOT / doc).read_text(), doc


def _misplaced():
    """(key, the tables it belongs in, a table that does not take it) for every key of every table."""
    cases = []
    for table in TABLES:
        for key in table.keys:
            homes = [t.name for t in TABLES if key.name in t.names()]
            wrong = next(t.name for t in TABLES if not t.array and key.name not in t.names())
            cases.append(pytest.param(key.name, homes, wrong, id=f"{table.name}.{key.name}-in-{wrong}"))
    return cases


@pytest.mark.parametrize("name, homes, wrong", _misplaced())
def test_a_key_in_the_wrong_table_names_the_table_it_belongs_in(tmp_path, name, homes, wrong):
    path = tmp_path / "active.toml"
    path.write_text(ACTIVE + f"\n[{wrong}]\n{name} = 1\n" if wrong not in ("party", "tls") else
                    ACTIVE.replace(f"[{wrong}]\n", f"[{wrong}]\n{name} = 1\n"))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    text = str(caught.value)
    assert str(path) in text and f"{name} belongs in " in text and f"not [{wrong}]" in text, text
    for home in homes:
        assert f"[{home}]" in text.split("belongs in", 1)[1], text


def test_the_reported_case_scheme_in_training(tmp_path):
    path = tmp_path / "active.toml"
    path.write_text(ACTIVE + '\n[training]\nscheme = "ou"\n')
    with pytest.raises(ConfigError, match=r"scheme belongs in \[protocol\], not \[training\]"):
        load_config(path)


@pytest.mark.parametrize("text, message", [
    ('\nscheme = "ou"\n', "scheme belongs in [protocol], not the top level"),
    ("\n[trainig]\nn_trees = 3\n", "unknown table [trainig] (did you mean [training]?)"),
    ("\n[training]\nn_tree = 3\n", "[training] has unknown field(s) n_tree (did you mean n_trees?)"),
    ('\n[[peers]]\nindex = 2\nname = "x"\naddress = "h:1"\nlisten = "h:2"\n', "listen belongs in [party] or [serving], not [peers]"),
], ids=["top-level", "table-typo", "key-typo", "peers-entry"])
def test_unknown_and_top_level_keys_are_named(tmp_path, text, message):
    path = tmp_path / "active.toml"
    body = ACTIVE.replace("[party]", text.strip() + "\n\n[party]") if text.startswith('\nscheme') else ACTIVE + text
    path.write_text(body)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert message in str(caught.value)
