"""Compute backends for tests: a private Ray instance, started once per session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_backend():
    """A Ray backend on a private local instance (2 CPUs, 256 MB object store) with small
    shards (1024 rows), so every multi-shard path runs on test-sized data. Skipped without
    Ray; shut down at the end of the session only if this fixture started it."""
    ray = pytest.importorskip("ray")
    from teeboost.compute import ComputeOptions, open_backend

    started = not ray.is_initialized()
    backend = open_backend(ComputeOptions(backend="ray", num_cpus=2, object_store_mb=256, shard_rows=1024))
    yield backend
    backend.close()
    if started:
        ray.shutdown()
