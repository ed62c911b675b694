"""Ray as a party's compute backend: its own cluster's CPUs and object store.

Jobs are Ray tasks, not actors: an idle pool holds no CPU, so several pools (a key holder's
encryption and its background randomisers, or every simulated party of a local run) share a
cluster without waiting on one another. A worker process runs a pool's initializer before
its first job of that pool and keeps the result for the pool's later jobs; it forgets a pool
(calling its ``release``) when the pool is closed (told with its next job of any pool) or
when more than ``_POOLS_PER_WORKER`` are set up, so key tables do not outlive their pools.

A worker process that dies mid-task (killed, out of memory, its node lost) is restarted by
Ray and the task rerun, up to ``max_retries`` times; every job here is a pure function of
its arguments (fresh randomness aside), so a rerun changes nothing. Past that, the pool
raises ``ComputeError``. A job's own exception is raised again with its own type.

Trust: the cluster is the party's own. Jobs carry the party's data and, for the key holder,
its private key; run the cluster on the party's private network with Ray's token
authentication (on by default since Ray 2.5x) and TLS (``RAY_USE_TLS``), docs/scaling.md.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
import platform
import threading
import uuid
from collections import OrderedDict, deque
from pathlib import Path
from typing import Any, Callable, Iterable

from .. import __version__
from ..errors import ConfigError
from .backend import ComputeBackend, ComputeError, TaskPool
from .options import ComputeOptions

__all__ = ["RayBackend", "source_digest", "worker_node"]

_JOBS_IN_FLIGHT = 2  # per worker, as the local pool: the next job waits when one finishes
_POOLS_PER_WORKER = 8  # set-up pools (keys, tables) a worker keeps; pools without set-up keep nothing
_CLOSED_REMEMBERED = 64  # closed pools every job tells its worker to forget
_RUNTIME = f"{platform.python_version()}"
_PACKAGE = Path(__file__).resolve().parent.parent

# worker side: pools whose initializer ran in this process, oldest first
_READY: "OrderedDict[str, tuple[Callable | None, tuple]]" = OrderedDict()
# driver side: the connection this process made, so a second party's other cluster is refused
_CONNECTED: dict[str, Any] = {}


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """SHA-256 over teeboost's own source files: workers must run exactly the driver's code
    (a version string is not bumped by every change)."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        digest.update(str(path.relative_to(_PACKAGE)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


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


def _forget(pool_key: str) -> None:
    release, initargs = _READY.pop(pool_key)
    if release is not None:
        release(*initargs)


def _run_job(expected: tuple[str, str, str], closed: tuple[str, ...], pool_key: str, setup: tuple | None,
             fn: Callable, *args: Any) -> Any:
    """Runs in a Ray worker: check the code, forget closed pools, set this pool up once, run
    the job. ``setup`` is None for pools without an initializer."""
    here = (__version__, _RUNTIME, source_digest())
    if here != expected:
        raise ComputeError(f"a Ray worker runs teeboost {here[0]} (source {here[2]}) on Python {here[1]}, the "
                           f"driver teeboost {expected[0]} (source {expected[2]}) on Python {expected[1]}: "
                           "install the same teeboost and Python on every node")
    for key in closed:
        if key in _READY:
            _forget(key)
    if setup is not None:
        if pool_key not in _READY:
            initializer, initargs, release = setup
            initializer(*initargs)
            _READY[pool_key] = (release, initargs)
            while len(_READY) > _POOLS_PER_WORKER:
                _forget(next(iter(_READY)))
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
        if ray.is_initialized():
            self._check_connection(options)
        else:
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
            _CONNECTED.clear()
            _CONNECTED.update(address=options.address, num_cpus=options.num_cpus,
                              object_store_mb=options.object_store_mb)
        self._remote = ray.remote(_run_job).options(max_retries=options.max_retries, retry_exceptions=False,
                                                    num_cpus=1)

    def _check_connection(self, options: ComputeOptions) -> None:
        """One process reaches one Ray cluster. A party asking for another cluster than the
        one this process is connected to is refused, never given the wrong one."""
        if not _CONNECTED:  # connected by the caller's own ray.init: only "the instance we have" fits
            try:
                gcs = self.ray.get_runtime_context().gcs_address
            except Exception:
                gcs = None
            if options.address == "local" and options.num_cpus is None and options.object_store_mb is None:
                return
            if gcs is not None and options.address == gcs:
                return
            raise ComputeError(f"this process is already connected to Ray (at {gcs or 'an unknown address'}) "
                               f"and cannot also reach {options.address!r}: run each party whose cluster differs "
                               "in its own process")
        if options.address != _CONNECTED["address"]:
            raise ComputeError(f"this process is already connected to Ray at {_CONNECTED['address']!r} and cannot "
                               f"also reach {options.address!r}: one process reaches one Ray cluster (run each "
                               "party whose cluster differs in its own process)")
        for name in ("num_cpus", "object_store_mb"):
            wanted = getattr(options, name)
            if wanted is not None and wanted != _CONNECTED[name]:
                raise ComputeError(f"the private Ray instance of this process was started with {name}="
                                   f"{_CONNECTED[name]}; a second one with {name}={wanted} cannot start beside it")

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
        setup = None if initializer is None else self.ray.put((initializer, tuple(initargs), release))
        return RayTaskPool(self, workers, setup)

    def put(self, value: Any) -> Any:
        return self.ray.put(value)

    def describe(self) -> str:
        where = "a private local instance" if self.options.address == "local" else self.options.address
        return f"Ray at {where} ({self.cpus} CPUs on {self.nodes} node{'s' if self.nodes != 1 else ''})"


