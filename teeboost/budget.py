"""A passive party's row ledger: how many bits about each of its rows left in the last 24 h.

The leakage budget (``[policy] max_bits_per_row_per_day``) is per row, because what an
active party learns adds up per customer: one routing answer is one bit about one row (plain,
SecureBoost, N-TEE, 1-TEE); a strict score is counted inside the passive enclave instead
(``teeboost.protocols.strict.enclave.ledger``). Rows are named by a keyed hash of their id (HMAC-SHA256
under a secret kept in the ledger), so the ledger file holds no ids. It is a SQLite database
beside the audit log: a restart, or moving or rotating the audit log, resets nothing; spending
is kept per row and hour and pruned after 25 hours, so its size follows the rows scored in a
day, not the party's history.

A batch that would take any row past the limit is refused whole, before anything is answered:
the refusal gives counts, never which rows.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Iterable

import numpy as np

from .errors import ConfigError
from .policy import DAY_SECONDS, PolicyRefused

__all__ = ["RowLedger", "SealedLedgerFile", "ledger_path", "KEY_BYTES"]

KEY_BYTES = 16  # a row key: the first 16 bytes of HMAC-SHA256(secret, id)
_HOUR = 3600.0


def ledger_path(audit_log: Path) -> Path:
    """The row ledger beside an audit log: ``audit-telco.jsonl`` -> ``audit-telco.budget.sqlite``."""
    return audit_log.with_name(audit_log.name.removesuffix(".jsonl") + ".budget.sqlite")


class RowLedger:
    """Bits spent per row over a sliding day, counted by the hour (the window is therefore 24 to
    25 hours: never shorter than a day)."""

    def __init__(self, path: Path, party: str, *, clock=time.time) -> None:
        self.path = Path(path)
        self.party = party
        self.clock = clock
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not self.path.exists()
        try:
            if fresh:  # created private: row keys are pseudonyms of this party's customers
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value BLOB)")
            self._db.execute("CREATE TABLE IF NOT EXISTS spent (row BLOB, hour INTEGER, bits INTEGER, "
                             "PRIMARY KEY (row, hour)) WITHOUT ROWID")
            self._db.execute("CREATE INDEX IF NOT EXISTS spent_hour ON spent (hour)")
            found = self._db.execute("SELECT value FROM meta WHERE name = 'secret'").fetchone()
            if found is None:
                self._db.execute("INSERT INTO meta VALUES ('secret', ?)", (os.urandom(32),))
                found = self._db.execute("SELECT value FROM meta WHERE name = 'secret'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"{self.path}: the row ledger of party {party!r} cannot be used ({exc}); "
                              "it must be the SQLite file this party wrote") from None
        self._secret = bytes(found[0])
        self.prune()

    # -- row names

    def row_keys(self, ids: Iterable) -> np.ndarray:
        """(n, 16) uint8: each id's keyed hash (ids are compared as text)."""
        keys = [hmac.new(self._secret, str(i).encode("utf-8"), hashlib.sha256).digest()[:KEY_BYTES] for i in ids]
        return np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), KEY_BYTES)

    # -- spending

    def _hour(self) -> int:
        return int(self.clock() // _HOUR)

    def spent(self, keys: np.ndarray) -> np.ndarray:
        """Bits spent on each row in the window."""
        with self._lock:
            return self._spent(keys)

    def _spent(self, keys: np.ndarray) -> np.ndarray:
        since = self._hour() - int(DAY_SECONDS // _HOUR)
        found: dict[bytes, int] = {}
        blobs = [bytes(k) for k in keys]
        for start in range(0, len(blobs), 900):  # SQLite binds at most 999 values per statement
            chunk = blobs[start:start + 900]
            marks = ",".join("?" * len(chunk))
            for row, bits in self._db.execute(f"SELECT row, SUM(bits) FROM spent WHERE hour >= ? AND row IN ({marks}) "
                                              "GROUP BY row", (since, *chunk)):
                found[bytes(row)] = int(bits)
        return np.array([found.get(b, 0) for b in blobs], dtype=np.int64)

    def check(self, keys: np.ndarray, bits: np.ndarray, limit: int | None, what: str) -> None:
        """``charge`` without recording: raises the refusal ``charge`` would (an online answer's
        refusal is sealed in its place before the answer is made; ``charge`` still checks after)."""
        unique, totals = _merged(keys, bits)
        if unique.shape[0]:
            with self._lock:
                self._refuse_over(unique, totals, limit, what)

    def charge(self, keys: np.ndarray, bits: np.ndarray, limit: int | None, what: str) -> None:
        """Record ``bits[i]`` more about row ``keys[i]`` (a row may appear more than once), or
        refuse the whole batch if any row would pass ``limit`` in the window."""
        unique, totals = _merged(keys, bits)
        if not unique.shape[0]:
            return
        with self._lock:
            self._refuse_over(unique, totals, limit, what)
            hour = self._hour()
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT INTO spent VALUES (?, ?, ?) ON CONFLICT (row, hour) DO UPDATE SET "
                                     "bits = bits + excluded.bits",
                                     ((bytes(k), hour, int(b)) for k, b in zip(unique, totals)))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def _refuse_over(self, unique: np.ndarray, totals: np.ndarray, limit: int | None, what: str) -> None:
        if limit is None:
            return
        spent = self._spent(unique)
        over = spent + totals > limit
        if over.any():
            raise PolicyRefused(self.party, "max_bits_per_row_per_day", f"{what} would reveal up to "
                                f"{int((spent + totals).max())} bits about {int(over.sum())} of its "
                                f"{unique.shape[0]} row(s) in 24 hours (each already spent up to "
                                f"{int(spent.max())}); at most {limit} bits per row per day")

    def day(self) -> dict[str, int]:
        """The window's spending: rows touched, the largest per row, the total."""
        since = self._hour() - int(DAY_SECONDS // _HOUR)
        with self._lock:
            rows, largest, total = self._db.execute(
                "SELECT COUNT(*), COALESCE(MAX(s), 0), COALESCE(SUM(s), 0) FROM "
                "(SELECT SUM(bits) AS s FROM spent WHERE hour >= ? GROUP BY row)", (since,)).fetchone()
        return {"rows": int(rows), "largest_per_row": int(largest), "total_bits": int(total)}

    def prune(self) -> None:
        """Forget hours older than the window."""
        with self._lock:
            self._db.execute("DELETE FROM spent WHERE hour < ?", (self._hour() - int(DAY_SECONDS // _HOUR) - 1,))

    def get_meta_int(self, name: str) -> int:
        with self._lock:
            found = self._db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return int(found[0]) if found is not None else 0

    def set_meta_int(self, name: str, value: int) -> None:
        with self._lock:
            self._db.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                             (name, int(value)))

    def close(self) -> None:
        with self._lock:
            self._db.close()


class SealedLedgerFile:
    """Where a passive host keeps its strict enclave's sealed row ledger between sessions. The
    host cannot read the blob; it hands it back with the version it last stored, which it keeps
    apart from the blob, in the row ledger (``versions``), so copying an old blob back is
    refused by the enclave. The blob is written first and the version after: a crash between
    the two leaves the blob one version ahead, which the enclave accepts (it only over-counts).

    The online log is appended once per scored batch, so it is synced as a group: each record
    is written (a process crash loses none) and, at most ``ONLINE_SYNC_SECONDS`` later (a timer
    syncs an idle log too), the log is fsynced and only then its version recorded (a power cut
    loses at most that long's records, and never leaves the recorded version ahead of the log).

    Each label owner (the active identity key the party pins) has ledgers of its own: the
    enclave seals them to that key (``strict/enclave/ledger.ledger_scope``) and opens them only
    in sessions it signed, so a new key starts new files (``owner``: a digest of the key). A
    new key would so start every row's day afresh (red team: re-pinning after a key rotation
    scored a customer whose day was spent), so strict sessions for a new key are refused
    until the other keys' ledgers have been quiet for a whole window (``_check_owner_change``)."""

    ONLINE_SYNC_SECONDS = 1.0
    #: how long another label owner's ledgers must have been quiet: the row window, 24 to 25 hours
    OWNER_CHANGE_WAIT = DAY_SECONDS + 3600.0

    def __init__(self, path: Path, versions: "RowLedger", owner: str = "", stem: str = "") -> None:
        self.path = Path(path)
        self.versions = versions
        self.owner = owner
        self.stem = stem  # the audit log's name without .jsonl: every owner's files start with it
        self._meta = f":{owner}" if owner else ""
        self._lock = threading.Lock()
        self._online_lock = threading.Lock()
        self._online_fd: int | None = None
        self._unsynced: int | None = None  # the version of the last record written, not yet synced
        self._synced_at = float("-inf")  # never: the first record syncs at once, whatever the uptime
        self._timer: threading.Timer | None = None
        self._closed = False

    @staticmethod
    def beside(audit_log: Path, versions: "RowLedger", label_owner: bytes = b"") -> "SealedLedgerFile":
        """``label_owner``: the active party's pinned identity key (b"": none pinned)."""
        owner = hashlib.sha256(label_owner).hexdigest()[:16] if label_owner else ""
        stem = audit_log.name.removesuffix(".jsonl")
        name = stem + (f".{owner}" if owner else "") + ".strict-ledger.sealed"
        return SealedLedgerFile(audit_log.with_name(name), versions, owner, stem)

    def _check_owner_change(self) -> None:
        """Refuse while another label owner's strict ledgers (an earlier identity key's, or
        those from before ledgers were kept per key) were written within the window: this key's
        own start empty, and each row's spending of the day would be forgotten."""
        if not self.stem:
            return
        mine = {self.path.name, self.online_log.name}
        now = time.time()
        for pattern in (f"{self.stem}.*strict-ledger.sealed", f"{self.stem}.*strict-online-ledger.log"):
            for other in self.path.parent.glob(pattern):
                if other.name in mine:
                    continue
                try:
                    written = other.stat().st_mtime
                except FileNotFoundError:
                    continue
                if now - written < self.OWNER_CHANGE_WAIT:
                    ready = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(written + self.OWNER_CHANGE_WAIT))
                    raise PolicyRefused(self.versions.party, "max_bits_per_row_per_day",
                                        f"the label owner's identity key is not the one {other.name} was kept for, "
                                        f"and that ledger was charged within the last day; strict sessions for the "
                                        f"new key (scoring, and training with validation rows) start at {ready}, "
                                        "once every row's day under the old key is over (a new key starts an empty "
                                        f"ledger); to start now, giving every row a fresh day, move {other.name} "
                                        "aside")

    def version(self) -> int:
        """The version the host last stored (without reading the blob)."""
        return self.versions.get_meta_int("strict_ledger_version" + self._meta)

    def load(self) -> tuple[bytes, int]:
        self._check_owner_change()
        version = self.version()
        try:
            return self.path.read_bytes(), version
        except FileNotFoundError:
            return b"", version

    def store(self, blob: bytes, version: int) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(blob)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)
        self.versions.set_meta_int("strict_ledger_version" + self._meta, version)

    def locked(self):
        """One session at a time reads, charges and stores the ledger (batch and online)."""
        return self._lock

    # -- the online ledger's log (``strict/enclave/online_ledger``): sealed records, appended

    @property
    def online_log(self) -> Path:
        return self.path.with_name(self.path.name.removesuffix(".strict-ledger.sealed") + ".strict-online-ledger.log")

    def load_online(self) -> tuple[bytes, int]:
        self._check_owner_change()
        version = self.versions.get_meta_int("online_ledger_version" + self._meta)
        try:
            return self.online_log.read_bytes(), version
        except FileNotFoundError:
            return b"", version

    def append_online(self, record: bytes, version: int) -> None:
        """The record is written before the answer it charged leaves; its version is recorded
        once the log is synced after it (within ``ONLINE_SYNC_SECONDS``)."""
        with self._online_lock:
            if self._closed:
                raise ConfigError(f"{self.online_log}: the online ledger log is closed (the party is stopping); "
                                  "nothing more is charged or answered")
            if self._online_fd is None:
                self._online_fd = os.open(self.online_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW,
                                          0o600)
            data = len(record).to_bytes(4, "big") + record
            if os.write(self._online_fd, data) != len(data):
                raise OSError(f"{self.online_log}: a short write appending a ledger record")
            self._unsynced = version
            due = self._synced_at + self.ONLINE_SYNC_SECONDS - time.monotonic()
            if due <= 0:
                self._sync_online()
            elif self._timer is None:  # an idle log is synced too: its tail never waits for traffic
                self._timer = threading.Timer(due, self._sync_later)
                self._timer.daemon = True
                self._timer.start()

    def _sync_later(self) -> None:
        with self._online_lock:
            self._timer = None
            if not self._closed:
                self._sync_online()

    def _sync_online(self) -> None:
        """The log to disk, then its version (the online lock is held)."""
        if self._online_fd is not None and self._unsynced is not None:
            os.fsync(self._online_fd)
            self.versions.set_meta_int("online_ledger_version" + self._meta, self._unsynced)
        self._unsynced = None
        self._synced_at = time.monotonic()

    def _close_online(self) -> None:
        """Sync what was appended and close the file (the online lock is held)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._sync_online()
        if self._online_fd is not None:
            os.close(self._online_fd)
            self._online_fd = None

    def flush_online(self) -> None:
        """The party is stopping: what was appended is synced, and nothing more is."""
        with self._online_lock:
            self._close_online()
            self._closed = True

    def restart_online(self, base: bytes, version: int) -> None:
        """The log starts again from a base record holding every live entry (the appends before
        it synced first, and none in between: the online lock is held throughout)."""
        with self._online_lock:
            self._close_online()
            tmp = self.online_log.with_name(self.online_log.name + ".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(len(base).to_bytes(4, "big") + base)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.online_log)
            self.versions.set_meta_int("online_ledger_version" + self._meta, version)


def _merged(keys: np.ndarray, bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """-> (distinct row keys charged, bits each): repeated rows' bits add up (unique over
    16-byte values, not rows of an array: np.unique(axis=0) costs more than the SQL ``charge``
    runs, at the sizes online scoring sends)."""
    keys = np.ascontiguousarray(keys, dtype=np.uint8).reshape(-1, KEY_BYTES)
    bits = np.asarray(bits, dtype=np.int64).reshape(-1)
    if keys.shape[0] != bits.size:
        raise ValueError("one charge per row key")
    charged = bits > 0
    keys, bits = keys[charged], bits[charged]
    flat = np.ascontiguousarray(keys).view(np.dtype((np.void, KEY_BYTES))).reshape(-1)
    unique, inverse = np.unique(flat, return_inverse=True)
    totals = np.bincount(inverse.reshape(-1), weights=bits, minlength=unique.size).astype(np.int64)
    return unique.view(np.uint8).reshape(-1, KEY_BYTES), totals
