"""Worker processes never run the caller's script, and fail loudly instead of hanging.

Jobs are standard-library functions on purpose: worker processes import them by name, and
they need no module of the test suite on the workers' path.
"""

import operator
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from teeboost.crypto import psi
from teeboost.crypto.pool import CryptoPool
from teeboost.crypto.schemes import generate_keypair
from teeboost.errors import ProtocolError
from teeboost.workers import WorkerError, WorkerPool

pytestmark = pytest.mark.serial  # wall-clock bounds (tests/serial.py)

MARKER = "SCRIPT BODY RAN"

# what a user writes: no `if __name__ == "__main__":` anywhere
SCRIPT = textwrap.dedent(f"""
    import sys
    print({MARKER!r}, flush=True)
    from teeboost import ProtocolOptions, VerticalBoostClassifier
    from teeboost.data import split_columns
    from teeboost.datasets import load_give_me_some_credit

    frame = load_give_me_some_credit().head(300)
    frame.insert(0, "cid", range(len(frame)))
    active, passive = split_columns(frame, [["age", "MonthlyIncome"]], label="SeriousDlqin2yrs", id_column="cid")
    options = ProtocolOptions(key_bits=512, insecure_key_bits=True, crypto_workers=2)
    model = VerticalBoostClassifier(protocol=sys.argv[1], n_trees=2, max_depth=2, subsample=0.8, max_bin=32,
                                    options=options, allow_simulated_tee=True).fit(active, passive)
    print(model.predict_proba(active, passive)[:3])
""")


def alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting for an absent parent to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def wait_until_gone(pids: list[int], seconds: float = 10.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")


# --- scripts without a main guard


def check_ran_once(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stdout.count(MARKER) == 1, result.stdout


@pytest.mark.parametrize("protocol", ["plain", "secureboost", "ntee", "onetee", "strict"])
def test_a_script_without_a_main_guard_runs_its_body_once(tmp_path, protocol):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    result = subprocess.run([sys.executable, str(script), protocol], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300)
    check_ran_once(result)


def test_a_script_read_from_standard_input_can_use_crypto_workers(tmp_path):
    result = subprocess.run([sys.executable, "-", "secureboost"], input=SCRIPT, cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    check_ran_once(result)


# --- results, errors and deaths


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(2) as workers:
        yield workers


def test_results_come_back_in_the_order_of_the_jobs(pool):
    assert pool.map(operator.mul, range(200), range(200)) == [i * i for i in range(200)]
    # the first jobs are the slowest, so later ones finish first
    exponents = [400_000 - 10_000 * i for i in range(30)]
    assert pool.map(pow, [3] * 30, exponents) == [3 ** e for e in exponents]
    assert pool.map(bytes, [3_000_000, 5]) == [bytes(3_000_000), bytes(5)]  # larger than any pipe buffer


def test_jobs_run_in_parallel_even_when_there_are_as_few_as_workers(pool):
    started = time.monotonic()
    pool.map(time.sleep, [0.6, 0.6])
    assert time.monotonic() - started < 1.1


def test_an_exception_in_a_job_reaches_the_caller_and_the_pool_stays_usable(pool):
    with pytest.raises(ValueError, match="invalid literal for int.*'x'") as raised:
        pool.map(int, ["1", "x", "2", "y"])
    assert "raised in a worker process" in raised.value.__notes__[0]
    assert pool.map(int, ["1", "2"]) == [1, 2]


def test_teeboost_errors_keep_their_type_across_processes():
    bad = np.full((4, psi.POINT_BYTES), 0xFF, dtype=np.uint8)  # not ristretto255 encodings
    jobs = [(psi.new_scalar(), bad[i:i + 2].tobytes()) for i in (0, 2)]
    with pytest.raises(ProtocolError, match="not a ristretto255 element"):
        psi._pool_map(psi._blind_chunk, jobs, 2)


def test_the_initializer_runs_once_in_every_worker_before_its_jobs(tmp_path):
    with WorkerPool(2, initializer=os.chdir, initargs=(str(tmp_path),)) as workers:
        assert workers.map(os.path.abspath, ["."] * 6) == [str(tmp_path)] * 6


def test_a_failing_initializer_is_named(tmp_path):
    missing = str(tmp_path / "missing")
    with pytest.raises(WorkerError, match="initializer .*chdir failed .*FileNotFoundError"):
        WorkerPool(2, initializer=os.chdir, initargs=(missing,))


def test_functions_of_the_main_script_are_refused_by_name(pool):
    def local(x):
        return x

    local.__module__ = "__main__"
    with pytest.raises(WorkerError, match="defined in the main script"):
        pool.map(local, [1])


def test_printing_in_a_job_goes_to_standard_error_not_into_the_replies(capfd):
    with WorkerPool(2) as workers:  # started under capfd, so their standard error is captured
        assert workers.map(print, ["printed by a job"]) == [None]
    captured = capfd.readouterr()
    assert "printed by a job" in captured.err and "printed by a job" not in captured.out


@needs_proc
def test_a_worker_killed_mid_job_raises_at_once_and_stops_the_others():
    workers = WorkerPool(2)
    pids = workers.pids
    threading.Timer(0.5, os.kill, (pids[0], signal.SIGKILL)).start()
    started = time.monotonic()
    with pytest.raises(WorkerError, match=f"worker process {pids[0]} was killed by signal 9 while running "
                                          "time.sleep"):
        workers.map(time.sleep, [30, 30, 30, 30])
    assert time.monotonic() - started < 15
    assert wait_until_gone(pids) == []
    with pytest.raises(WorkerError, match="the worker pool is closed"):
        workers.map(abs, [1])


@needs_proc
def test_a_dead_cryptography_worker_is_a_named_protocol_error():
    key = generate_keypair("paillier", 512, insecure_key_bits=True)
    pool = CryptoPool(key, workers=2, pool_id="killed-worker-test")
    try:
        assert pool.decrypt(pool.encrypt(list(range(500)))) == list(range(500))
        victim = pool._workers.pids[1]
        os.kill(victim, signal.SIGKILL)
        assert wait_until_gone([victim]) == []
        with pytest.raises(ProtocolError, match="a cryptography worker died.*killed by signal 9"):
            pool.encrypt(list(range(500)))
    finally:
        pool.close()


@needs_proc
def test_close_is_idempotent_and_garbage_collection_stops_workers():
    workers = WorkerPool(2)
    pids = workers.pids
    workers.close()
    workers.close()
    assert wait_until_gone(pids) == []
    forgotten = WorkerPool(2)
    pids = forgotten.pids
    del forgotten
    assert wait_until_gone(pids) == []


@needs_proc
def test_workers_exit_when_their_parent_dies_without_cleaning_up(tmp_path):
    parent = subprocess.run(
        [sys.executable, "-c", "import os; from teeboost.workers import WorkerPool; "
                               "print(*WorkerPool(2).pids, flush=True); os._exit(0)"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )
    assert parent.returncode == 0, parent.stderr
    pids = [int(p) for p in parent.stdout.split()]
    assert len(pids) == 2 and wait_until_gone(pids) == []


def test_psi_in_worker_processes_equals_psi_in_this_process():
    ids = [f"customer-{i}" for i in range(20_000)]  # the size from which PSI uses workers
    scalar = psi.new_scalar()
    hashed = psi.hash_ids(ids, workers=2)
    assert np.array_equal(hashed[:50], psi.hash_ids(ids[:50]))
    assert np.array_equal(psi.blind(hashed, scalar, workers=2)[-50:], psi.blind(hashed[-50:], scalar))


def test_background_workers_run_at_the_lowest_priority():
    """A randomiser reserve's workers take only idle cores: they run niced, the others do not."""
    with WorkerPool(1, niceness=19) as background, WorkerPool(1) as online:
        assert os.getpriority(os.PRIO_PROCESS, background.pids[0]) == 19
        assert os.getpriority(os.PRIO_PROCESS, online.pids[0]) == os.getpriority(os.PRIO_PROCESS, 0)
