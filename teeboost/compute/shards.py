"""A party's per-row arrays cut into row shards, stored where the backend's jobs read them.

On Ray the shards live in the object store: workers on any node read them (zero-copy on
their own node), and no single process has to hold every shard's data in its own memory.
On the local backend the shards stay in this process and each job is shipped only the rows
it needs, so the same loop costs the same as before sharding.

A job over "these rows of the data" becomes one job per (shard, rows in that shard); every
job receives ``(data, positions)``, with ``data`` the shard and ``positions`` the local rows
(Ray), or the rows already gathered and ``positions`` None (local). ``take_rows`` turns
either into the gathered rows, inside the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .backend import ComputeBackend

__all__ = ["RowShards", "take_rows", "row_jobs"]


def take_rows(data: np.ndarray, positions: np.ndarray | None, axis: int = 0) -> np.ndarray:
    """The job's rows: ``data`` itself when they were gathered before shipping."""
    return data if positions is None else np.take(data, positions, axis=axis)


@dataclass
class RowShards:
    """``array`` split along ``axis`` into shards of ``shard_rows`` rows."""

    backend: ComputeBackend
    edges: np.ndarray  # shard s holds rows edges[s]:edges[s+1]
    stored: list[Any]  # what the backend returned for each shard
    local: list[np.ndarray | None]  # the shards themselves, on a backend that ships rows
    axis: int

    @classmethod
    def split(cls, backend: ComputeBackend, array: np.ndarray, shard_rows: int, axis: int = 0) -> "RowShards":
        n_rows = array.shape[axis]
        edges = np.arange(0, n_rows + shard_rows, shard_rows)
        edges[-1] = n_rows
        edges = np.unique(edges) if n_rows else np.array([0, 0])
        stored, local = [], []
        for a, b in zip(edges[:-1], edges[1:]):
            shard = np.ascontiguousarray(np.take(array, np.arange(a, b), axis=axis)) if backend.by_reference \
                else (array[a:b] if axis == 0 else array[:, a:b])
            stored.append(backend.put(shard))
            local.append(None if backend.by_reference else shard)
        return cls(backend, edges, stored, local, axis)

    @property
    def n_rows(self) -> int:
        return int(self.edges[-1])

    def locate(self, rows: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """(shard, positions within it) for the given rows, in their order within each shard."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size > 1 and np.all(rows[1:] > rows[:-1]):  # sorted (node rows are): cut, don't scan
            bounds = np.searchsorted(rows, self.edges)
            return [(s, rows[a:b] - self.edges[s]) for s, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])) if b > a]
        shard_of = np.searchsorted(self.edges, rows, side="right") - 1
        out = []
        for s in np.unique(shard_of).tolist():
            mine = rows[shard_of == s]
            out.append((s, mine - self.edges[s]))
        return out

    def job_data(self, shard: int, positions: np.ndarray) -> tuple[Any, np.ndarray | None]:
        """The ``(data, positions)`` pair of a job over ``positions`` of ``shard``."""
        if self.backend.by_reference:
            return self.stored[shard], positions.astype(np.int64)
        return take_rows(self.local[shard], positions, self.axis), None


def row_jobs(shards: RowShards, rows: np.ndarray, parts: int, minimum: int) -> list[tuple[int, np.ndarray]]:
    """(shard, positions) jobs covering ``rows``: each shard's rows cut into pieces of at
    least ``minimum`` rows, about ``parts`` pieces in all, so small nodes make few jobs and
    large nodes keep every worker busy."""
    located = shards.locate(rows)
    total = sum(p.size for _, p in located)
    if total == 0:
        return []
    per_job = max(minimum, -(-total // max(1, parts)))
    jobs = []
    for shard, positions in located:
        for start in range(0, positions.size, per_job):
            jobs.append((shard, positions[start:start + per_job]))
    return jobs
