"""Randomisers computed ahead: each handed out once, bounded, usable, and failures not hidden."""

import os
import signal
import time

import numpy as np
import pytest

from teeboost.crypto.pool import CryptoPool
from teeboost.crypto.reserve import RandomizerReserve
from teeboost.crypto.schemes import generate_keypair
from teeboost.errors import ProtocolError


@pytest.fixture(scope="module")
def key():
    return generate_keypair("ou", 2048)


def _wait_until(predicate, seconds=30.0):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_randomizers_are_handed_out_once_and_encrypt_correctly(key):
    pool = CryptoPool(key, workers=1, pool_id="reserve-once")
    reserve = RandomizerReserve(pool, limit_bytes=600 * pool.width, exponent_bits=key.exponent_bits)
    try:
        reserve.fill(500)
        _wait_until(lambda: reserve.ready == 500)
        first = reserve.take(300)  # from the reserve
        second = reserve.take(400)  # 200 left, 200 computed now
        assert reserve.ready == 0 and reserve.on_demand_seconds > 0 and reserve.ahead_seconds > 0
        rows = {bytes(r) for r in np.concatenate([first, second])}
        assert len(rows) == 700  # never the same randomiser twice
        plaintexts = list(range(700))
        ciphertexts = pool.encrypt(plaintexts, np.concatenate([first, second]))
        assert pool.decrypt(ciphertexts) == plaintexts
    finally:
        reserve.close()
        pool.close()


def test_the_reserve_never_holds_more_than_its_bound(key):
    pool = CryptoPool(key, workers=1, pool_id="reserve-bound")
    reserve = RandomizerReserve(pool, limit_bytes=256 * pool.width + 17, exponent_bits=key.exponent_bits)
    try:
        assert reserve.capacity == 256
        reserve.fill(10_000)
        _wait_until(lambda: reserve._thread is None or not reserve._thread.is_alive())
        assert reserve.ready == 256
    finally:
        reserve.close()
        assert reserve.ready == 0
        pool.close()


def test_online_work_pauses_the_filling(key):
    pool = CryptoPool(key, workers=1, pool_id="reserve-pause")
    reserve = RandomizerReserve(pool, limit_bytes=100_000 * pool.width, exponent_bits=key.exponent_bits)
    try:
        reserve.fill(100_000)
        _wait_until(lambda: reserve.ready > 0)
        with reserve.paused():
            held = reserve.ready
            time.sleep(0.2)
            assert reserve.ready == held  # nothing computed while paused
        _wait_until(lambda: reserve.ready > held)
    finally:
        reserve.close()
        pool.close()


def test_a_worker_killed_while_filling_surfaces_at_the_next_take(key):
    pool = CryptoPool(key, workers=2, pool_id="reserve-kill")
    reserve = RandomizerReserve(pool, limit_bytes=1 << 30, exponent_bits=key.exponent_bits)
    try:
        reserve.fill(10**6)
        _wait_until(lambda: reserve.ready > 0)
        os.kill(pool._workers.pids[0], signal.SIGKILL)
        with pytest.raises(ProtocolError, match="worker"):
            _wait_until(lambda: reserve._error is not None)
            reserve.take(10)
    finally:
        reserve.close()
        pool.close()
