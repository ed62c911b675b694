"""A spare enclave launched ahead of need (real simulated enclave processes): taken, it is
the enclave a launch would give, and the next one is launched in the background; a spare
that failed is launched again when taken; closing leaves no enclave process behind."""

import os
import time

import pytest

from teeboost.errors import EnclaveError
from teeboost.tee.spare import SpareEnclave

from .test_simulated_enclave import backend, code_for  # noqa: F401 - the module's backend fixture


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped) counts as gone
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


def test_a_taken_spare_answers_and_the_next_is_launched_ahead(backend):  # noqa: F811
    launched, warmed = [], []

    def launch():
        enclave = backend.load(code_for(backend), label="spare")
        launched.append(enclave)
        return enclave

    spare = SpareEnclave(launch, lambda e: warmed.append(e.ecall("echo", b"warm")), name="test")
    spare.prepare()
    first = spare.take()
    try:
        assert first.ecall("echo", b"hello") == b"hello" and warmed == [b"warm"]
        deadline = time.monotonic() + 30
        while len(warmed) < 2 and time.monotonic() < deadline:  # the next spare, launched and warmed ahead
            time.sleep(0.05)
        assert len(launched) == 2 and len(warmed) == 2
        second = spare.take()  # the one launched ahead, not a new launch
        assert second is launched[1] and second.ecall("echo", b"again") == b"again"
        second.close()
    finally:
        first.close()
        spare.close()
    deadline = time.monotonic() + 30
    while len(launched) < 3 and time.monotonic() < deadline:  # the spare launched after the second take
        time.sleep(0.05)
    assert len(launched) == 3 and all(_wait_gone(e.pid) for e in launched)  # closed with the others


def test_a_spare_that_failed_to_launch_is_launched_when_taken(backend, capfd):  # noqa: F811
    calls = []

    def launch():
        calls.append(1)
        if len(calls) == 1:
            raise EnclaveError("the first launch fails")
        return backend.load(code_for(backend), label="spare")

    spare = SpareEnclave(launch, name="test")
    spare.prepare()
    enclave = spare.take()
    try:
        assert enclave.ecall("echo", b"x") == b"x"
        assert "failed to launch" in capfd.readouterr().err
    finally:
        enclave.close()
        spare.close()


def test_a_spare_closed_while_it_launches_is_closed_before_close_returns(backend):  # noqa: F811
    """A host that stops while its spare launches leaves no enclave process behind it (the
    README's serving section once found one still running after the service had exited)."""
    launched = []

    def launch():
        time.sleep(0.3)  # still launching when the host closes
        enclave = backend.load(code_for(backend), label="spare")
        launched.append(enclave)
        return enclave

    spare = SpareEnclave(launch, name="test")
    spare.prepare()
    spare.close()
    assert launched and not _alive(launched[0].pid)
    spare.prepare()  # closed: nothing more is launched
    time.sleep(0.5)
    assert len(launched) == 1
    with pytest.raises(EnclaveError):
        launched[0].ecall("echo", b"x")


def test_two_spares_kept_serve_two_sessions_started_at_once_without_a_launch(backend):  # noqa: F811
    """A host whose two sessions start at once (a passive party restarted under two scoring
    models) keeps two spares: both are taken ready, and none is launched while they wait."""
    launched = []

    def launch():
        enclave = backend.load(code_for(backend), label="spare")
        launched.append(enclave)
        return enclave

    spare = SpareEnclave(launch, name="test", keep=2)
    spare.prepare()
    taken = []
    try:
        assert spare.wait(30) and len(launched) == 2
        taken = [spare.take(), spare.take()]
        assert {id(e) for e in taken} == {id(e) for e in launched[:2]}  # the two launched ahead, not new launches
        assert all(e.ecall("echo", b"x") == b"x" for e in taken)
        assert spare.wait(30) and len(launched) == 4  # both replaced in the background
    finally:
        for enclave in taken:
            enclave.close()
        spare.close()
    assert all(_wait_gone(e.pid) for e in launched)
