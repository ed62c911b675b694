"""A test marked ``serial`` runs alone when the suite runs on two workers (tests/serial.py)."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_no_other_test_runs_while_a_serial_one_does(tmp_path):
    log = tmp_path / "intervals.jsonl"
    (tmp_path / "conftest.py").write_text("from tests.serial import pytest_runtest_protocol  # noqa: F401\n")
    (tmp_path / "test_many.py").write_text(textwrap.dedent(f"""
        import json, time
        import pytest

        def record(name):
            start = time.monotonic()
            time.sleep(0.3)
            with open({str(log)!r}, "a") as f:
                f.write(json.dumps([name, start, time.monotonic()]) + "\\n")

        @pytest.mark.parametrize("k", range(8))
        def test_shared(k):
            record(f"shared{{k}}")

        @pytest.mark.serial
        @pytest.mark.parametrize("k", range(2))
        def test_alone(k):
            record(f"alone{{k}}")
        """))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                           "-o", "addopts=", "-o", "markers=serial: alone", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    intervals = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(intervals) == 10
    shared = [(a, b) for name, a, b in intervals if name.startswith("shared")]
    overlapping_shared = any(a1 < b2 and a2 < b1 for i, (a1, b1) in enumerate(shared) for a2, b2 in shared[i + 1:])
    assert overlapping_shared  # two workers really ran at once (else the check below proves nothing)
    for name, a, b in intervals:
        if name.startswith("alone"):
            others = [(a2, b2) for n2, a2, b2 in intervals if n2 != name]
            assert not any(a < b2 and a2 < b for a2, b2 in others), (name, intervals)
