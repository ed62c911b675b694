"""The micro-batcher: every caller gets its own result, batches never exceed their size, at
most ``lanes`` run at once, an idle caller serves itself (no other thread), and a failing batch
fails only its own callers."""

import threading
import time

import pytest

from teeboost.microbatch import MicroBatcher

pytestmark = pytest.mark.serial  # wall-clock bounds (tests/serial.py)


@pytest.mark.parametrize("lanes", [1, 3])
def test_every_caller_gets_its_own_answer_under_contention(lanes):
    running, most, batches = [0], [0], []
    guard = threading.Lock()

    def serve(items):
        with guard:
            running[0] += 1
            most[0] = max(most[0], running[0])
        batches.append(len(items))
        time.sleep(0.002)
        with guard:
            running[0] -= 1
        return [x * 2 if x % 17 else ValueError(f"item {x}") for x in items]

    batcher = MicroBatcher(serve, name="test", max_items=8, lanes=lanes)
    out, errors = {}, {}

    def caller(k):
        for i in range(50):
            x = k * 1000 + i
            try:
                out[x] = batcher.submit(x)
            except ValueError as exc:
                errors[x] = str(exc)

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    assert all(out[x] == 2 * x for x in out) and len(out) + len(errors) == 1000
    assert all(errors[x] == f"item {x}" for x in errors) and len(errors) == sum(1 for k in range(20) for i in range(50)
                                                                              if (k * 1000 + i) % 17 == 0)
    assert max(batches) <= 8 and most[0] <= lanes
    assert len(batches) < 1000  # requests were batched together


def test_an_idle_caller_serves_its_own_request():
    seen = []
    batcher = MicroBatcher(lambda items: seen.append(threading.current_thread()) or items, name="test")
    assert batcher.submit(5) == 5
    assert seen == [threading.current_thread()]


def test_a_batch_that_raises_fails_its_callers_and_the_next_batch_runs():
    calls = []

    def serve(items):
        calls.append(items)
        if len(calls) == 1:
            raise RuntimeError("down")
        return items

    batcher = MicroBatcher(serve, name="test")
    with pytest.raises(RuntimeError, match="down"):
        batcher.submit(1)
    assert batcher.submit(2) == 2
