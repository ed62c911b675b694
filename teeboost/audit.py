"""A party's own record of what it served and to whom: JSON lines, one event per line.

Each line has the time, this party's name, the event, and what the event is about: the run
id, the peer's certificate fingerprint (SHA-256 of its DER certificate), the protocol and
parameters, row counts, per-run counts of every query type, and every refusal with its rule.
Ids and raw values never go in: the log is meant to be shown to auditors. Every entry is
bounded (``teeboost.audit_entries``), so a peer cannot make a line unbounded. Refusals written
with ``AuditLog.refused`` are rate-limited: at most ``REFUSALS_PER_MINUTE`` per (reason, peer)
per minute (and ``REFUSALS_PER_MINUTE_ALL`` in all); the rest are counted, and a "refusals
suppressed" entry gives the count when the minute is over (or when the log is closed).

The file is opened for appending only, created mode 0600 and never through a symlink; each
line goes out in one write, so a crash loses at most the line being written. A line torn by a
crash is repaired when the log is next opened: the torn bytes are cut off (a complete entry
missing only its newline is terminated instead) and a "repaired" entry says how many bytes
were dropped, so the next entry never lands glued onto a torn one. Before every write the
party checks that its path still names the file it has open: once logrotate has moved the
log away (or it was deleted), it opens a new one there and says so in a "reopened" entry.

The policy's daily budgets are counted in hourly counters beside the log
(``teeboost.audit_counters``), not from this file. ``teeboost audit show`` summarises the log
(``teeboost.audit_report``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .audit_counters import (COUNTED_EVENTS, HOUR, BudgetCounters, budget_amounts, counters_path, hours_covering,
                             migrate_counters)
from .audit_entries import bounded, cap_string, parse_entry, timestamp
from .errors import ConfigError

__all__ = ["AuditLog", "REFUSALS_PER_MINUTE", "REFUSALS_PER_MINUTE_ALL"]

REFUSALS_PER_MINUTE = 20  # "refused" entries per (reason, peer) per window
REFUSALS_PER_MINUTE_ALL = 200  # "refused" entries per window, all reasons and peers together
REFUSAL_WINDOW = 60.0  # seconds
_MAX_REFUSAL_KEYS = 1024  # (reason, peer) windows tracked at once; more peers share one window
_OTHER_PEERS = "(other peers)"
_REPAIR_KEEP = 1 << 20  # a torn tail up to this size is checked for being a whole entry


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


# -- opening the log


def _open_log(path: Path) -> tuple[int, tuple[int, int], dict[str, Any] | None]:
    """(fd, (device, inode), repair): the log opened for appending, its torn tail repaired."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                     stat.S_IRUSR | stat.S_IWUSR)
    except OSError as exc:
        raise ConfigError(f"cannot open the audit log {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"the audit log {path} is not a regular file")
        repair = _repair_tail(fd, info.st_size)
    except OSError as exc:
        os.close(fd)
        raise ConfigError(f"cannot repair the audit log {path}: {exc.strerror}") from None
    except BaseException:
        os.close(fd)
        raise
    return fd, (info.st_dev, info.st_ino), repair


def _repair_tail(fd: int, size: int) -> dict[str, Any] | None:
    """A file that does not end with a newline ends in a line torn by a crash: cut it off (or,
    if it is a whole entry missing only its newline, terminate it). What was done, or None."""
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return None
    start, end = 0, size
    while end > 0:
        begin = max(0, end - 65_536)
        found = os.pread(fd, end - begin, begin).rfind(b"\n")
        if found >= 0:
            start = begin + found + 1
            break
        end = begin
    torn = size - start
    tail = os.pread(fd, torn, start) if torn <= _REPAIR_KEEP else b""
    if tail and isinstance(entry := parse_entry(tail), dict) and "event" in entry and "epoch" in entry:
        _write_all(fd, b"\n")
        os.fsync(fd)
        return {"action": "terminated", "offset": start, "dropped_bytes": 0, "kept_bytes": torn}
    digest = hashlib.sha256()
    for offset in range(start, size, 1 << 20):
        digest.update(os.pread(fd, min(1 << 20, size - offset), offset))
    os.ftruncate(fd, start)
    os.fsync(fd)
    return {"action": "truncated", "offset": start, "dropped_bytes": torn, "dropped_sha256": digest.hexdigest()}


# -- the log


@dataclass
class _Window:
    start: float
    written: int = 0
    suppressed: int = 0
    last: dict[str, Any] = field(default_factory=dict)


class AuditLog:
    """Append-only JSON lines at ``path`` (None: a party with no audit log, which records
    nothing and counts nothing)."""

    def __init__(self, path: Path | None, party: str, *, clock: Callable[[], float] = time.time,
                 refusals_per_minute: int = REFUSALS_PER_MINUTE,
                 refusals_per_minute_all: int = REFUSALS_PER_MINUTE_ALL) -> None:
        self.path = Path(path) if path is not None else None
        self.party = party
        self.clock = clock
        self.refusals_per_minute = refusals_per_minute
        self.refusals_per_minute_all = refusals_per_minute_all
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._ident: tuple[int, int] | None = None
        self._counters: BudgetCounters | None = None
        self._policy: Any = None  # the last "start" entry's policy, repeated when the log is reopened
        self._reopen_failed = False
        self._windows: dict[tuple[str, str], _Window] = {}
        self._all = _Window(-math.inf)
        self._next_sweep = math.inf
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd, self._ident, repair = _open_log(self.path)
        try:
            self._counters = BudgetCounters(counters_path(self.path), party)
            now = self.clock()
            migration = None
            if not self._counters.migrated():
                migration = migrate_counters(self.path, self._counters, now)
            else:
                self._counters.prune(int(now // HOUR))
        except BaseException:
            self.close()
            raise
        with self._lock:
            if repair is not None:
                self._append("repaired", repair, now)
            if migration is not None and migration["lines"]:
                self._append("budgets migrated", migration, now)

    # -- writing

    def write(self, event: str, **fields: Any) -> None:
        with self._lock:
            if self._fd is None:
                return
            now = self.clock()
            self._sweep(now)
            self._append(event, fields, now)

    def refused(self, reason: str, *, peer: str, address: str = "", request: str = "", rule: str = "",
                detail: str = "", run_id: str = "") -> None:
        """A "refused" entry, at most ``refusals_per_minute`` per (reason, peer) a minute (and
        ``refusals_per_minute_all`` in all): the rest are counted, and summed up in a
        "refusals suppressed" entry once the minute is over, or when the log is closed."""
        fields: dict[str, Any] = {"reason": reason, "peer": peer}
        for name, value in (("address", address), ("request", request), ("rule", rule), ("detail", detail),
                            ("run_id", run_id)):
            if value:
                fields[name] = value
        with self._lock:
            if self._fd is None:
                return
            now = self.clock()
            self._sweep(now)
            key = (cap_string(str(reason))[:120], cap_string(str(peer))[:200])
            window = self._windows.get(key)
            if window is None:
                if len(self._windows) >= _MAX_REFUSAL_KEYS:
                    key = (key[0], _OTHER_PEERS)
                    window = self._windows.get(key)
                if window is None:
                    window = self._windows[key] = _Window(now)
                    self._next_sweep = min(self._next_sweep, now + REFUSAL_WINDOW)
            if now >= self._all.start + REFUSAL_WINDOW:
                self._all = _Window(now)
            if window.written < self.refusals_per_minute and self._all.written < self.refusals_per_minute_all:
                window.written += 1
                self._all.written += 1
                self._append("refused", fields, now)
            else:
                window.suppressed += 1
                window.last = {k: fields[k] for k in ("address", "request", "rule", "detail", "run_id") if k in fields}

    def _sweep(self, now: float, *, every: bool = False) -> None:
        """Close the refusal windows that are over (``every``: all of them), writing what each suppressed."""
        if not every and now < self._next_sweep:
            return
        upcoming = math.inf
        for key, window in list(self._windows.items()):
            ends = window.start + REFUSAL_WINDOW
            if every or now >= ends:
                del self._windows[key]
                if window.suppressed:
                    self._append("refusals suppressed", {
                        "reason": key[0], "peer": key[1], "suppressed": window.suppressed, "written": window.written,
                        "since": timestamp(window.start), "until": timestamp(min(now, ends)), "window_seconds": REFUSAL_WINDOW,
                        "limit": self.refusals_per_minute, "last": window.last}, now)
            else:
                upcoming = min(upcoming, ends)
        self._next_sweep = upcoming

    def _append(self, event: str, fields: dict[str, Any], now: float) -> None:
        """One line (the lock is held). A counted event goes into the counters first, in its own
        transaction: a crash between the two over-counts, never under-counts."""
        entry: dict[str, Any] = {"time": timestamp(now), "epoch": round(now, 3), "party": self.party,
                                 "event": cap_string(str(event))}
        entry.update(bounded(fields))
        line = (json.dumps(entry, sort_keys=False) + "\n").encode("utf-8")
        if event in COUNTED_EVENTS and self._counters is not None:
            amounts = {rule: amount for rule, amount in budget_amounts(event, entry).items() if amount}
            if amounts:
                self._counters.add(int(now // HOUR), amounts)
        if event == "start" and "policy" in entry:
            self._policy = entry["policy"]
        self._follow_rotation(now)
        _write_all(self._fd, line)

    def _follow_rotation(self, now: float) -> None:
        """If the path no longer names the open file (moved by logrotate, or deleted), open a new one there."""
        try:
            info = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            why = "the log was moved away or deleted"
        except OSError as exc:
            why = f"the log cannot be checked ({exc.strerror})"
        else:
            if (info.st_dev, info.st_ino) == self._ident:
                return
            why = "another file is at the log's path (rotated)"
        old_fd, old_ident = self._fd, self._ident
        try:
            fd, ident, repair = _open_log(self.path)
        except ConfigError as exc:
            if not self._reopen_failed:  # said once, in the file still open: nothing is lost
                self._reopen_failed = True
                self._write_line(old_fd, {"time": timestamp(now), "epoch": round(now, 3), "party": self.party,
                                          "event": "reopen failed", "reason": cap_string(why), "detail": cap_string(str(exc))})
            return
        self._reopen_failed = False
        self._fd, self._ident = fd, ident
        os.close(old_fd)
        reopened: dict[str, Any] = {"time": timestamp(now), "epoch": round(now, 3), "party": self.party,
                                    "event": "reopened", "reason": why,
                                    "previous": {"device": old_ident[0], "inode": old_ident[1]}}
        if self._policy is not None:
            reopened["policy"] = self._policy
        self._write_line(fd, reopened)
        if repair is not None:
            self._write_line(fd, {"time": timestamp(now), "epoch": round(now, 3), "party": self.party, "event": "repaired",
                                  **repair})

    @staticmethod
    def _write_line(fd: int, entry: dict[str, Any]) -> None:
        _write_all(fd, (json.dumps(entry) + "\n").encode("utf-8"))

    # -- budgets

    def usage(self, seconds: float) -> dict[str, int]:
        """What budgets count, over the last ``seconds`` (by the hour: the window is ``seconds``
        plus the current hour so far, never shorter), from the counters beside the log."""
        with self._lock:
            if self._counters is None:
                return Counter()
            return self._counters.usage(int(self.clock() // HOUR) - hours_covering(seconds))

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                try:
                    self._sweep(self.clock(), every=True)
                finally:
                    os.close(self._fd)
                    self._fd = None
            if self._counters is not None:
                self._counters.close()
                self._counters = None

