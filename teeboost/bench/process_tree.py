"""Run a command and measure the peak memory of its whole process tree.

A party's memory is not one process's: enclaves and crypto workers are child processes
with memory of their own, and ``ru_maxrss`` only ever sees one process. So, while the
command runs, this polls every ``period`` seconds the memory of the process and all its
descendants, sums it and keeps the peak. The sum is of proportional set sizes (PSS,
``/proc/PID/smaps_rollup``), which split a page shared by several processes (the
interpreter and libraries every Python process maps) among them, so the tree counts each
page about once; pages shared with processes outside the tree (this driver, other Python
programs) count only in part. Where smaps_rollup cannot be read, resident set sizes (RSS)
stand in; they count shared pages in every process. The RSS sum is kept as well. Polling
misses peaks shorter than the period, and new descendants are looked for every fifth poll.

The largest single process's peak is each process's high-water mark (``VmHWM``), read while
it runs. Not ``ru_maxrss``: Linux carries the RSS of the process that spawned a command into
the command's ``ru_maxrss`` at exec, so every point would report at least this driver's size.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TreeRun", "TreeSample", "run_measured", "tree_memory", "peak_rss_mb"]

MB = 1024.0 * 1024.0
RESCAN_EVERY = 5  # samples between looks for new descendants (enclaves and workers live for seconds)


@dataclass(frozen=True)
class TreeRun:
    returncode: int | None  # None: killed after the timeout
    seconds: float  # wall time of the whole command, start-up included
    peak_tree_mb: float  # peak of the tree's summed PSS (RSS where PSS is unavailable), polled
    peak_tree_rss_mb: float  # peak of the tree's summed RSS, polled
    largest_process_mb: float  # the highest peak RSS (VmHWM) of any one process in the tree
    measure: str  # "pss" or "rss": what peak_tree_mb sums
    most_processes: int  # the most processes seen in the tree at once
    samples: int
    at_peak_mb: tuple[float, ...] = ()  # each process's share of peak_tree_mb, the command's own first

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


@dataclass(frozen=True)
class TreeSample:
    total: int  # bytes: summed PSS (or RSS)
    total_rss: int  # bytes
    largest_peak: int  # bytes: the highest VmHWM among the processes
    processes: int
    each: tuple[int, ...] = ()  # bytes: every process's PSS (or RSS), the root's first


def _pss_available() -> bool:
    try:
        return "Pss:" in Path("/proc/self/smaps_rollup").read_text()
    except OSError:
        return False


def _descendants(root: int) -> list[int]:
    """``root`` and every process below it, from each process's parent in /proc/PID/stat."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # exited meanwhile
        parent = int(stat[stat.rindex(")") + 2:].split()[1])  # the name may hold spaces and parentheses
        children.setdefault(parent, []).append(int(entry))
    tree, pending = [], [root]
    while pending:
        pid = pending.pop()
        tree.append(pid)
        pending.extend(children.get(pid, ()))
    return tree


def _kilobytes(text: str, *names: str) -> dict[str, int]:
    """Fields like ``VmRSS:  1234 kB`` of a /proc file, in bytes."""
    found = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name in names:
            found[name] = int(value.split()[0]) * 1024
    return found


def _process_memory(pid: int, pss: bool) -> tuple[int, int, int] | None:
    """(PSS or RSS, RSS, peak RSS) of one process in bytes; None once it is gone."""
    try:
        status = _kilobytes(Path(f"/proc/{pid}/status").read_text(), "VmRSS", "VmHWM")
        if "VmRSS" not in status:
            return None  # a zombie: its memory is already released
        proportional = status["VmRSS"]
        if pss:
            proportional = _kilobytes(Path(f"/proc/{pid}/smaps_rollup").read_text(), "Pss").get("Pss", proportional)
        return proportional, status["VmRSS"], status.get("VmHWM", status["VmRSS"])
    except (OSError, ValueError, IndexError):
        return None  # exited meanwhile


def peak_rss_mb(pid: int | str = "self") -> float:
    """One process's peak RSS since its exec (``VmHWM``), for a process to report its own at its end,
    which polling from outside may miss by up to one period."""
    return _kilobytes(Path(f"/proc/{pid}/status").read_text(), "VmHWM")["VmHWM"] / MB


def _sample(pids: list[int], pss: bool) -> TreeSample:
    found = [memory for memory in (_process_memory(pid, pss) for pid in pids) if memory is not None]
    return TreeSample(total=sum(m[0] for m in found), total_rss=sum(m[1] for m in found),
                      largest_peak=max((m[2] for m in found), default=0), processes=len(found),
                      each=tuple(m[0] for m in found))


def tree_memory(root: int, pss: bool | None = None) -> TreeSample:
    """The memory of ``root`` and all its descendants right now."""
    return _sample(_descendants(root), _pss_available() if pss is None else pss)


def _kill_tree(process: subprocess.Popen) -> None:
    """Kill the command's session (it was started in its own) and any descendant that left it."""
    stragglers = _descendants(process.pid)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for pid in stragglers:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_measured(command: list[str], *, timeout: float, period: float = 0.02, stdout=None, stderr=None,
                 cwd: str | Path | None = None) -> TreeRun:
    """Run ``command`` (in a session of its own, so a timeout kills all of it) and measure it."""
    pss = _pss_available()
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=stdout, stderr=stderr, cwd=cwd, start_new_session=True)
    peak = peak_rss = largest = most = samples = 0
    returncode, tree, at_peak = None, [], ()
    while True:
        if samples % RESCAN_EVERY == 0:  # listing /proc costs more than reading the known processes
            tree = _descendants(process.pid)
        sample = _sample(tree, pss)
        if sample.total > peak:
            peak, at_peak = sample.total, sample.each
        peak_rss = max(peak_rss, sample.total_rss)
        largest, most, samples = max(largest, sample.largest_peak), max(most, sample.processes), samples + 1
        if process.poll() is not None:
            returncode = process.returncode
            break
        if time.perf_counter() - started > timeout:
            _kill_tree(process)
            process.wait()
            break
        time.sleep(period)
    return TreeRun(returncode=returncode, seconds=time.perf_counter() - started,
                   peak_tree_mb=round(peak / MB, 1), peak_tree_rss_mb=round(peak_rss / MB, 1),
                   largest_process_mb=round(largest / MB, 1), measure="pss" if pss else "rss",
                   most_processes=most, samples=samples, at_peak_mb=tuple(round(b / MB, 1) for b in at_peak))
