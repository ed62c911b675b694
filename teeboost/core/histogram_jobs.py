"""Histograms of a party's binned columns summed on its compute backend.

The binned columns are cut into row shards once; each tree's fixed-point (g, h) are cut
into the same shards when the tree begins. A node's histogram is then the sum of partial
histograms, one per (shard, rows of the node in it) job. Sums are of integers, exact in any
grouping, so the histograms are identical to those summed in this process.

Host-side only (see ``teeboost.core.offload``): enclave programs build ``HistogramBuilder``
itself, which never leaves the enclave.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..compute import ComputeBackend, RowShards, TaskPool, row_jobs, take_rows
from .gradients import EncodedGradients
from .histogram import CHANNELS, ROW_BLOCK, HistogramBuilder, add_block
from .nodes import NodeRows
from .offload import job_rows, offloads

__all__ = ["ShardedHistogramBuilder", "histogram_builder"]


def _histogram_job(bins: Any, bin_positions: np.ndarray | None, gh: Any, gh_positions: np.ndarray | None,
                   width: int) -> np.ndarray:
    """(n_features, width, CHANNELS) int64 sums over one job's rows, a block at a time."""
    bins = take_rows(bins, bin_positions, 1)
    gh = take_rows(gh, gh_positions, 0)
    out = np.zeros((bins.shape[0], width, CHANNELS), dtype=np.int64)
    for start in range(0, gh.shape[0], ROW_BLOCK):
        block = slice(start, start + ROW_BLOCK)
        add_block(out, bins, block, gh[block, 0].astype(np.float64), gh[block, 1].astype(np.float64))
    return out


def histogram_builder(bins_by_feature: np.ndarray, width: int,
                      backend: ComputeBackend | None = None) -> HistogramBuilder:
    """A builder on ``backend`` when it takes numpy loops, else the in-process one."""
    if offloads(backend):
        return ShardedHistogramBuilder(bins_by_feature, width, backend)
    return HistogramBuilder(bins_by_feature, width)


class ShardedHistogramBuilder(HistogramBuilder):
    """``HistogramBuilder`` whose row sums run as jobs on ``backend``; nodes smaller than a
    job is worth (``job_rows``) and nodes carrying their own values are summed here."""

    def __init__(self, bins_by_feature: np.ndarray, width: int, backend: ComputeBackend) -> None:
        super().__init__(bins_by_feature, width)
        self.backend = backend
        self._bin_shards: RowShards | None = None
        self.min_job_rows = job_rows(backend)
        self._gh: RowShards | None = None
        self._pool: TaskPool | None = None

    @property
    def bin_shards(self) -> RowShards:
        """The binned columns in row shards (axis 1), stored on first use: a party whose
        enclave sums never stores them."""
        if self._bin_shards is None:
            self._bin_shards = RowShards.split(self.backend, self.bins, self.backend.shard_rows, axis=1)
        return self._bin_shards

    def begin_tree(self, gradients: EncodedGradients | None) -> None:
        super().begin_tree(gradients)
        self._drop_gradients()
        if gradients is not None:  # (n_rows, 2): one shard holds a row's g and h
            gh = np.stack([gradients.g, gradients.h], axis=1)
            self._gh = RowShards.split(self.backend, gh, self.backend.shard_rows)

    def end_tree(self) -> None:
        super().end_tree()
        self._drop_gradients()

    def close(self) -> None:
        """Stop the pool's workers and let go of the stored shards."""
        self._drop_gradients()
        if self._bin_shards is not None:
            for stored in self._bin_shards.stored:
                self.backend.free(stored)
            self._bin_shards = None
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def _drop_gradients(self) -> None:
        if self._gh is not None:
            for stored in self._gh.stored:
                self.backend.free(stored)
            self._gh = None

    def _workers(self) -> TaskPool:
        if self._pool is None:
            self._pool = self.backend.pool()
        return self._pool

    def sum_rows(self, rows: np.ndarray, values: tuple = (), out: np.ndarray | None = None) -> np.ndarray:
        if values or self._gh is None or rows.size < self.min_job_rows:
            return super().sum_rows(rows, values, out)
        summed = self._sum_many([rows])[0]
        if out is None:
            return summed
        out += summed
        return out

    def _sum_nodes(self, build: list[int], nodes: NodeRows, outs: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
        if self._gh is None:  # nodes carry their own values: summed here
            return super()._sum_nodes(build, nodes, outs)
        big = [node for node in build if nodes.size(node) >= self.min_job_rows]
        sums = dict(zip(big, self._sum_many([nodes.rows(node) for node in big])))
        return {node: sums[node] if node in sums else self.sum_rows(nodes.rows(node), out=outs[node]) for node in build}

    def _sum_many(self, row_sets: list[np.ndarray]) -> list[np.ndarray]:
        """Histograms of several row sets, every set's jobs in one map over the pool."""
        out = [np.zeros((self.n_features, self.width, CHANNELS), dtype=np.int64) for _ in row_sets]
        if not row_sets:
            return out
        pool = self._workers()
        owners, args = [], []
        for index, rows in enumerate(row_sets):
            for shard, positions in row_jobs(self.bin_shards, rows, pool.workers * 2, self.min_job_rows):
                owners.append(index)
                args.append((*self.bin_shards.job_data(shard, positions), *self._gh.job_data(shard, positions),
                             self.width))
        for index, part in zip(owners, pool.map(_histogram_job, *zip(*args)) if args else ()):
            out[index] += part
        return out
