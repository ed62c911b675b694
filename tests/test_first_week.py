"""Issue #35, a user's first week: the README's opening, the licence, warnings that point at
the user's line, --help that reads the right way round, and test extras that cover the tests."""

import re
import tomllib
import warnings
from pathlib import Path

import pandas as pd
import pytest

from teeboost import PartyData, VerticalBoostClassifier
from teeboost.cli.main_parser import _all_parsers, _parser
from teeboost.config import DataWarning

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
INSTALL_AND_DEMO = "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/teeboost demo"
INSTALL_AND_TEST = "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest"


def test_the_readme_starts_with_the_two_commands_and_ci_runs_the_second():
    """The house rule: the first block sets up and runs the demo, then the whole test suite."""
    text = (ROOT / "README.md").read_text()
    first = re.search(r"```bash\n(.*?)```", text, re.S)
    assert text.index(first.group(0)) < 40  # right under the title
    assert first.group(1).splitlines() == [INSTALL_AND_DEMO, INSTALL_AND_TEST]
    assert (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1] == INSTALL_AND_TEST
    assert len(text.splitlines()) <= 250
    for needed in ("Python >= 3.11", "Chamani & Papadopoulos", "SecureBoost: A Lossless Federated Learning",
                   "[LICENSE](LICENSE)"):
        assert needed in text
    # terms are defined before the text after the opening commands uses them
    terms = text.index("## Terms")
    for term in ("Active party", "Passive party", "PSI", "Enclave", "Simulated"):
        assert f"- **{term}**" in text[terms:]
        assert term.lower() not in text[text.index("```", text.index(INSTALL_AND_TEST)):terms].lower(), term


def test_the_licence_file_is_the_one_pyproject_names():
    assert PYPROJECT["project"]["license"] == {"text": "Apache-2.0"}
    licence = (ROOT / "LICENSE").read_text()
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence


def test_every_package_a_test_skips_without_is_in_the_test_extras():
    """A test skipped for a missing package is a test that never runs: its package belongs in
    the test extras (jinja2 for the Gramine manifest test was missing)."""
    distribution = {"dcap_qvl": "dcap-qvl"}
    extras = {re.split(r"[<>=;\[ ]", line, maxsplit=1)[0].lower() for line in PYPROJECT["project"]
              ["optional-dependencies"]["test"]}
    skipped = set()
    for path in (ROOT / "tests").rglob("*.py"):
        skipped |= set(re.findall(r"importorskip\(\"(\w+)\"", path.read_text()))
    assert skipped >= {"ray", "dcap_qvl", "jinja2"}
    missing = {m for m in skipped if distribution.get(m, m).lower() not in extras}
    assert not missing, f"tests skip without {missing}, which the test extras do not install"


def test_no_flag_shows_a_default_in_help():
    """``--no-precompute-randomizers`` read "do not compute ... (default: True)"; a flag is off
    unless given, so none shows a default."""
    backwards = [f"{parser.prog} {'/'.join(action.option_strings)}"
                 for parser in _all_parsers(_parser()) for action in parser._actions
                 if action.option_strings and action.nargs == 0
                 and "(default: " in parser.formatter_class("x")._get_help_string(action)]
    assert not backwards, backwards
    text = " ".join(_parser()._subparsers._group_actions[0].choices["train"].format_help().split())
    assert "--no-category-subsets" in text and "default: True" not in text


def test_data_warnings_point_at_the_callers_line():
    """The ids-intersected and dropped-column warnings name this file and the fit line, not
    teeboost's own modules, whatever path through the library raised them."""
    from teeboost.datasets import load_give_me_some_credit

    data = load_give_me_some_credit().iloc[:1500].assign(constant=1.0)
    active = PartyData.from_frame(data.drop(columns=["age", "MonthlyIncome"]), id_column="id",
                                  label="SeriousDlqin2yrs", name="bank")
    passive = [PartyData.from_frame(data[["id", "age", "MonthlyIncome"]].iloc[:1200], id_column="id", name="telco")]
    model = VerticalBoostClassifier(protocol="plain", n_trees=1, max_depth=2, subsample=0.8, max_bin=32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = _line_after()
        model.fit(active, passive)
    data_warnings = [w for w in caught if issubclass(w.category, DataWarning)]
    assert {str(w.message)[:12] for w in data_warnings} == {"aligned by i", "dropped colu"}
    assert all((w.filename, w.lineno) == (__file__, line) for w in data_warnings), \
        [(w.filename, w.lineno) for w in data_warnings]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = _line_after()
        VerticalBoostClassifier(protocol="plain", n_trees=1, max_depth=2, subsample=0.8, max_bin=32).fit(
            data.drop(columns=["id", "SeriousDlqin2yrs"]), pd.DataFrame(data[["SeriousDlqin2yrs"]]))
    assert caught and all((w.filename, w.lineno) == (__file__, line) for w in caught), \
        [(w.filename, w.lineno, str(w.message)[:40]) for w in caught]


def _line_after() -> int:
    """The line number after the caller's line: where the call under test sits."""
    import sys

    return sys._getframe(1).f_lineno + 1
