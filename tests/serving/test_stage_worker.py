"""A scoring stage's own thread batches what was queued while it worked, answers every item
(its result or its exception, in its own caller), resolves a request handler's future on that
handler's event loop with no thread per request, and fails what is still queued when closed."""

import asyncio
import concurrent.futures
import threading
import time

import pytest

from teeboost.serving.stage_worker import StageWorker


def test_items_queued_while_a_batch_is_served_go_together_into_the_next():
    started, release, batches = threading.Event(), threading.Event(), []

    def serve(items):
        batches.append(list(items))
        if len(batches) == 1:
            started.set()
            release.wait(10)
        return [i * 10 for i in items]

    stage = StageWorker(serve, name="t", max_items=4)
    first = concurrent.futures.Future()
    stage.submit(1, first)
    assert started.wait(10)
    later = [concurrent.futures.Future() for _ in range(6)]
    for i, future in enumerate(later):
        stage.submit(2 + i, future)
    release.set()
    assert first.result(10) == 10 and [f.result(10) for f in later] == [20, 30, 40, 50, 60, 70]
    assert batches == [[1], [2, 3, 4, 5], [6, 7]]  # at most max_items, in order
    stage.close()


def test_an_item_refused_alone_is_raised_in_its_own_caller_and_a_failed_batch_in_each():
    def serve(items):
        if "all" in items:
            raise RuntimeError("the batch failed")
        return [ValueError(f"{i} refused") if i == "bad" else i.upper() for i in items]

    stage = StageWorker(serve, name="t", max_items=10)
    assert stage.call("ok") == "OK"
    with pytest.raises(ValueError, match="bad refused"):
        stage.call("bad")
    with pytest.raises(RuntimeError, match="the batch failed"):
        stage.call("all")
    assert stage.call("still") == "STILL"  # the stage's thread lives on
    stage.close()


def test_handlers_on_an_event_loop_wait_there_without_a_thread_each():
    def serve(items):
        time.sleep(0.01)
        return [(i, threading.current_thread().name) for i in items]

    stage = StageWorker(serve, name="scoring", max_items=1000)

    async def handler(i):
        future = asyncio.get_running_loop().create_future()
        stage.submit(i, future)
        return await future

    async def main():
        before = threading.active_count()
        tasks = [asyncio.create_task(handler(i)) for i in range(200)]
        await asyncio.sleep(0.005)
        during = threading.active_count()
        return before, during, await asyncio.gather(*tasks)

    before, during, results = asyncio.run(main())
    assert [i for i, _ in results] == list(range(200))
    assert {name for _, name in results} == {"scoring"}  # served by the stage's thread
    assert during <= before + 1  # 200 requests in flight: one more thread, the stage's own
    stage.close()


def test_closing_fails_what_is_still_queued_and_a_cancelled_caller_is_skipped():
    release = threading.Event()

    def serve(items):
        release.wait(10)
        return items

    stage = StageWorker(serve, name="t", max_items=1)
    running, queued, cancelled = (concurrent.futures.Future() for _ in range(3))
    stage.submit("a", running)
    time.sleep(0.05)
    stage.submit("b", queued)
    stage.submit("c", cancelled)
    cancelled.cancel()
    stage.close()
    release.set()
    with pytest.raises(RuntimeError, match="closed before this request was served"):
        queued.result(10)
    assert running.result(10) == "a" and cancelled.cancelled()
    with pytest.raises(RuntimeError, match="closed"):
        stage.submit("d", concurrent.futures.Future())


def test_a_result_asyncio_cannot_carry_still_reaches_its_caller_and_the_stage_lives_on():
    """asyncio refuses StopIteration as a future's exception (red team): the caller gets a
    RuntimeError naming it instead of waiting forever, and the next request is served."""
    stage = StageWorker(lambda items: [StopIteration() if i == "stop" else i for i in items], name="t",
                        max_items=10)

    async def ask(item):
        future = asyncio.get_running_loop().create_future()
        stage.submit(item, future)
        return await asyncio.wait_for(future, 5)

    with pytest.raises(RuntimeError, match="StopIteration"):
        asyncio.run(ask("stop"))
    assert asyncio.run(ask("next")) == "next"
    stage.close()
