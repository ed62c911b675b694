"""Where one party's heavy loops run: its own machine's processes, or its own Ray cluster.

Compute settings belong to one party and never travel: no message carries them, so each
party scales out on its own hardware and nothing it computes crosses to another party's
cluster. Read from a party's ``[compute]`` table, or built in code.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

__all__ = ["ComputeOptions", "BACKENDS", "DEFAULT_SHARD_ROWS"]

BACKENDS = ("local", "ray")

#: Rows per shard kept in Ray's object store: about 64 MB of one-slot Paillier ciphertexts.
DEFAULT_SHARD_ROWS = 1 << 18


@dataclass(frozen=True)
class ComputeOptions:
    """``backend``: "local" (worker processes on this machine, the default) or "ray".

    For Ray, ``address`` is "auto" (the cluster this machine belongs to, started with
    ``ray start``), "ray://host:10001" (Ray Client), "host:6379" (the cluster's GCS), or
    "local" (start a private instance with ``num_cpus`` CPUs, as tests do). ``workers``: task processes (None: one per CPU of
    the machine or cluster). ``shard_rows``: rows per object-store shard.
    """

    backend: str = "local"
    address: str = "local"
    workers: int | None = None
    shard_rows: int = DEFAULT_SHARD_ROWS
    num_cpus: int | None = None  # only when starting a private Ray instance (address "local")
    object_store_mb: int | None = None  # likewise; None: Ray's default (30% of memory)
    max_retries: int = 3  # a Ray worker killed mid-task is restarted and its task rerun this often

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError(f"compute backend={self.backend!r} must be one of {', '.join(BACKENDS)}")
        if not isinstance(self.address, str) or not (
                self.address in ("local", "auto") or re.fullmatch(r"(ray://)?[\w.\-\[\]:]+:\d{1,5}", self.address)):
            raise ConfigError(f"compute address={self.address!r} must be 'local', 'auto', 'ray://host:port' "
                              "(Ray Client) or 'host:port' (the cluster's GCS, from a node of the cluster)")
        if self.backend == "local" and self.address != "local":
            raise ConfigError(f"compute address={self.address!r} needs backend='ray'")
        for name, low in (("workers", 1), ("shard_rows", 1024), ("num_cpus", 1), ("object_store_mb", 64),
                          ("max_retries", 0)):
            value = getattr(self, name)
            if value is None and name in ("workers", "num_cpus", "object_store_mb"):
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"compute {name}={value!r} must be an integer >= {low}")
        if self.address != "local" and (self.num_cpus is not None or self.object_store_mb is not None):
            raise ConfigError("compute num_cpus and object_store_mb size a private Ray instance (address='local'); "
                              f"the cluster at {self.address!r} has its own")

    @classmethod
    def from_table(cls, table: Any, where: str = "[compute]") -> "ComputeOptions":
        """From a config file's ``[compute]`` table; unknown keys are named, never ignored."""
        if not isinstance(table, dict):
            raise ConfigError(f"{where} must be a table")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(table) - known)
        if unknown:
            raise ConfigError(f"{where} has unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        try:
            return cls(**table)
        except ConfigError as error:
            raise ConfigError(f"{where} {error}") from None
        except TypeError as error:
            raise ConfigError(f"{where} {error}") from None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
