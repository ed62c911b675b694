"""When the engine's numpy loops leave this process for a party's compute backend.

Histograms, binning, routing answers and 1-TEE ring sums are exact integer or comparison
work, so where they run changes nothing in their results, only in their time. They go to
the backend when it is a cluster (Ray) or when local worker processes were asked for
explicitly; otherwise they stay in this process, exactly as without a backend. A node or
request smaller than ``job_rows`` stays here even then: shipping it costs more than it saves.

Host-side only: enclave programs never import this (their measured code stays free of
process and cluster machinery), and work inside an enclave never goes to a backend.
"""

from __future__ import annotations

from typing import Any

__all__ = ["offloads", "job_rows"]


def offloads(backend: Any) -> bool:
    """Does ``backend`` take numpy loops? Ray does; local processes only when more than one
    worker was configured (the default local backend keeps them in this process)."""
    if backend is None:
        return False
    if getattr(backend, "by_reference", False):
        return True
    return (getattr(backend, "default_workers", None) or 1) > 1


def job_rows(backend: Any) -> int:
    """Fewest rows worth a job: an eighth of a shard (32768 rows at the default shard size)."""
    return max(1, int(backend.shard_rows) // 8)
