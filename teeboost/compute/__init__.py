"""Where a party's heavy loops run: this machine's processes (default) or its own Ray cluster.

``open_backend(options)`` gives the backend a party's ``[compute]`` settings ask for; the
loops (``teeboost.crypto.pool``, ``teeboost.core.histogram``, ``teeboost.core.binning``,
routing for prediction) are written against ``ComputeBackend`` and give identical results
on each. docs/scaling.md describes a multi-node set-up and what each task costs.
"""

from __future__ import annotations

from .backend import ComputeBackend, ComputeError, InlinePool, TaskPool
from .local import LocalBackend, local_cpus
from .options import BACKENDS, DEFAULT_SHARD_ROWS, ComputeOptions
from .shards import RowShards, row_jobs, take_rows

__all__ = ["ComputeBackend", "ComputeError", "ComputeOptions", "InlinePool", "LocalBackend", "RowShards",
           "TaskPool", "BACKENDS", "DEFAULT_SHARD_ROWS", "open_backend", "local_cpus", "row_jobs", "take_rows"]


def open_backend(options: ComputeOptions | None = None) -> ComputeBackend:
    """The backend ``options`` names (None: local processes). Ray is imported only here, and
    only when asked for: it is an optional extra."""
    options = options or ComputeOptions()
    if options.backend == "ray":
        from .ray_backend import RayBackend
        return RayBackend(options)
    return LocalBackend(options.workers, options.shard_rows)
