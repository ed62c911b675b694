"""Worker processes that never import the caller's script.

``multiprocessing``'s spawn start method re-imports the parent's ``__main__`` in every child,
so a library using it runs its caller's script body again, once per worker, unless the caller
wrote ``if __name__ == "__main__":``. A ``WorkerPool`` instead starts each worker as
``python -m teeboost.workers``: the child imports this module and then only the modules of
the initializer and of the functions it is asked to run.

Transport: every message is a pickle preceded by its length (8 bytes, big-endian), over the
worker's standard input (jobs) and standard output (replies). Unpickling executes code, which
is acceptable only because both ends of these pipes are our own process and its child: they
are created here, have no name in the file system and are closed in every other child process.
Never point this transport at anything a peer can write to. The worker's standard error stays the
parent's, and anything a job prints goes there too, so it cannot corrupt the replies.

A worker exits when its standard input closes: when the pool is closed, garbage collected, at
interpreter exit, or when the parent dies. A worker that dies raises ``WorkerError`` in the
parent; an exception raised by a job is raised again in the parent with its type and message.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import traceback
import weakref
from collections import deque
from pathlib import Path
from typing import Any, Callable, Iterable

from .errors import TeeboostError

__all__ = ["WorkerPool", "WorkerError"]

_HEADER = 8
_READ_SIZE = 1 << 20
_JOBS_IN_FLIGHT = 2  # per worker: the next job is already waiting when one finishes
_POLL_SECONDS = 0.5  # how often a silent wait checks that the workers are still alive
_STOP_SECONDS = 5.0
_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)


class WorkerError(TeeboostError):
    """A worker process could not start, died during a job, or its pool is already closed."""


def _frame(value: Any) -> bytes:
    body = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return len(body).to_bytes(_HEADER, "big") + body


def _describe(fn: Callable) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


# --- the parent's side


class _Worker:
    """One child process, its two pipe ends, and the bytes on their way in and out."""

    def __init__(self, env: dict[str, str], niceness: int = 0) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env=env, close_fds=True,
        )
        if niceness:  # lowering a child's priority needs no privilege
            os.setpriority(os.PRIO_PROCESS, self.process.pid, niceness)
        self.to_worker = self.process.stdin.fileno()
        self.from_worker = self.process.stdout.fileno()
        os.set_blocking(self.to_worker, False)
        self.outgoing: deque[memoryview] = deque()
        self.incoming = bytearray()
        self.in_flight: deque[int] = deque()  # job indices, in the order they were sent

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, frame: bytes) -> None:
        self.outgoing.append(memoryview(frame))

    def write_some(self) -> None:
        """Write what the pipe takes now; raises BrokenPipeError if the worker is gone."""
        while self.outgoing:
            try:
                written = os.write(self.to_worker, self.outgoing[0])
            except BlockingIOError:
                return
            if written == len(self.outgoing[0]):
                self.outgoing.popleft()
            else:
                self.outgoing[0] = self.outgoing[0][written:]

    def read_some(self) -> list[bytes]:
        """Complete replies read so far; raises EOFError if the worker closed its output."""
        chunk = os.read(self.from_worker, _READ_SIZE)
        if not chunk:
            raise EOFError
        self.incoming += chunk
        replies = []
        while len(self.incoming) >= _HEADER:
            size = int.from_bytes(self.incoming[:_HEADER], "big")
            if len(self.incoming) < _HEADER + size:
                break
            replies.append(bytes(self.incoming[_HEADER:_HEADER + size]))
            del self.incoming[:_HEADER + size]
        return replies

    def death(self, doing: str) -> WorkerError:
        try:
            code = self.process.wait(timeout=_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            code = None
        how = "closed its output" if code is None else \
            f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return WorkerError(f"worker process {self.pid} {how} {doing} (killed, out of memory, "
                           "or see its error output above)")


def _stop(workers: list[_Worker]) -> None:
    """Close every worker's input (it then exits), and kill those that do not exit in time.
    Workers still busy with jobs nobody will collect are killed at once."""
    for worker in workers:
        if worker.in_flight and worker.process.poll() is None:
            worker.process.kill()
        for pipe in (worker.process.stdin, worker.process.stdout):
            try:
                pipe.close()
            except OSError:
                pass
    for worker in workers:
        try:
            worker.process.wait(timeout=_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            worker.process.kill()
            worker.process.wait()
    workers.clear()


def _raise_job_error(reply: tuple, fn: Callable) -> None:
    _, blob, description, remote_traceback = reply
    error = None
    if blob is not None:
        try:
            error = pickle.loads(blob)
        except Exception:
            error = None
    if not isinstance(error, BaseException):
        error = RuntimeError(f"{_describe(fn)} failed in a worker process: {description}")
    error.add_note(f"raised in a worker process:\n{remote_traceback.rstrip()}")
    raise error


class WorkerPool:
    """``workers`` processes running module-level functions, like ``ProcessPoolExecutor``.

    ``initializer(*initargs)`` runs once in every worker before its first job; the pool is
    returned only when every worker has run it, so expensive set-up overlaps and is paid once.
    Functions, arguments and results travel as pickles: functions must be importable by
    module and name (not defined in ``__main__``).
    """

    def __init__(self, workers: int, *, initializer: Callable | None = None, initargs: tuple = (),
                 niceness: int = 0) -> None:
        """``niceness`` > 0 runs the workers at a lower scheduling priority: they then use only
        cores nothing else wants (background work)."""
        if workers < 1:
            raise WorkerError(f"a worker pool needs at least one worker, got workers={workers}")
        self._lock = threading.Lock()
        self._workers: list[_Worker] = []
        self._closer = weakref.finalize(self, _stop, self._workers)  # also runs at interpreter exit
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, env.get("PYTHONPATH")]))
        started: dict[int, tuple] = {}  # pid -> reply to the initializer
        try:
            for _ in range(workers):
                self._workers.append(_Worker(env, niceness))
            frame = _frame((initializer, initargs))
            for worker in self._workers:
                worker.send(frame)
                worker.in_flight.append(worker.pid)
            self._exchange(lambda worker: None, started.setdefault, "while starting")
            for pid, reply in started.items():
                if reply[0] == "error":
                    try:
                        _raise_job_error(reply, initializer)
                    except Exception as error:
                        raise WorkerError(f"the initializer {_describe(initializer)} failed in worker process "
                                          f"{pid}: {reply[2]}") from error
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> list[int]:
        return [worker.pid for worker in self._workers]

    def map(self, fn: Callable, *iterables: Iterable) -> list:
        """``[fn(*args) for args in zip(*iterables)]``, computed by the workers, in order.

        If jobs raise, the first failing job's exception is raised once every job already
        sent has answered, so the pool stays usable."""
        if getattr(fn, "__module__", None) == "__main__":
            raise WorkerError(f"{_describe(fn)} is defined in the main script, which worker processes do not "
                              "import: move it to a module")
        jobs = iter(zip(*iterables))
        results: list = []
        failures: dict[int, tuple] = {}
        unsendable: list[Exception] = []

        def refill(worker: _Worker, depth: int = _JOBS_IN_FLIGHT) -> None:
            while len(worker.in_flight) < depth and not failures and not unsendable:
                args = next(jobs, None)
                if args is None:
                    return
                try:
                    frame = _frame((fn, args))
                except Exception as error:  # an argument that does not pickle
                    unsendable.append(error)
                    return
                worker.send(frame)
                worker.in_flight.append(len(results))
                results.append(None)

        def on_reply(index: int, reply: tuple) -> None:
            if reply[0] == "ok":
                results[index] = reply[1]
            else:
                failures[index] = reply

        with self._lock:
            if not self._workers:
                raise WorkerError("the worker pool is closed")
            for depth in range(1, _JOBS_IN_FLIGHT + 1):  # one job each first, so few jobs still spread
                for worker in self._workers:
                    refill(worker, depth)
            self._exchange(refill, on_reply, f"while running {_describe(fn)}")
        if failures:
            _raise_job_error(failures[min(failures)], fn)
        if unsendable:
            raise unsendable[0]
        return results

    def _exchange(self, refill: Callable[[_Worker], None], on_reply: Callable[[int, tuple], Any], doing: str) -> None:
        """Send what is queued, pass each reply on and refill its worker, until no job is in flight.

        A worker that dies breaks the whole pool: the pool is closed and nothing is returned,
        so no caller ever sees part of a result."""
        try:
            while any(worker.in_flight for worker in self._workers):
                waiting = [w for w in self._workers if w.in_flight]
                writing = [w.to_worker for w in self._workers if w.outgoing]
                readable, writable, _ = select.select([w.from_worker for w in waiting], writing, [], _POLL_SECONDS)
                for worker in self._workers:
                    if worker.to_worker in writable:
                        try:
                            worker.write_some()
                        except (BrokenPipeError, ConnectionResetError):
                            raise worker.death(doing) from None
                    if worker.from_worker in readable:
                        try:
                            blobs = worker.read_some()
                        except EOFError:
                            raise worker.death(doing) from None
                        for blob in blobs:
                            if not worker.in_flight:
                                raise WorkerError(f"worker process {worker.pid} answered a job it was not sent")
                            on_reply(worker.in_flight.popleft(), pickle.loads(blob))
                        refill(worker)
                if not readable and not writable:
                    for worker in waiting:
                        if worker.process.poll() is not None:
                            raise worker.death(doing)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop every worker; safe to call more than once."""
        self._closer()

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


