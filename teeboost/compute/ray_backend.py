"""Ray as a party's compute backend: its own cluster's CPUs and object store.

Jobs are Ray tasks, not actors: an idle pool holds no CPU, so several pools (a key holder's
encryption and its background randomisers, or every simulated party of a local run) share a
cluster without waiting on one another. A worker process runs a pool's initializer before
its first job of that pool and keeps the result for the pool's later jobs; it forgets the
oldest pools beyond ``_POOLS_PER_WORKER`` (calling their ``release``), so key tables do not
pile up in long-lived workers.

A worker process that dies mid-task (killed, out of memory, its node lost) is restarted by
Ray and the task rerun, up to ``max_retries`` times; every job here is a pure function of
its arguments (fresh randomness aside), so a rerun changes nothing. Past that, the pool
raises ``ComputeError``. A job's own exception is raised again with its own type.

Trust: the cluster is the party's own. Jobs carry the party's data and, for the key holder,
its private key; run the cluster on the party's private network with Ray's token
authentication (on by default since Ray 2.5x) and TLS (``RAY_USE_TLS``), docs/scaling.md.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import platform
import uuid
from collections import OrderedDict
from typing import Any, Callable, Iterable

from .. import __version__
from ..errors import ConfigError
from .backend import ComputeBackend, ComputeError, TaskPool
from .options import ComputeOptions

__all__ = ["RayBackend", "ray_available"]

_JOBS_IN_FLIGHT = 2  # per worker, as the local pool: the next job waits when one finishes
_POOLS_PER_WORKER = 4
_RUNTIME = f"{platform.python_version()}"

# worker side: pools whose initializer ran in this process, oldest first
_READY: "OrderedDict[str, tuple[Callable | None, tuple]]" = OrderedDict()


def ray_available() -> bool:
    return importlib.util.find_spec("ray") is not None


def _import_ray():
    try:
        import ray
    except ImportError:
        raise ConfigError("compute backend 'ray' needs Ray: pip install 'teeboost[ray]'") from None
    return ray


def worker_node(busy_seconds: float = 0.0) -> str:
    """The Ray node a job runs on (as a job: which nodes a pool's work reaches). Jobs that
    keep a CPU busy a while are spread; instant ones may all run on one leased worker."""
    import time

    import ray
    time.sleep(busy_seconds)
    return ray.get_runtime_context().get_node_id()


def _run_job(expected: tuple[str, str], pool_key: str, setup: tuple, fn: Callable, *args: Any) -> Any:
    """Runs in a Ray worker: check the versions, set the pool up once, run the job."""
    here = (__version__, _RUNTIME)
    if here != expected:
        raise ComputeError(f"Ray worker on {platform.node()} runs teeboost {here[0]} on Python {here[1]}, "
                           f"the driver teeboost {expected[0]} on Python {expected[1]}: install the same "
                           "versions on every node")
    if pool_key not in _READY:
        initializer, initargs, _, release = setup
        if initializer is not None:
            initializer(*initargs)
        _READY[pool_key] = (release, initargs)
        while len(_READY) > _POOLS_PER_WORKER:
            _, (old_release, old_args) = _READY.popitem(last=False)
            if old_release is not None:
                old_release(*old_args)
    else:
        _READY.move_to_end(pool_key)
    return fn(*args)


class RayBackend(ComputeBackend):
    """Tasks on the Ray cluster at ``options.address``; arrays in its object store."""

    name = "ray"
    by_reference = True

    def __init__(self, options: ComputeOptions) -> None:
        ray = _import_ray()
        self.ray = ray
        self.options = options
        self.shard_rows = options.shard_rows
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": "WARNING"}
            if options.address == "local":  # a new instance, even beside a cluster on this machine
                kwargs["address"] = "local"
                kwargs["num_cpus"] = options.num_cpus
                if options.object_store_mb is not None:
                    kwargs["object_store_memory"] = options.object_store_mb << 20
            else:
                kwargs["address"] = options.address
            try:
                ray.init(**kwargs)
            except (ConnectionError, RuntimeError, ValueError) as error:
                raise ComputeError(f"could not reach the Ray cluster at {options.address!r}: {error}") from None
        self._remote = ray.remote(_run_job).options(max_retries=options.max_retries, retry_exceptions=False,
                                                    num_cpus=1)

    @property
    def cpus(self) -> int:
        return max(1, int(self.ray.cluster_resources().get("CPU", 1)))

    @property
    def nodes(self) -> int:
        return sum(1 for node in self.ray.nodes() if node.get("Alive"))

    def pool(self, workers: int | None = None, *, initializer: Callable | None = None, initargs: tuple = (),
             niceness: int = 0, release: Callable | None = None) -> TaskPool:
        workers = workers or self.options.workers or self.cpus
        # niceness is not applied: Ray's worker processes are shared between pools, and a
        # lowered priority would stay with the process. Background work yields by pausing.
        return RayTaskPool(self, workers, (initializer, tuple(initargs), niceness, release))

    def put(self, value: Any) -> Any:
        return self.ray.put(value)

    def describe(self) -> str:
        where = "a private local instance" if self.options.address == "local" else self.options.address
        return f"Ray at {where} ({self.cpus} CPUs on {self.nodes} node{'s' if self.nodes != 1 else ''})"


class RayTaskPool(TaskPool):
    """At most ``workers`` x 2 tasks in flight; results in job order."""

    _ids = itertools.count()

    def __init__(self, backend: RayBackend, workers: int, setup: tuple) -> None:
        self.backend = backend
        self.workers = workers
        self._setup = setup
        self._key = f"{os.getpid()}-{uuid.uuid4().hex}-{next(self._ids)}"
        self._closed = False

    def map(self, fn: Callable, *iterables: Iterable) -> list:
        if self._closed:
            raise ComputeError("the Ray task pool is closed")
        if getattr(fn, "__module__", None) == "__main__":
            raise ComputeError(f"{fn.__qualname__} is defined in the main script, which Ray workers on other "
                               "nodes cannot import: move it to a module")
        ray = self.backend.ray
        expected = (__version__, _RUNTIME)
        jobs = iter(enumerate(zip(*iterables)))
        results: dict[int, Any] = {}
        pending: dict[Any, int] = {}
        failure: BaseException | None = None

        def submit() -> bool:
            item = next(jobs, None)
            if item is None:
                return False
            index, args = item
            ref = self.backend._remote.remote(expected, self._key, self._setup, fn, *args)
            pending[ref] = index
            return True

        for _ in range(self.workers * _JOBS_IN_FLIGHT):
            if not submit():
                break
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                index = pending.pop(ref)
                try:
                    results[index] = ray.get(ref)
                except ray.exceptions.RayTaskError as error:  # the job raised: its own exception
                    cause = getattr(error, "cause", None)
                    failure = failure or (cause if isinstance(cause, BaseException) else error)
                except ray.exceptions.RayError as error:  # a worker or node died past every retry
                    failure = failure or ComputeError(
                        f"a Ray worker died running {fn.__module__}.{fn.__qualname__} and "
                        f"{self.backend.options.max_retries} reruns did not finish it: "
                        f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
                if failure is None:
                    submit()
        if failure is not None:
            raise failure
        return [results[i] for i in range(len(results))]

    def close(self) -> None:
        self._closed = True
