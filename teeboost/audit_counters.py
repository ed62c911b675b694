"""The daily budgets' counters beside an audit log: per budget rule, per hour, in SQLite.

The policy's daily budgets are not counted from the log: each counted event (alignment ids,
runs, prediction rows) is added, in one SQLite transaction before its line is written, to
per-rule hourly counters beside the log (``counters_path``: ``audit-telco.jsonl`` ->
``audit-telco.counters.sqlite``), pruned after 25 hours. So a restart, moving, rotating or
deleting the log resets nothing, and starting a party takes the same time whatever the log's
size. A log written before the counters existed is read once, streamed, for its last 25 hours
(``migrate_counters``). ``budget_amounts`` says what one entry adds to each budget.
"""

from __future__ import annotations

import math
import os
import re
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from .audit_entries import parse_entry
from .errors import ConfigError

__all__ = ["COUNTED_EVENTS", "BUDGET_RULES", "HOUR", "KEEP_HOURS", "counters_path", "budget_amounts",
           "BudgetCounters", "hours_covering", "read_counters", "migrate_counters"]

COUNTED_EVENTS = ("align", "predict", "setup")  # the events daily budgets are counted from
BUDGET_RULES = ("max_runs_per_day", "max_psi_ids_per_day", "max_prediction_rows_per_day")
HOUR = 3600
KEEP_HOURS = 25  # counters older than this many hours (before the current one) are pruned

_EPOCH = re.compile(rb'"epoch":\s*(-?[0-9][0-9.eE+-]*)')


def counters_path(audit_log: Path) -> Path:
    """The budget counters beside an audit log: ``audit-telco.jsonl`` -> ``audit-telco.counters.sqlite``."""
    audit_log = Path(audit_log)
    return audit_log.with_name(audit_log.name.removesuffix(".jsonl") + ".counters.sqlite")


def budget_amounts(event: str, entry: dict[str, Any]) -> dict[str, int]:
    """What one entry adds to each daily budget."""
    if event == "align":
        return {"max_psi_ids_per_day": int(entry.get("ids", 0))}
    if event == "predict":
        return {"max_prediction_rows_per_day": int(entry.get("rows", 0))}
    if event == "setup":
        return {"max_runs_per_day": 1,
                "max_prediction_rows_per_day": int((entry.get("rows") or {}).get("test", 0))}
    return {}


class BudgetCounters:
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
            self._db.execute("PRAGMA synchronous=NORMAL")  # a process crash loses no commit (docs/online-scoring.md)
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
            self._db.execute("DELETE FROM used WHERE hour < ?", (hour - KEEP_HOURS,))

        self._transaction(statements)

    def load(self, totals: dict[tuple[str, int], int], hour: int, how: str) -> None:
        """Replace every counter (a migration), and mark the counters as migrated."""
        def statements() -> None:
            self._db.execute("DELETE FROM used")
            self._db.executemany("INSERT INTO used VALUES (?, ?, ?)",
                                 [(rule, h, amount) for (rule, h), amount in totals.items()])
            self._db.execute("DELETE FROM used WHERE hour < ?", (hour - KEEP_HOURS,))
            self._db.execute("INSERT INTO meta VALUES ('migrated', ?) ON CONFLICT (name) DO UPDATE SET "
                             "value = excluded.value", (how,))

        self._transaction(statements)

    def prune(self, hour: int) -> None:
        self._db.execute("DELETE FROM used WHERE hour < ?", (hour - KEEP_HOURS,))

    def usage(self, since_hour: int) -> Counter:
        used: Counter = Counter()
        for rule, amount in self._db.execute("SELECT rule, SUM(amount) FROM used WHERE hour >= ? GROUP BY rule",
                                             (since_hour,)):
            used[rule] = int(amount)
        return used

    def close(self) -> None:
        self._db.close()


def hours_covering(seconds: float) -> int:
    """Whole hours that cover ``seconds`` (the current, partial hour comes on top)."""
    return max(1, math.ceil(seconds / HOUR))


def read_counters(audit_log: Path, seconds: float = 86_400.0, *, now: float | None = None) -> Counter | None:
    """What the budget counters beside ``audit_log`` hold for the last ``seconds`` (by the hour:
    never less than ``seconds``), or None if there are none."""
    path = counters_path(audit_log)
    if not path.is_file():
        return None
    now = time.time() if now is None else now
    try:
        counters = BudgetCounters(path, "?")
    except ConfigError:  # e.g. an auditor's read-only copy: counted from the log instead
        return None
    try:
        return counters.usage(int(now // HOUR) - hours_covering(seconds))
    finally:
        counters.close()


def migrate_counters(log: Path, counters: BudgetCounters, now: float) -> dict[str, Any]:
    """Fill empty counters from an existing log's last hours, streaming it: only lines that may
    be counted, and fall in the window, are parsed."""
    hour = int(now // HOUR)
    since = (hour - KEEP_HOURS) * HOUR
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
                entry = parse_entry(raw)
                if not isinstance(entry, dict):
                    skipped += 1
                    continue
                if entry.get("event") not in COUNTED_EVENTS:
                    continue
                try:
                    epoch = float(entry["epoch"])
                    amounts = budget_amounts(entry["event"], entry)
                except (KeyError, TypeError, ValueError, AttributeError):
                    skipped += 1
                    continue
                if epoch < since:
                    continue
                for rule, amount in amounts.items():
                    totals[(rule, int(epoch // HOUR))] += amount
                counted += 1
    counters.load(dict(totals), hour, f"from {lines} lines of the log")
    return {"lines": lines, "counted": counted, "unreadable": skipped, "hours": KEEP_HOURS}
