"""The README's deployment walkthrough, executed verbatim: the bash block(s) between
``<!-- walkthrough:start -->`` and ``<!-- walkthrough:end -->`` run in an empty directory with
this environment's ``teeboost`` first on PATH, under ``set -euo pipefail``. They must end with
exit code 0, no traceback, readable reports from both parties and predictions for the new
customers. Whatever the outcome, every process the walkthrough started is stopped.

Then the README's online scoring section (``<!-- serving:start -->`` ... ``<!-- serving:end -->``)
runs the same way in the same directory: it must print a scored answer for its customer and
stop every process it started by itself."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

README = Path(__file__).resolve().parents[2] / "README.md"


def section_script(text: str, name: str = "walkthrough") -> str:
    section = re.search(rf"<!-- {name}:start -->(.*?)<!-- {name}:end -->", text, re.S)
    assert section is not None, f"README.md has no <!-- {name}:start --> ... <!-- {name}:end --> section"
    blocks = re.findall(r"```bash\n(.*?)```", section.group(1), re.S)
    assert blocks, f"the {name} section has no ```bash block"
    return "set -euo pipefail\n" + "\n".join(blocks)


def walkthrough_script(text: str) -> str:
    return section_script(text, "walkthrough")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_section(workdir: Path, name: str = "walkthrough", timeout: float = 240) -> tuple[int, str, str, float, bool]:
    """-> exit code (None: timed out), stdout, stderr, seconds, and whether a process it started
    was still running when it ended (all are stopped here then)."""
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "teeboost").exists(), f"no teeboost script beside {sys.executable}"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "PORT": str(free_port()),
           "SERVE_PORT": str(free_port())}
    out, err = workdir / f"{name}.out", workdir / f"{name}.err"
    started = time.monotonic()
    left_running = False
    with out.open("w") as stdout, err.open("w") as stderr:
        # its own session, so the background processes can be stopped with it if a step fails
        process = subprocess.Popen(["bash", "-c", section_script(README.read_text(), name)], cwd=workdir, env=env,
                                   stdout=stdout, stderr=stderr, start_new_session=True)
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            seconds = time.monotonic() - started
            try:
                os.killpg(process.pid, 0)  # anything left of the group this test started?
                left_running = True
                os.killpg(process.pid, signal.SIGKILL)  # that group, and nothing else
            except ProcessLookupError:
                pass
            process.wait()
    return code, out.read_text(), err.read_text(), seconds, left_running


def run_walkthrough(workdir: Path, timeout: float = 240) -> tuple[int, str, str, float]:
    return run_section(workdir, "walkthrough", timeout)[:4]


def run_serving(workdir: Path) -> dict:
    """The serving section, after the walkthrough: -> the answer it printed for its customer."""
    assert shutil.which("curl"), "the README's serving section uses curl"
    code, out, err, seconds, left_running = run_section(workdir, "serving", timeout=120)
    assert code == 0, f"serving section exited with {code} after {seconds:.0f} s\n--- stdout\n{out[-3000:]}\n" \
                      f"--- stderr\n{err[-3000:]}"
    assert not left_running, "the serving section left a process running"
    assert "Traceback" not in out + err, err[-3000:]
    answers = [json.loads(line) for line in out.splitlines() if line.startswith('{"model"')]
    assert len(answers) == 1, out[-3000:]
    (row,) = answers[0]["rows"]
    assert row["status"] == "scored" and 0.0 <= row["score"] <= 1.0, row
    assert "party           passive-1 (passive 1) stopped" in out  # stopped by the section itself
    print(f"README serving section: {seconds:.1f} s")
    return row


def test_readme_walkthrough_runs_verbatim_then_again_in_the_same_directory(tmp_path):
    """The walkthrough, verbatim, then the serving section after it; then the walkthrough again
    in the same directory (one test: the second run needs the first's directory). The second
    run reuses every key (the tee and certs steps print or keep what is there); within 24 h
    the passive party's leakage budget refuses the new run by name, and the first run's
    predictions are gone, so nothing stale is printed or left to read. The serving section
    still scores its customer after either run: the model is the first run's, and the same
    customer with the same values is not charged again."""
    code, out, err, seconds = run_walkthrough(tmp_path)
    assert code == 0, f"walkthrough exited with {code} after {seconds:.0f} s\n--- stdout\n{out[-3000:]}\n--- stderr\n{err[-3000:]}"
    assert "Traceback" not in out + err, err[-3000:]
    # readable reports (not JSON) from the active party's training and the passive party's stop
    assert "held-out auc" in out and "PSI " in out and "transport       gRPC, mutual TLS" in out
    assert "party           passive-1 (passive 1) stopped" in out and "runs            1 trained (strict)" in out
    assert not any(line.startswith("{") for line in out.splitlines())
    predictions = pd.read_csv(tmp_path / "active" / "predictions.csv")
    new = pd.read_csv(tmp_path / "active" / "new.csv")
    assert "prediction" in predictions.columns and len(predictions) == len(new) > 0
    assert predictions["prediction"].notna().all()  # every new customer is held by the passive party too
    assert "refusals: 0" in out  # the passive party's audit log
    # the leakage budget: held-out rows and new customers scored once each, 8 bits per row
    assert "budget: 8 bits per row per day; strict outputs at 8 bits" in out and "(each row at most 8;" in out
    print(f"README walkthrough: {seconds:.1f} s")
    first = run_serving(tmp_path)  # the section after it: the service, one customer scored with curl

    keys = {p: p.read_bytes() for p in tmp_path.glob("*/*.key")}
    assert len(keys) == 7  # the CA's, two TLS keys, two platforms, two identities
    code, out, err, seconds = run_walkthrough(tmp_path)
    assert code != 0 and "Traceback" not in out + err, err[-3000:]
    assert "an existing identity key, kept" in err and "an existing simulated platform" in err
    assert "[policy] max_bits_per_row_per_day" in err  # the refusal names the rule
    assert {p: p.read_bytes() for p in tmp_path.glob("*/*.key")} == keys
    assert not (tmp_path / "active" / "predictions.csv").exists() and "probability_1" not in out
    assert run_serving(tmp_path) == first
