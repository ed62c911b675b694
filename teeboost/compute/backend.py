"""The interface a party's heavy loops are written against, whatever runs them.

A ``TaskPool`` runs module-level functions on worker processes that were each set up once
(key tables built, say), and returns results in order, like ``map``. A ``ComputeBackend``
makes pools and stores large arrays where its workers read them: the local backend keeps
them in this process and ships each job the rows it needs; Ray keeps them in its object
store, and jobs carry references. Loops written against this interface (encryption,
decryption, homomorphic bin sums, histograms, binning, routing) give identical results on
either backend: only where the arithmetic happens changes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Iterable

from ..workers import WorkerError

__all__ = ["ComputeBackend", "TaskPool", "InlinePool", "ComputeError"]


class ComputeError(WorkerError):
    """A compute worker died and could not be restarted, or the cluster is unreachable or
    unsuitable. Never a partial result: the loop that hit it returns nothing."""


class TaskPool(ABC):
    """Workers that each ran the pool's initializer, running ``fn(*args)`` jobs in order."""

    workers: int

    @abstractmethod
    def map(self, fn: Callable, *iterables: Iterable) -> list:
        """``[fn(*args) for args in zip(*iterables)]``; a job's exception is raised again
        with its own type, a dead worker raises ``ComputeError``."""

    @abstractmethod
    def close(self) -> None:
        """Stop the pool's workers; safe to call more than once."""

    def __enter__(self) -> "TaskPool":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class InlinePool(TaskPool):
    """Jobs run in this process, one after another: small work skips process start-up."""

    def __init__(self, initializer: Callable | None = None, initargs: tuple = ()) -> None:
        self.workers = 1
        if initializer is not None:
            initializer(*initargs)

    def map(self, fn: Callable, *iterables: Iterable) -> list:
        return [fn(*args) for args in zip(*iterables)]

    def close(self) -> None:
        pass


class ComputeBackend(ABC):
    """Where one party's heavy loops run. Never shared with another party."""

    #: short name for reports: "local" or "ray"
    name: str
    #: True: ``put`` returns a handle that jobs resolve themselves (the data is not shipped
    #: with each job); False: ``put`` returns the array, and callers ship jobs only the rows
    #: each needs.
    by_reference: bool = False
    #: rows per shard of per-row data (``RowShards``)
    shard_rows: int = 1 << 18

    @property
    @abstractmethod
    def cpus(self) -> int:
        """CPUs the backend's tasks may use (this machine's, or the whole cluster's)."""

    @abstractmethod
    def pool(self, workers: int | None = None, *, initializer: Callable | None = None, initargs: tuple = (),
             niceness: int = 0, release: Callable | None = None) -> TaskPool:
        """A pool of ``workers`` (None: one per CPU) that each ran ``initializer(*initargs)``
        once; ``niceness`` > 0 runs background work only on otherwise idle cores (local
        processes; Ray schedules by CPU count instead). ``release(*initargs)`` undoes the
        initializer in a worker that outlives the pool (Ray's shared workers)."""

    @abstractmethod
    def put(self, value: Any) -> Any:
        """Store ``value`` (an array) where this backend's jobs read it; pass the returned
        object as a job argument."""

    def free(self, stored: Any) -> None:
        """Let go of a stored value early (it is freed anyway when no longer referenced)."""

    @abstractmethod
    def describe(self) -> str:
        """One line for run reports: backend, address and CPUs."""

    def close(self) -> None:
        """Release what this backend holds (pools are closed by their owners)."""
