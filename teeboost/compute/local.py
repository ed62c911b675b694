"""The default backend: worker processes on this machine (``teeboost.workers``)."""

from __future__ import annotations

import os
from typing import Any, Callable

from ..workers import WorkerPool
from .backend import ComputeBackend, InlinePool, TaskPool

__all__ = ["LocalBackend", "local_cpus"]


def local_cpus() -> int:
    """CPUs this process may run on (the affinity mask, as containers and taskset set it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class LocalBackend(ComputeBackend):
    """Jobs run in child processes of this one; stored arrays stay in this process."""

    name = "local"
    by_reference = False

    def __init__(self, workers: int | None = None, shard_rows: int | None = None) -> None:
        self.default_workers = workers
        if shard_rows is not None:
            self.shard_rows = shard_rows

    @property
    def cpus(self) -> int:
        return local_cpus()

    def pool(self, workers: int | None = None, *, initializer: Callable | None = None, initargs: tuple = (),
             niceness: int = 0, release: Callable | None = None) -> TaskPool:
        workers = workers or self.default_workers or min(self.cpus, 8)
        if workers <= 1:
            return InlinePool(initializer, initargs)
        # our workers exit with the pool, taking whatever the initializer built: no release
        return _LocalPool(WorkerPool(workers, initializer=initializer, initargs=initargs, niceness=niceness))

    def put(self, value: Any) -> Any:
        return value

    def describe(self) -> str:
        return f"local processes ({self.cpus} CPUs)"


class _LocalPool(TaskPool):
    def __init__(self, pool: WorkerPool) -> None:
        self._pool = pool
        self.workers = len(pool.pids)

    @property
    def pids(self) -> list[int]:
        return self._pool.pids

    def map(self, fn: Callable, *iterables) -> list:
        return self._pool.map(fn, *iterables)

    def close(self) -> None:
        self._pool.close()
