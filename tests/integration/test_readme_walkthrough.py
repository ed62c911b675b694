"""The README's deployment walkthrough, executed verbatim: the bash block(s) between
``<!-- walkthrough:start -->`` and ``<!-- walkthrough:end -->`` run in an empty directory with
this environment's ``teeboost`` first on PATH, under ``set -euo pipefail``. They must end with
exit code 0, no traceback, readable reports from both parties and predictions for the new
customers. Whatever the outcome, every process the walkthrough started is stopped."""

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

README = Path(__file__).resolve().parents[2] / "README.md"


def walkthrough_script(text: str) -> str:
    section = re.search(r"<!-- walkthrough:start -->(.*?)<!-- walkthrough:end -->", text, re.S)
    assert section is not None, "README.md has no <!-- walkthrough:start --> ... <!-- walkthrough:end --> section"
    blocks = re.findall(r"```bash\n(.*?)```", section.group(1), re.S)
    assert blocks, "the walkthrough section has no ```bash block"
    return "set -euo pipefail\n" + "\n".join(blocks)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_walkthrough(workdir: Path, timeout: float = 240) -> tuple[int, str, str, float]:
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "teeboost").exists(), f"no teeboost script beside {sys.executable}"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "PORT": str(free_port())}
    out, err = workdir / "walkthrough.out", workdir / "walkthrough.err"
    started = time.monotonic()
    with out.open("w") as stdout, err.open("w") as stderr:
        # its own session, so the background passive party can be stopped with it if a step fails
        process = subprocess.Popen(["bash", "-c", walkthrough_script(README.read_text())], cwd=workdir, env=env,
                                   stdout=stdout, stderr=stderr, start_new_session=True)
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # the group this test started, and nothing else
            except ProcessLookupError:
                pass
            process.wait()
    return code, out.read_text(), err.read_text(), time.monotonic() - started


def test_readme_walkthrough_runs_verbatim(tmp_path):
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
    assert "budget: 8 bits per row per day; strict outputs at 8 bits" in out and "largest 8 bits per row" in out
    print(f"README walkthrough: {seconds:.1f} s")


def test_readme_walkthrough_run_again_in_the_same_directory_keeps_keys_and_shows_no_stale_scores(tmp_path):
    """A second run reuses every key (the tee and certs steps print or keep what is there);
    within 24 h the passive party's leakage budget refuses the new run by name, and the
    first run's predictions are gone, so nothing stale is printed or left to read."""
    code, out, err, _ = run_walkthrough(tmp_path)
    assert code == 0, err[-3000:]
    keys = {p: p.read_bytes() for p in tmp_path.glob("*/*.key")}
    assert len(keys) == 7  # the CA's, two TLS keys, two platforms, two identities
    code, out, err, seconds = run_walkthrough(tmp_path)
    assert code != 0 and "Traceback" not in out + err, err[-3000:]
    assert "an existing identity key, kept" in err and "an existing simulated platform" in err
    assert "[policy] max_bits_per_row_per_day" in err  # the refusal names the rule
    assert {p: p.read_bytes() for p in tmp_path.glob("*/*.key")} == keys
    assert not (tmp_path / "active" / "predictions.csv").exists() and "probability_1" not in out
