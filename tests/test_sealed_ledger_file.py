"""The strict online ledger's log on the passive host: every record is written before its
answer leaves (a killed process loses none), the log is synced as a group, and the version the
host records is never ahead of what the log holds (the enclave accepts a log ahead of it, and
refuses one behind)."""

import subprocess
import sys
import textwrap

import pytest

from teeboost.budget import RowLedger, SealedLedgerFile


def _records(log: bytes) -> list[bytes]:
    out, at = [], 0
    while at < len(log):
        size = int.from_bytes(log[at:at + 4], "big")
        out.append(log[at + 4:at + 4 + size])
        at += 4 + size
    return out


def test_records_are_readable_at_once_and_the_version_follows_the_sync(tmp_path):
    versions = RowLedger(tmp_path / "audit.budget.sqlite", "bank")
    ledger = SealedLedgerFile.beside(tmp_path / "audit.jsonl", versions)
    ledger.ONLINE_SYNC_SECONDS = 3600.0  # within the test, only the first append syncs
    for version in range(1, 6):
        ledger.append_online(f"record {version}".encode(), version)
    log, recorded = ledger.load_online()
    assert _records(log) == [f"record {v}".encode() for v in range(1, 6)]
    assert recorded == 1  # synced with the first record; the rest wait for the next sync
    ledger.flush_online()
    assert ledger.load_online()[1] == 5


@pytest.mark.serial
def test_an_idle_log_is_synced_by_its_timer_and_a_closed_one_takes_no_more(tmp_path):
    """The records written before traffic pauses are synced and their version recorded within
    the sync interval (a host cutting the unsynced tail of the file would otherwise have had as
    long as the pause: red team). After the party's last flush an append writes nothing."""
    import time

    import pytest

    from teeboost.errors import ConfigError

    versions = RowLedger(tmp_path / "audit.budget.sqlite", "bank")
    ledger = SealedLedgerFile.beside(tmp_path / "audit.jsonl", versions)
    ledger.ONLINE_SYNC_SECONDS = 0.2
    ledger.append_online(b"a", 1)  # synced at once (the first)
    ledger.append_online(b"b", 2)
    ledger.append_online(b"c", 3)
    assert ledger.load_online()[1] == 1
    time.sleep(0.6)  # no more traffic
    assert ledger.load_online()[1] == 3
    ledger.flush_online()
    with pytest.raises(ConfigError, match="closed"):
        ledger.append_online(b"d", 4)
    assert _records(ledger.load_online()[0]) == [b"a", b"b", b"c"]


def test_a_restart_syncs_the_appends_before_it_and_starts_a_new_file(tmp_path):
    versions = RowLedger(tmp_path / "audit.budget.sqlite", "bank")
    ledger = SealedLedgerFile.beside(tmp_path / "audit.jsonl", versions)
    ledger.ONLINE_SYNC_SECONDS = 3600.0
    ledger.append_online(b"a", 1)
    ledger.append_online(b"b", 2)
    ledger.restart_online(b"base", 3)
    ledger.append_online(b"c", 4)
    log, recorded = ledger.load_online()
    assert _records(log) == [b"base", b"c"] and recorded == 3


def test_a_killed_party_loses_no_record_and_its_version_is_not_ahead_of_its_log(tmp_path):
    script = textwrap.dedent(f"""
        import os
        from pathlib import Path
        from teeboost.budget import RowLedger, SealedLedgerFile
        ledger = SealedLedgerFile.beside(Path({str(tmp_path)!r}) / "audit.jsonl",
                                         RowLedger(Path({str(tmp_path)!r}) / "audit.budget.sqlite", "bank"))
        ledger.ONLINE_SYNC_SECONDS = 3600.0
        for version in range(1, 51):
            ledger.append_online(b"record %d" % version, version)
        os._exit(9)  # killed: nothing is flushed or closed
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 9, done.stderr
    ledger = SealedLedgerFile.beside(tmp_path / "audit.jsonl", RowLedger(tmp_path / "audit.budget.sqlite", "bank"))
    log, recorded = ledger.load_online()
    assert _records(log) == [b"record %d" % v for v in range(1, 51)]
    assert 1 <= recorded <= 50


def test_each_label_owner_has_ledgers_of_its_own(tmp_path):
    """The enclave opens a ledger only in sessions with the label owner it was sealed for, so
    the host keeps one set of files and versions per pinned active key: a label owner with a
    new key starts afresh, and the old key's ledgers are kept, untouched, for its return."""
    versions = RowLedger(tmp_path / "audit.budget.sqlite", "bank")
    old = SealedLedgerFile.beside(tmp_path / "audit.jsonl", versions, b"\x01" * 32)
    new = SealedLedgerFile.beside(tmp_path / "audit.jsonl", versions, b"\x02" * 32)
    assert old.path != new.path and old.online_log != new.online_log
    old.store(b"sealed batch ledger", 3)
    old.append_online(b"record 1", 1)
    old.flush_online()
    import os
    import time

    day_ago = time.time() - SealedLedgerFile.OWNER_CHANGE_WAIT - 60  # (within the day: ``test_a_new_label_owner...``)
    for path in (old.path, old.online_log):
        os.utime(path, (day_ago, day_ago))
    assert new.load() == (b"", 0) and new.load_online() == (b"", 0)
    again = SealedLedgerFile.beside(tmp_path / "audit.jsonl", versions, b"\x01" * 32)
    assert again.load() == (b"sealed batch ledger", 3) and _records(again.load_online()[0]) == [b"record 1"]


def test_a_new_label_owner_key_waits_until_the_old_keys_day_is_over(tmp_path):
    """A new key's ledgers start empty, so while another key's (or the files from before
    ledgers were kept per key) were charged within the window, strict sessions for the new key
    are refused, saying when they may start (red team: a key rotation the operator re-pinned
    gave every row a fresh day)."""
    import os
    import time

    from teeboost.policy import PolicyRefused

    versions = RowLedger(tmp_path / "audit.budget.sqlite", "bank")
    old = SealedLedgerFile.beside(tmp_path / "audit.jsonl", versions, b"\x01" * 32)
    new = SealedLedgerFile.beside(tmp_path / "audit.jsonl", versions, b"\x02" * 32)
    old.append_online(b"record 1", 1)
    old.flush_online()
    for load in (new.load, new.load_online):
        with pytest.raises(PolicyRefused, match=r"max_bits_per_row_per_day\).*start at 20\d\d-"):
            load()
    assert old.load_online()[1] == 1  # the old key's own sessions go on
    day_ago = time.time() - SealedLedgerFile.OWNER_CHANGE_WAIT - 60
    os.utime(old.online_log, (day_ago, day_ago))
    assert new.load() == (b"", 0) and new.load_online() == (b"", 0)
    (tmp_path / "audit.strict-ledger.sealed").write_bytes(b"from before ledgers were kept per key")
    with pytest.raises(PolicyRefused, match="audit.strict-ledger.sealed"):
        new.load()
