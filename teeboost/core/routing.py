"""An owner's answers to routing questions (does each of these rows go left at my split?),
on its compute backend when that takes numpy loops.

A party keeps a dataset's raw rows in row shards on its backend once, and answers every
question of a request with one job per shard: each job receives the split records it needs
(small) and the rows of its shard the questions name. Every answer is computed by
``record_goes_left``, as the owner's table computes it in this process, so the booleans are
identical and come back in each question's row order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..compute import ComputeBackend, RowShards, TaskPool
from .offload import job_rows, offloads
from .predict import Question
from .tree import OwnerTable, SplitRecord, record_goes_left

__all__ = ["Router", "route_answers"]


def _route_job(data: Any, positions: np.ndarray | None, picks: np.ndarray | None, records: list[SplitRecord],
               counts: list[int]) -> np.ndarray:
    """Answers over one shard, one per asked row: ``positions`` are those rows in the shard
    (``data``), or ``data`` holds the distinct asked rows and ``picks`` index them.
    Consecutive runs of ``counts`` asked rows belong to one record each."""
    index = picks if positions is None else positions
    out = np.empty(index.size, dtype=bool)
    start = 0
    for record, count in zip(records, counts):
        stop = start + count
        out[start:stop] = record_goes_left(record, data[index[start:stop], record.feature])
        start = stop
    return out


class Router:
    """Routing answers of one party; with a backend that takes numpy loops, each dataset's
    raw rows go to it as row shards once (kept per dataset name while the array is the same)."""

    def __init__(self, backend: ComputeBackend | None = None) -> None:
        self.backend = backend if offloads(backend) else None
        self._datasets: dict[str, tuple[np.ndarray, RowShards]] = {}
        self._pool: TaskPool | None = None

    def answers(self, owner: OwnerTable, dataset: str, raw: np.ndarray, questions: list[Question]) -> list[np.ndarray]:
        """One boolean array per question (True: left), in the order of its rows."""
        records = [owner.get(int(record)) for record, _ in questions]  # unknown ids refused first
        if self.backend is None or sum(np.size(rows) for _, rows in questions) < job_rows(self.backend):
            return [record_goes_left(record, raw[rows, record.feature]) for record, (_, rows) in zip(records, questions)]
        row_sets = [np.asarray(rows, dtype=np.int64) for _, rows in questions]
        return self._on_backend(self._shards(dataset, raw), records, row_sets)

    def forget(self, dataset: str) -> None:
        """Let go of a dataset's shards (it was replaced or is no longer routed)."""
        entry = self._datasets.pop(dataset, None)
        if entry is not None:
            for stored in entry[1].stored:
                self.backend.free(stored)

    def close(self) -> None:
        for name in list(self._datasets):
            self.forget(name)
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def _shards(self, dataset: str, raw: np.ndarray) -> RowShards:
        entry = self._datasets.get(dataset)
        if entry is None or entry[0] is not raw:
            self.forget(dataset)
            entry = self._datasets[dataset] = (raw, RowShards.split(self.backend, raw, self.backend.shard_rows))
        return entry[1]

    def _on_backend(self, shards: RowShards, records: list[SplitRecord], row_sets: list[np.ndarray]) -> list[np.ndarray]:
        sizes = np.array([rows.size for rows in row_sets], dtype=np.int64)
        flat = np.concatenate(row_sets)
        if flat.min() < 0 or flat.max() >= shards.n_rows:  # as indexing the array would
            raise IndexError(f"routing question about rows outside the dataset's {shards.n_rows}")
        question = np.repeat(np.arange(len(row_sets)), sizes)
        n_shards = len(shards.stored)
        shard_of = np.searchsorted(shards.edges, flat, side="right") - 1
        # by shard; within one, by question then row order (a stable radix sort on small keys)
        order = np.argsort(shard_of.astype(np.uint16 if n_shards < 1 << 16 else np.int64), kind="stable")
        bounds = np.searchsorted(shard_of[order], np.arange(n_shards + 1))
        placed, args = [], []
        for shard in range(n_shards):
            mine = order[bounds[shard]:bounds[shard + 1]]
            if mine.size == 0:
                continue
            positions = flat[mine] - shards.edges[shard]
            asked = question[mine]  # runs of one question each, in question order
            starts = np.flatnonzero(np.concatenate(([True], asked[1:] != asked[:-1])))
            counts = np.diff(np.append(starts, asked.size))
            asked = asked[starts]
            picks = None
            if not shards.backend.by_reference:  # rows are shipped: each once, however often asked
                held = np.zeros(int(shards.edges[shard + 1] - shards.edges[shard]), dtype=bool)
                held[positions] = True
                picks = (np.cumsum(held) - 1)[positions]
                positions = np.flatnonzero(held)
            placed.append(mine)
            args.append((*shards.job_data(shard, positions), picks, [records[q] for q in asked.tolist()],
                         counts.tolist()))
        if self._pool is None:
            self._pool = self.backend.pool()
        answers = np.empty(flat.size, dtype=bool)
        for mine, part in zip(placed, self._pool.map(_route_job, *zip(*args))):
            answers[mine] = part
        return np.split(answers, np.cumsum(sizes)[:-1]) if len(row_sets) > 1 else [answers]


def route_answers(owner: OwnerTable, raw: np.ndarray, questions: list[Question],
                  backend: ComputeBackend | None = None) -> list[np.ndarray]:
    """``owner``'s answers for one request (rows of ``raw``), without keeping shards: for
    repeated requests on one dataset keep a ``Router``."""
    router = Router(backend)
    try:
        return router.answers(owner, "", raw, questions)
    finally:
        router.close()
