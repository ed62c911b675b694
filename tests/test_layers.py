"""The house's layers, enforced (issue #33; docs/architecture.md).

The import contracts in ``pyproject.toml`` ([tool.importlinter]) hold; a copy of the package with
one import added the wrong way breaks them (so this test can fail); what each enclave program
measures is exactly its ``enclave/`` packages plus the ground; and modules stay small.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from teeboost.tee.code import import_closure, module_source

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")

#: Modules allowed above 600 lines, and why.
LONG_MODULES: dict[str, str] = {}


def lint(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"})


def test_the_import_contracts_hold():
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "4 kept, 0 broken" in result.stdout


@pytest.mark.parametrize("wrong_way", [
    ("core/split.py", "import teeboost.parties.active", "The ground"),
    ("tee/sealing.py", "import teeboost.protocols.strict.hosts", "The ground"),
    ("protocols/strict/enclave/ledger.py", "import teeboost.protocols.strict.hosts", "What runs inside an enclave"),
    ("protocols/ntee/hosts.py", "import teeboost.parties.passive", "Protocols import no party"),
    ("serving/registry.py", "import teeboost.cli.serve", "The scoring service imports no command"),
    ("core/split.py", "import teeboost.serving.app", "The ground"),
])
def test_an_import_the_wrong_way_breaks_a_contract(tmp_path, wrong_way):
    module, line, contract = wrong_way
    shutil.copytree(ROOT / "teeboost", tmp_path / "teeboost", ignore=shutil.ignore_patterns("__pycache__", "*.csv*"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "teeboost" / module
    target.write_text(target.read_text() + f"\n{line}  # deliberate violation\n")
    result = lint(tmp_path)
    assert result.returncode == 1, result.stdout[-2000:]
    assert "BROKEN" in result.stdout and contract in result.stdout.replace("\n", " ")


@pytest.mark.parametrize("family", ["ntee", "onetee", "strict"])
def test_an_enclave_program_measures_its_enclave_packages_and_the_ground_only(family):
    measured = import_closure(module_source(f"teeboost.protocols.{family}.enclave.program"))
    protocols = {m for m in measured if m.startswith("teeboost.protocols")}
    inside = {m for m in protocols if m.startswith(("teeboost.protocols.enclave", f"teeboost.protocols.{family}.enclave"))}
    packages = {"teeboost.protocols", f"teeboost.protocols.{family}"}  # their __init__ files: docstrings only
    assert protocols - inside == packages & protocols
    for package in packages & protocols:
        assert "import" not in measured[package].decode(), f"{package}/__init__.py must stay import-free (measured)"
    above = [m for m in measured if m.startswith(("teeboost.parties", "teeboost.deploy", "teeboost.cli",
                                                  "teeboost.federation", "teeboost.compute", "teeboost.crypto"))]
    assert not above, above


def test_no_module_is_longer_than_600_lines_unless_the_house_says_why():
    long = {}
    for path in (ROOT / "teeboost").rglob("*.py"):
        lines = len(path.read_text().splitlines())
        if lines > 600:
            long[str(path.relative_to(ROOT / "teeboost"))] = lines
    assert set(long) <= set(LONG_MODULES), long
