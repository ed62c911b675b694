"""The README's Python example, run verbatim as a script without a main guard, per protocol."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    (example,) = [b for b in blocks if "VerticalBoostClassifier(" in b and "PartyData.from_frame" in b]
    return example


# secureboost's run (17 s, 2048-bit Paillier) is a scale run: a script without a main guard using
# crypto workers runs in CI in tests/test_workers.py, and this example with the four others
@pytest.mark.parametrize("protocol", ["plain", pytest.param("secureboost", marks=pytest.mark.slow), "ntee", "onetee",
                                      "strict"])
def test_readme_example_runs_as_a_script_without_main_guard(tmp_path, protocol):
    example = readme_example()
    assert 'protocol="plain"' in example and "__main__" not in example
    script = tmp_path / "example.py"
    script.write_text('print("script body ran", flush=True)\n' + example.replace('protocol="plain"',
                                                                                  f'protocol="{protocol}"'))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert done.stdout.count("script body ran") == 1  # no worker or enclave re-ran the script
    assert (tmp_path / "model" / "active.json").is_file() and (tmp_path / "model" / "passive-1.json").is_file()


def test_readme_scikit_learn_example_runs(tmp_path):
    """cross_val_score, GridSearchCV, importances, save and load: the README block, verbatim."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    (example,) = [b for b in blocks if "cross_val_score(" in b]
    assert "GridSearchCV(" in example
    script = tmp_path / "sklearn_example.py"
    script.write_text(example)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    scores = [float(v) for v in lines[0].strip("[]").split()]
    assert len(scores) == 3 and all(0.75 < s < 1 for s in scores)
    assert "max_depth" in lines[1] and "reg_alpha" in lines[1]
    assert (tmp_path / "credit-model" / "active.json").is_file()
