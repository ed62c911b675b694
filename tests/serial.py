"""Timed tests run alone when the suite runs on several workers (``pytest -n 2``, the README's
test command).

A test marked ``serial`` asserts a wall-clock bound (a latency, a timeout, a recovery time); on
a 2-core machine a second worker's test would take half the cores it measures. Every test
holds a lock shared with the other workers' tests, and a serial test holds it alone. A gate
taken around each acquisition lets a waiting serial test in before the next shared holder, so
it is not starved. Without xdist nothing is locked.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path

import pytest


def _lock_paths() -> tuple[Path, Path] | None:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")  # the same in every worker of one run
    if not run:
        return None
    base = Path(tempfile.gettempdir()) / f"teeboost-tests-{run}"
    return base.with_suffix(".gate"), base.with_suffix(".lock")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Setup, call and teardown under the lock: a module fixture's servers start inside it."""
    paths = _lock_paths()
    if paths is None:
        yield
        return
    mode = fcntl.LOCK_EX if item.get_closest_marker("serial") else fcntl.LOCK_SH
    with open(paths[0], "a") as gate, open(paths[1], "a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, mode)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