class RayTaskPool(TaskPool):
    """At most ``workers`` x 2 tasks in flight; results in job order.

    The pool's set-up (initializer and its arguments: for a key holder, its private key)
    is stored once in the object store and dropped on ``close``; every later job of any pool
    tells its worker to forget the pools closed since, so keys do not outlive their pools."""

    _ids = itertools.count()
    _closed: "deque[str]" = deque(maxlen=_CLOSED_REMEMBERED)
    _closed_lock = threading.Lock()

    def __init__(self, backend: RayBackend, workers: int, setup: Any) -> None:
        self.backend = backend
        self.workers = workers
        self._setup = setup
        self._key = f"{os.getpid()}-{uuid.uuid4().hex}-{next(self._ids)}"
        self._closed_flag = False

    def map(self, fn: Callable, *iterables: Iterable) -> list:
        if self._closed_flag:
            raise ComputeError("the Ray task pool is closed")
        if getattr(fn, "__module__", None) == "__main__":
            raise ComputeError(f"{fn.__qualname__} is defined in the main script, which Ray workers on other "
                               "nodes cannot import: move it to a module")
        ray = self.backend.ray
        expected = (__version__, _RUNTIME, source_digest())
        with self._closed_lock:
            closed = tuple(self._closed)
        jobs = iter(enumerate(zip(*iterables)))
        results: dict[int, Any] = {}
        pending: dict[Any, int] = {}
        failures: dict[int, BaseException] = {}
        name = f"{fn.__module__}.{fn.__qualname__}"

        def submit() -> bool:
            item = next(jobs, None)
            if item is None:
                return False
            index, args = item
            pending[self.backend._remote.remote(expected, closed, self._key, self._setup, fn, *args)] = index
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
                except ray.exceptions.RayTaskError as error:
                    failures[index] = self._job_failure(error, name)
                except ray.exceptions.RayError as error:  # a worker or node died past every retry
                    first = str(error).splitlines()[0] if str(error) else ""
                    failures[index] = ComputeError(
                        f"a Ray worker died running {name} and {self.backend.options.max_retries} reruns did "
                        f"not finish it: {type(error).__name__}: {first}")
                if not failures:
                    submit()
        if failures:  # the first failing job's, as the local pool does, once every job answered
            raise failures[min(failures)]
        return [results[i] for i in range(len(results))]

    def _job_failure(self, error: Any, name: str) -> BaseException:
        """The job's own exception with the worker's traceback as a note; a failure of Ray's
        own machinery in the worker (arguments that would not unpickle: other code there) as a
        named ``ComputeError``."""
        ray = self.backend.ray
        cause = getattr(error, "cause", None)
        if not isinstance(cause, BaseException) or isinstance(cause, ray.exceptions.RayError):
            return ComputeError(f"a Ray worker could not run {name} ({type(cause or error).__name__}: "
                                f"{str(cause or error).splitlines()[0] if str(cause or error) else ''}); "
                                "check that every node runs the driver's teeboost and Python")
        cause.add_note(f"raised in a Ray worker:\n{getattr(error, 'traceback_str', '').rstrip()}")
        return cause

    def close(self) -> None:
        if self._closed_flag:
            return
        self._closed_flag = True
        if self._setup is not None:
            with self._closed_lock:
                self._closed.append(self._key)
            self._setup = None  # the stored set-up (and any key in it) goes with its last reference
