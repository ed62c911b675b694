"""A party's own record of what it served and to whom: JSON lines, one event per line.

Each line has the time, this party's name, the event, and what the event is about: the run
id, the peer's certificate fingerprint (SHA-256 of its DER certificate), the protocol and
parameters, row counts, per-run counts of every query type, and every refusal with its rule.
Ids and raw values never go in: the log is meant to be shown to auditors. Every string in an
entry is cut at ``MAX_STRING`` characters (with a marker saying how much was cut), and every
list or table at ``MAX_ITEMS`` items, however deeply nested, so a peer cannot make a line
unbounded. Refusals written with ``AuditLog.refused`` are rate-limited: at most
``REFUSALS_PER_MINUTE`` per (reason, peer) per minute (and ``REFUSALS_PER_MINUTE_ALL`` in all);
the rest are counted, and a "refusals suppressed" entry gives the count when the minute is over
(or when the log is closed).

The file is opened for appending only, created mode 0600 and never through a symlink; each
line goes out in one write, so a crash loses at most the line being written. A line torn by a
crash is repaired when the log is next opened: the torn bytes are cut off (a complete entry
missing only its newline is terminated instead) and a "repaired" entry says how many bytes
were dropped, so the next entry never lands glued onto a torn one. Before every write the
party checks that its path still names the file it has open: once logrotate has moved the
log away (or it was deleted), it opens a new one there and says so in a "reopened" entry.

The policy's daily budgets are not counted from this file: each counted event (alignment ids,
runs, prediction rows) is added, in one SQLite transaction before the line is written, to
per-rule hourly counters beside the log (``counters_path``: ``audit-telco.jsonl`` ->
``audit-telco.counters.sqlite``), pruned after 25 hours. So a restart, moving, rotating or
deleting the log resets nothing, and starting a party takes the same time whatever the log's
size. A log written before the counters existed is read once, streamed, for its last 25 hours.
``teeboost audit show`` summarises the log.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import re
import sqlite3
import stat
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from .errors import ConfigError

__all__ = ["AuditLog", "read_audit", "iter_audit", "usage_since", "summarise", "leakage_lines", "counters_path",
           "read_counters", "MAX_STRING", "MAX_ITEMS", "REFUSALS_PER_MINUTE", "REFUSALS_PER_MINUTE_ALL"]

_COUNTED = ("align", "predict", "setup")  # the events daily budgets are counted from
BUDGET_RULES = ("max_runs_per_day", "max_psi_ids_per_day", "max_prediction_rows_per_day")
_HOUR = 3600
_KEEP_HOURS = 25  # counters older than this many hours (before the current one) are pruned

MAX_STRING = 500  # characters of any one string in an entry
MAX_ITEMS = 10_000  # items of any one list or table in an entry
MAX_DEPTH = 12  # nesting below this is cut
REFUSALS_PER_MINUTE = 20  # "refused" entries per (reason, peer) per window
REFUSALS_PER_MINUTE_ALL = 200  # "refused" entries per window, all reasons and peers together
REFUSAL_WINDOW = 60.0  # seconds
_MAX_REFUSAL_KEYS = 1024  # (reason, peer) windows tracked at once; more peers share one window
_OTHER_PEERS = "(other peers)"
_REPAIR_KEEP = 1 << 20  # a torn tail up to this size is checked for being a whole entry

_EPOCH = re.compile(rb'"epoch":\s*(-?[0-9][0-9.eE+-]*)')
_ENTRY_START = b'{"time": '


def counters_path(audit_log: Path) -> Path:
    """The budget counters beside an audit log: ``audit-telco.jsonl`` -> ``audit-telco.counters.sqlite``."""
    audit_log = Path(audit_log)
    return audit_log.with_name(audit_log.name.removesuffix(".jsonl") + ".counters.sqlite")


# -- what goes into an entry


def _cap(text: str) -> str:
    if len(text) <= MAX_STRING:
        return text
    return f"{text[:MAX_STRING]}...[cut: {len(text) - MAX_STRING} more chars]"


def _bounded(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON-able data with every string capped and every container bounded."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return _cap(value)
    if depth >= MAX_DEPTH:
        return "...[cut: nested too deep]"
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for number, (key, item) in enumerate(value.items()):
            if number >= MAX_ITEMS:
                out["..."] = f"[cut: {len(value) - MAX_ITEMS} more items]"
                break
            if isinstance(key, str):
                key = _cap(key)
            elif not (key is None or isinstance(key, (bool, int, float))):
                key = _cap(str(key))
            out[key] = _bounded(item, depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        items = [_bounded(item, depth + 1) for item in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            items.append(f"...[cut: {len(value) - MAX_ITEMS} more items]")
        return items
    if hasattr(value, "tolist") and hasattr(value, "shape"):  # numpy arrays and scalars
        if len(getattr(value, "shape", ())) >= 1 and value.shape[0] > MAX_ITEMS:
            return _bounded(list(value[:MAX_ITEMS].tolist()) + [f"...[cut: {value.shape[0] - MAX_ITEMS} more items]"],
                            depth)
        return _bounded(value.tolist(), depth)
    if hasattr(value, "item"):
        try:
            return _bounded(value.item(), depth)
        except (TypeError, ValueError):
            pass
    return _cap(str(value))


def _amounts(event: str, entry: dict[str, Any]) -> dict[str, int]:
    """What one entry adds to each daily budget."""
    if event == "align":
        return {"max_psi_ids_per_day": int(entry.get("ids", 0))}
    if event == "predict":
        return {"max_prediction_rows_per_day": int(entry.get("rows", 0))}
    if event == "setup":
        return {"max_runs_per_day": 1,
                "max_prediction_rows_per_day": int((entry.get("rows") or {}).get("test", 0))}
    return {}


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).isoformat(timespec="milliseconds")


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
    if tail and isinstance(entry := _parse(tail), dict) and "event" in entry and "epoch" in entry:
        _write_all(fd, b"\n")
        os.fsync(fd)
        return {"action": "terminated", "offset": start, "dropped_bytes": 0, "kept_bytes": torn}
    digest = hashlib.sha256()
    for offset in range(start, size, 1 << 20):
        digest.update(os.pread(fd, min(1 << 20, size - offset), offset))
    os.ftruncate(fd, start)
    os.fsync(fd)
    return {"action": "truncated", "offset": start, "dropped_bytes": torn, "dropped_sha256": digest.hexdigest()}


# -- the budget counters


class _Counters:
    """Per budget rule, per hour: how much was served. A SQLite file beside the log."""

    def __init__(self, path: Path, party: str) -> None:
        self.path = path
        if path.is_symlink():
            raise ConfigError(f"{path}: the budget counters of party {party!r} must not be a symlink")
        try:
            if not path.exists():
                try:  # created private, never through a symlink
                    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
                except FileExistsError:
                    pass
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30.0)
        except OSError as exc:
            raise ConfigError(f"cannot open the budget counters {path}: {exc.strerror}") from None
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open the budget counters {path}: {exc}") from None
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value)")
            self._db.execute("CREATE TABLE IF NOT EXISTS used (rule TEXT, hour INTEGER, amount INTEGER, "
                             "PRIMARY KEY (rule, hour)) WITHOUT ROWID")
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise ConfigError(f"{path}: the budget counters of party {party!r} cannot be used ({exc}); it must be "
                              "the SQLite file this party wrote") from None

    def migrated(self) -> bool:
        return self._db.execute("SELECT value FROM meta WHERE name = 'migrated'").fetchone() is not None

    def _transaction(self, statements: Callable[[], None]) -> None:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            statements()
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def add(self, hour: int, amounts: dict[str, int]) -> None:
        def statements() -> None:
            self._db.executemany("INSERT INTO used VALUES (?, ?, ?) ON CONFLICT (rule, hour) DO UPDATE SET "
                                 "amount = amount + excluded.amount",
                                 [(rule, hour, amount) for rule, amount in amounts.items()])
            self._db.execute("DELETE FROM used WHERE hour < ?", (hour - _KEEP_HOURS,))

        self._transaction(statements)

    def load(self, totals: dict[tuple[str, int], int], hour: int, how: str) -> None:
        """Replace every counter (a migration), and mark the counters as migrated."""
        def statements() -> None:
            self._db.execute("DELETE FROM used")
            self._db.executemany("INSERT INTO used VALUES (?, ?, ?)",
                                 [(rule, h, amount) for (rule, h), amount in totals.items()])
            self._db.execute("DELETE FROM used WHERE hour < ?", (hour - _KEEP_HOURS,))
            self._db.execute("INSERT INTO meta VALUES ('migrated', ?) ON CONFLICT (name) DO UPDATE SET "
                             "value = excluded.value", (how,))

        self._transaction(statements)

    def prune(self, hour: int) -> None:
        self._db.execute("DELETE FROM used WHERE hour < ?", (hour - _KEEP_HOURS,))

    def usage(self, since_hour: int) -> Counter:
        used: Counter = Counter()
        for rule, amount in self._db.execute("SELECT rule, SUM(amount) FROM used WHERE hour >= ? GROUP BY rule",
                                             (since_hour,)):
            used[rule] = int(amount)
        return used

    def close(self) -> None:
        self._db.close()


def _hours(seconds: float) -> int:
    """Whole hours that cover ``seconds`` (the current, partial hour comes on top)."""
    return max(1, math.ceil(seconds / _HOUR))


def read_counters(audit_log: Path, seconds: float = 86_400.0, *, now: float | None = None) -> Counter | None:
    """What the budget counters beside ``audit_log`` hold for the last ``seconds`` (by the hour:
    never less than ``seconds``), or None if there are none."""
    path = counters_path(audit_log)
    if not path.is_file():
        return None
    now = time.time() if now is None else now
    try:
        counters = _Counters(path, "?")
    except ConfigError:  # e.g. an auditor's read-only copy: counted from the log instead
        return None
    try:
        return counters.usage(int(now // _HOUR) - _hours(seconds))
    finally:
        counters.close()


def _migrate(log: Path, counters: _Counters, now: float) -> dict[str, Any]:
    """Fill empty counters from an existing log's last hours, streaming it: only lines that may
    be counted, and fall in the window, are parsed."""
    hour = int(now // _HOUR)
    since = (hour - _KEEP_HOURS) * _HOUR
    totals: Counter = Counter()
    lines = counted = skipped = 0
    try:
        handle = open(log, "rb")
    except FileNotFoundError:
        handle = None
    if handle is not None:
        with handle:
            for raw in handle:
                lines += 1
                if b'"align"' not in raw and b'"predict"' not in raw and b'"setup"' not in raw:
                    continue
                found = _EPOCH.search(raw, 0, 96)  # our lines: time, then epoch
                if found is not None:
                    try:
                        if float(found.group(1)) < since:
                            continue
                    except ValueError:
                        pass
                entry = _parse(raw)
                if not isinstance(entry, dict):
                    skipped += 1
                    continue
                if entry.get("event") not in _COUNTED:
                    continue
                try:
                    epoch = float(entry["epoch"])
                    amounts = _amounts(entry["event"], entry)
                except (KeyError, TypeError, ValueError, AttributeError):
                    skipped += 1
                    continue
                if epoch < since:
                    continue
                for rule, amount in amounts.items():
                    totals[(rule, int(epoch // _HOUR))] += amount
                counted += 1
    counters.load(dict(totals), hour, f"from {lines} lines of the log")
    return {"lines": lines, "counted": counted, "unreadable": skipped, "hours": _KEEP_HOURS}


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
        self._counters: _Counters | None = None
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
            self._counters = _Counters(counters_path(self.path), party)
            now = self.clock()
            migration = None
            if not self._counters.migrated():
                migration = _migrate(self.path, self._counters, now)
            else:
                self._counters.prune(int(now // _HOUR))
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
            key = (_cap(str(reason))[:120], _cap(str(peer))[:200])
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
                        "since": _iso(window.start), "until": _iso(min(now, ends)), "window_seconds": REFUSAL_WINDOW,
                        "limit": self.refusals_per_minute, "last": window.last}, now)
            else:
                upcoming = min(upcoming, ends)
        self._next_sweep = upcoming

    def _append(self, event: str, fields: dict[str, Any], now: float) -> None:
        """One line (the lock is held). A counted event goes into the counters first, in its own
        transaction: a crash between the two over-counts, never under-counts."""
        entry: dict[str, Any] = {"time": _iso(now), "epoch": round(now, 3), "party": self.party,
                                 "event": _cap(str(event))}
        entry.update(_bounded(fields))
        line = (json.dumps(entry, sort_keys=False) + "\n").encode("utf-8")
        if event in _COUNTED and self._counters is not None:
            amounts = {rule: amount for rule, amount in _amounts(event, entry).items() if amount}
            if amounts:
                self._counters.add(int(now // _HOUR), amounts)
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
                self._write_line(old_fd, {"time": _iso(now), "epoch": round(now, 3), "party": self.party,
                                          "event": "reopen failed", "reason": _cap(why), "detail": _cap(str(exc))})
            return
        self._reopen_failed = False
        self._fd, self._ident = fd, ident
        os.close(old_fd)
        reopened: dict[str, Any] = {"time": _iso(now), "epoch": round(now, 3), "party": self.party,
                                    "event": "reopened", "reason": why,
                                    "previous": {"device": old_ident[0], "inode": old_ident[1]}}
        if self._policy is not None:
            reopened["policy"] = self._policy
        self._write_line(fd, reopened)
        if repair is not None:
            self._write_line(fd, {"time": _iso(now), "epoch": round(now, 3), "party": self.party, "event": "repaired",
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
            return self._counters.usage(int(self.clock() // _HOUR) - _hours(seconds))

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


# -- reading the log


def _parse(raw: bytes) -> Any:
    """One line's entry; a line that is a torn write with a whole entry glued after it (what
    earlier versions appended after a crash) gives the whole entry. None if neither."""
    try:
        return json.loads(raw)
    except ValueError:
        pass
    if not raw.startswith(b"{"):
        return None
    start = raw.find(_ENTRY_START, 1)
    for _ in range(8):
        if start < 0:
            break
        try:
            entry = json.loads(raw[start:])
        except ValueError:
            start = raw.find(_ENTRY_START, start + 1)
            continue
        return entry if isinstance(entry, dict) and "event" in entry and "epoch" in entry else None
    return None


def iter_audit(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete line, streamed; a torn last line (a crash mid-write) is skipped, any
    other bad line is an error naming it."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            entry = _parse(raw)
            if entry is None:
                if not raw.endswith(b"\n"):  # no newline after it: the write was cut short
                    continue
                raise ConfigError(f"{path}: line {number} is not a JSON audit entry")
            if not isinstance(entry, dict) or "event" not in entry or "epoch" not in entry:
                raise ConfigError(f"{path}: line {number} is not an audit entry (no event or epoch)")
            yield entry


def read_audit(path: Path) -> list[dict[str, Any]]:
    """Every complete line; a torn last line (a crash mid-write) is skipped, any other bad
    line is an error naming it."""
    if path is None or not Path(path).exists():
        return []
    return list(iter_audit(Path(path)))


def usage_since(entries: Iterable[dict[str, Any]], since: float) -> Counter:
    """What budgets count in ``entries`` from ``since`` on (to the second; the party itself
    counts by the hour, in its counters)."""
    used: Counter = Counter()
    for entry in entries:
        if entry.get("epoch", 0) < since or entry["event"] not in _COUNTED:
            continue
        for rule, amount in _amounts(entry["event"], entry).items():
            used[rule] += amount
    return used


def _policy_of(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return next((e["policy"] for e in reversed(entries)
                 if e["event"] in ("start", "reopened") and isinstance(e.get("policy"), dict)), {})


def leakage_lines(entries: list[dict[str, Any]], routing: dict[str, int] | None, now: float) -> list[str]:
    """Bits about this party's rows that left in the last 24 h, against the policy's budget:
    routing answers from the row ledger (``routing``: ``RowLedger.day()``), strict sessions
    from what the passive enclave reported after each one."""
    policy = _policy_of(entries)
    limit = policy.get("max_bits_per_row_per_day")
    budget = f"{limit} bits per row per day" if limit else "no bits budget"
    lines = [f"leakage, last 24 h (budget: {budget}; strict outputs at "
             f"{policy.get('output_bits') or 'full'} bits):"]
    if routing is not None:
        lines.append(f"  routing answers: {routing['rows']} rows, largest {routing['largest_per_row']} bits per row, "
                     f"{routing['total_bits']} bits in all")
    sessions = [e for e in entries if e["event"] == "charged" and e.get("epoch", 0) >= now - 86_400]
    if sessions:
        last = sessions[-1]
        lines.append(f"  strict sessions: {len(sessions)}, {sum(int(e.get('bits', 0)) for e in sessions)} bits charged; "
                     f"the enclave's ledger: {last.get('window_rows', 0)} rows, largest "
                     f"{last.get('window_largest_per_row', 0)} bits per row, {last.get('window_total_bits', 0)} "
                     "bits in all")
    elif routing is None:
        lines.append("  nothing counted")
    rule = "max_bits_per_row_per_day"
    recent = [e for e in entries if e.get("epoch", 0) >= now - 86_400]
    refused = sum(1 for e in recent if e["event"] == "refused" and e.get("rule") == rule)
    refused += sum(int(e.get("suppressed", 0)) for e in recent
                   if e["event"] == "refusals suppressed" and (e.get("last") or {}).get("rule") == rule)
    if refused:
        lines.append(f"  refused for the budget: {refused}")
    return lines


def summarise(entries: list[dict[str, Any]], *, now: float | None = None,
              routing: dict[str, int] | None = None, usage: dict[str, int] | None = None) -> str:
    """Runs served (peer, protocol, parameters, rows, queries), prediction batches, refusals
    (with those the rate limit suppressed), repairs of torn lines, the last 24 hours' use of
    each budget (``usage``: the party's own counters, ``read_counters``; else counted from
    ``entries``) and the bits that left per row (``routing``: the row ledger's ``day()``)."""
    if not entries:
        return "the audit log is empty"
    now = time.time() if now is None else now
    runs: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    predictions: list[dict[str, Any]] = []
    refusals: list[dict[str, Any]] = []
    suppressed: list[dict[str, Any]] = []
    repairs: list[dict[str, Any]] = []
    reopened = 0
    peers: Counter = Counter()
    for entry in entries:
        event = entry["event"]
        if entry.get("peer"):
            peers[str(entry["peer"])] += 1
        if event in ("setup", "run"):
            run = runs.setdefault(entry.get("run_id", "?"), {"queries": Counter()})
            if entry.get("run_id", "?") not in order:
                order.append(entry.get("run_id", "?"))
            run.update({k: entry[k] for k in ("time", "peer", "protocol", "params", "rows") if k in entry})
        elif event in ("queries", "finish", "trained"):
            run = runs.setdefault(entry.get("run_id", "?"), {"queries": Counter()})
            run["queries"].update(entry.get("queries", {}))
            if event in ("finish", "trained"):
                run["finished"] = entry["time"]
                for key in ("n_trees", "metric", "value"):
                    if key in entry:
                        run[key] = entry[key]
        elif event == "predict":
            predictions.append(entry)
        elif event == "refused":
            refusals.append(entry)
        elif event == "refusals suppressed":
            suppressed.append(entry)
        elif event == "repaired":
            repairs.append(entry)
        elif event == "reopened":
            reopened += 1
    party = entries[-1].get("party", "?")
    lines = [f"audit log of party {party!r}: {len(entries)} entries, {entries[0]['time']} .. {entries[-1]['time']}"]
    if reopened and entries[0]["event"] == "reopened":
        lines.append("  (this file begins where the party reopened its log after rotation: earlier entries are in "
                     "the rotated files)")
    lines.append(f"runs: {len(runs)}")
    for run_id in order + [r for r in runs if r not in order]:
        run = runs[run_id]
        params = run.get("params") or {}
        shown = ", ".join(f"{k}={params[k]}" for k in ("n_trees", "max_depth", "min_samples_leaf") if k in params)
        rows = run.get("rows") or {}
        status = f"finished {run['finished']}" if "finished" in run else "not finished"
        queries = ", ".join(f"{k} {v}" for k, v in sorted(run["queries"].items()))
        lines.append(f"  {run.get('time', '?')}  run {str(run_id)[:24]}  {run.get('protocol', '?')}  "
                     f"peer {str(run.get('peer', '?'))[:23]}  {shown}  rows {json.dumps(rows)}  {status}")
        if queries:
            lines.append(f"      queries: {queries}")
    lines.append(f"prediction batches: {len(predictions)}, rows scored: "
                 f"{sum(int(p.get('rows', 0)) for p in predictions)}")
    held_back = sum(int(s.get("suppressed", 0)) for s in suppressed)
    lines.append(f"refusals: {len(refusals)}" + (f" written, {held_back} more suppressed by the rate limit "
                                                 f"({len(suppressed)} summaries)" if held_back else ""))

    def reason(entry: dict[str, Any]) -> str:
        return str(entry.get("rule") or entry.get("reason") or "-")

    by_rule = Counter(reason(r) for r in refusals)
    held_by_reason = Counter()
    for s in suppressed:
        held_by_reason[str((s.get("last") or {}).get("rule") or s.get("reason") or "-")] += int(s.get("suppressed", 0))
    for rule in sorted(set(by_rule) | set(held_by_reason)):
        mine = [r for r in refusals if reason(r) == rule]
        last = f" (last {mine[-1]['time']}: {str(mine[-1].get('detail', ''))[:160]})" if mine else ""
        more = f", {held_by_reason[rule]} more suppressed" if held_by_reason[rule] else ""
        lines.append(f"  {rule}: {by_rule[rule]}{more}{last}")
    if suppressed:
        peers_held = Counter()
        for s in suppressed:
            peers_held[str(s.get("peer", "?"))] += int(s.get("suppressed", 0))
        lines.append("  suppressed by peer: " + ", ".join(f"{p[:40]} {n}" for p, n in peers_held.most_common(5)))
    if repairs:
        dropped = sum(int(r.get("dropped_bytes", 0)) for r in repairs)
        lines.append(f"repairs: {len(repairs)} torn line(s) found on opening the log, {dropped} bytes dropped "
                     f"(last {repairs[-1]['time']})")
    if reopened:
        lines.append(f"reopened after rotation: {reopened}")
    used = usage if usage is not None else usage_since(entries, now - 86_400)
    lines.append("last 24 h: " + ", ".join(f"{k.removeprefix('max_').removesuffix('_per_day')} {used.get(k, 0)}"
                                          for k in BUDGET_RULES)
                 + (" (the party's budget counters)" if usage is not None else ""))
    lines.extend(leakage_lines(entries, routing, now))
    if peers:
        lines.append("peers: " + ", ".join(f"{p} ({n} entries)" for p, n in peers.most_common()))
    return "\n".join(lines)