# --- the worker's side


def _serve(jobs, replies) -> None:
    def reply(value: Any) -> None:
        replies.write(_frame(value))
        replies.flush()

    def failure(error: BaseException) -> tuple:
        try:
            blob = pickle.dumps(error, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            blob = None
        return ("error", blob, f"{type(error).__name__}: {error}", traceback.format_exc())

    while True:
        header = jobs.read(_HEADER)
        if len(header) < _HEADER:
            return  # the pool closed, or the parent died
        size = int.from_bytes(header, "big")
        body = jobs.read(size)
        if len(body) < size:
            return
        try:
            fn, args = pickle.loads(body)
            result = None if fn is None else fn(*args)
            message = ("ok", result)
        except Exception as error:
            message = failure(error)
        try:
            reply(message)
        except (BrokenPipeError, ConnectionResetError):
            return
        except Exception as error:  # the result would not pickle
            reply(failure(error))


def _main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it then closes us
    jobs = open(os.dup(0), "rb")
    replies = open(os.dup(1), "wb")
    with open(os.devnull, "rb") as nothing:
        os.dup2(nothing.fileno(), 0)
    os.dup2(2, 1)  # prints from jobs go to the parent's standard error, not into the replies
    sys.stdout = sys.stderr
    _serve(jobs, replies)


if __name__ == "__main__":
    _main()
