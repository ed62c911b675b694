"""An audit log an operator can rely on (issue #38).

Real files throughout, and real processes for restarts and crashes: a line torn by a crash is
repaired when the log is next opened, so two restarts in a row both work; budgets live in
hourly counters beside the log, so restarting, rotating or deleting the log resets nothing and
start-up does not grow with the log; logrotate's move is followed; strings are capped and
refusals rate-limited.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from teeboost.audit import AuditLog
from teeboost.audit_counters import counters_path, read_counters
from teeboost.audit_entries import MAX_ITEMS, MAX_STRING
from teeboost.audit_report import read_audit, summarise, usage_since

ROOT = Path(__file__).resolve().parents[1]
DAY = 86_400.0
RULES = ("max_runs_per_day", "max_psi_ids_per_day", "max_prediction_rows_per_day")


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def child(code: str, *args, timeout: float = 60) -> subprocess.CompletedProcess:
    """``code`` in a fresh Python process (a party restarting), which must succeed."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return done


def spawn(code: str, *args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


#: a party's life in a process: open the log, serve an alignment of 5 ids, stop; prints what its budgets hold
RESTART = """
    import json, sys
    from pathlib import Path
    from teeboost.audit import AuditLog
    log = AuditLog(Path(sys.argv[1]), "telco")
    log.write("start", note=sys.argv[2])
    log.write("align", ids=5)
    print(json.dumps(log.usage(86_400)))
    log.close()
"""


def lines_of(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return data.split(b"\n")[:-1]


def assert_well_formed(path: Path) -> None:
    """Every line one JSON entry: nothing glued onto a torn line."""
    for line in lines_of(path):
        entry = json.loads(line)
        assert line.count(b'{"time": ') == 1 and {"time", "epoch", "event"} <= set(entry)


# --- torn lines


def test_a_torn_line_is_repaired_and_two_restarts_both_work(tmp_path):
    path = tmp_path / "audit-telco.jsonl"
    child(RESTART, path, "first")
    torn = b'{"time": "2025-01-01T00:00:00.000+00:00", "epoch": 1735689600.0, "party": "telco", "event": "setup", "ru'
    with path.open("ab") as handle:  # a crash mid-write: part of a line, no newline
        handle.write(torn)
    second = child(RESTART, path, "second")
    third = child(RESTART, path, "third")  # before the repair, this start failed: "line 4 is not a JSON audit entry"
    assert_well_formed(path)
    entries = read_audit(path)
    assert [e["event"] for e in entries] == ["start", "align", "repaired", "start", "align", "start", "align"]
    repaired = entries[2]
    assert repaired["action"] == "truncated" and repaired["dropped_bytes"] == len(torn)
    assert repaired["offset"] == len(b"".join(line + b"\n" for line in lines_of(path)[:2]))
    assert json.loads(second.stdout)["max_psi_ids_per_day"] == 10
    assert json.loads(third.stdout)["max_psi_ids_per_day"] == 15
    assert "repairs: 1 torn line(s) found on opening the log, %d bytes dropped" % len(torn) in summarise(entries)


def test_a_whole_entry_missing_only_its_newline_is_kept(tmp_path):
    path = tmp_path / "audit-telco.jsonl"
    child(RESTART, path, "first")
    with path.open("ab") as handle:
        handle.write(b'{"time": "2025-01-01T00:00:00.000+00:00", "epoch": 1735689600.0, "event": "finish"}')
    child(RESTART, path, "second")
    child(RESTART, path, "third")
    assert_well_formed(path)
    events = [e["event"] for e in read_audit(path)]
    assert events == ["start", "align", "finish", "repaired", "start", "align", "start", "align"]
    assert read_audit(path)[3]["action"] == "terminated"


def test_a_log_torn_by_an_earlier_version_still_reads(tmp_path):
    """Logs already damaged by the old bug (a whole entry glued onto a torn one) read, and restart."""
    path = tmp_path / "audit-telco.jsonl"
    good = ('{"time": "2025-01-01T00:00:01.000+00:00", "epoch": 1735689601.0, "party": "telco", "event": "align", '
            '"ids": 4}')
    path.write_text('{"time": "2025-01-01T00:00:00.000+00:00", "epoch": 1735689600.0, "event": "start"}\n'
                    '{"time": "2025-01-01T00:00:00.500+00:00", "epoch": 17356' + good + "\n")
    assert [e["event"] for e in read_audit(path)] == ["start", "align"]
    child(RESTART, path, "first")
    assert [e["event"] for e in read_audit(path)][-2:] == ["start", "align"]


#: a party killed mid-line: the line goes out in two halves, and the process is SIGKILLed between them
KILLED_MID_LINE = """
    import sys, time
    from pathlib import Path
    from teeboost import audit
    log = audit.AuditLog(Path(sys.argv[1]), "telco")
    for i in range(5):
        log.write("align", ids=1, i=i)
    whole = audit._write_all
    def slow_disk(fd, data):
        whole(fd, data[:len(data) // 2])
        print(len(data) // 2, flush=True)
        time.sleep(60)
        whole(fd, data[len(data) // 2:])
    audit._write_all = slow_disk
    log.write("setup", run_id="killed", rows={"train": 10, "test": 7})
"""

#: a party writing long lines as fast as it can
WRITE_LOOP = """
    import sys
    from pathlib import Path
    from teeboost.audit import AuditLog
    log = AuditLog(Path(sys.argv[1]), "telco")
    print("writing", flush=True)
    i = 0
    while True:
        log.write("queries", run_id="loop", i=i, queries={f"q{j:05d}": "x" * 400 for j in range(2000)})
        i += 1
"""


def test_a_party_killed_mid_line_restarts_twice(tmp_path):
    path = tmp_path / "audit-telco.jsonl"
    party = spawn(KILLED_MID_LINE, path)
    half = int(party.stdout.readline())
    party.send_signal(signal.SIGKILL)
    party.wait(10)
    assert not path.read_bytes().endswith(b"\n")
    first, second = child(RESTART, path, "after the crash"), child(RESTART, path, "again")
    assert_well_formed(path)
    entries = read_audit(path)
    assert [e["event"] for e in entries] == ["align"] * 5 + ["repaired", "start", "align", "start", "align"]
    assert entries[5]["dropped_bytes"] == half
    # the setup was counted before its line was written: a crash over-counts, never under-counts
    assert json.loads(second.stdout) == {"max_psi_ids_per_day": 15, "max_runs_per_day": 1,
                                         "max_prediction_rows_per_day": 7}
    assert json.loads(first.stdout)["max_psi_ids_per_day"] == 10


def test_parties_killed_in_a_write_loop_always_restart(tmp_path):
    torn = 0
    for attempt in range(3):
        path = tmp_path / f"audit-{attempt}.jsonl"
        party = spawn(WRITE_LOOP, path)
        assert party.stdout.readline().strip() == "writing"
        time.sleep(0.2 + 0.07 * attempt)
        party.send_signal(signal.SIGKILL)
        party.wait(10)
        torn += not path.read_bytes().endswith(b"\n")
        child(RESTART, path, "first")
        child(RESTART, path, "second")
        assert_well_formed(path)
        assert [e["event"] for e in read_audit(path)][-4:] == ["start", "align", "start", "align"]
    print(f"write loops killed: 3, logs left torn: {torn}")


# --- budgets live beside the log


def test_budgets_hold_across_restarts_rotation_and_deletion(tmp_path):
    path, clock = tmp_path / "audit-telco.jsonl", Clock()
    log = AuditLog(path, "telco", clock=clock)
    log.write("setup", run_id="r1", rows={"train": 50, "test": 40, "valid": 0})
    log.write("align", ids=100)
    log.write("predict", rows=60)
    log.write("route", rows=3)  # not counted
    log.close()
    expected = {"max_runs_per_day": 1, "max_psi_ids_per_day": 100, "max_prediction_rows_per_day": 100}
    restarted = AuditLog(path, "telco", clock=clock)
    assert dict(restarted.usage(DAY)) == expected
    restarted.close()
    path.unlink()  # deleting the log resets nothing
    again = AuditLog(path, "telco", clock=clock)
    assert dict(again.usage(DAY)) == expected
    assert [e["event"] for e in read_audit(path)] == []  # a new, empty log, not re-counted
    again.close()
    # in another process, as a restarted party would see it
    shown = child("""
        import json, sys
        from pathlib import Path
        from teeboost.audit import AuditLog
        log = AuditLog(Path(sys.argv[1]), "telco", clock=lambda: float(sys.argv[2]))
        print(json.dumps(log.usage(86_400)))
        log.close()
    """, path, clock.now)
    assert json.loads(shown.stdout) == expected
    assert counters_path(path).stat().st_mode & 0o777 == 0o600


def test_the_window_is_never_shorter_than_a_day_and_old_hours_are_pruned(tmp_path):
    path, clock = tmp_path / "audit-telco.jsonl", Clock()
    log = AuditLog(path, "telco", clock=clock)
    rng = np.random.default_rng(0)  # a write every three days, at a random second of its hour
    for start in 1_700_000_000.0 + 3 * DAY * np.arange(8) + rng.uniform(0, 5 * 3600, size=8):
        clock.now = float(start)
        log.write("align", ids=3)
        for later in (1.0, DAY / 2, DAY - 1):
            clock.now = start + later
            assert log.usage(DAY)["max_psi_ids_per_day"] >= 3
        clock.now = start + DAY + 3600 + 1  # counted by the hour: gone at most an hour after the day
        assert log.usage(DAY)["max_psi_ids_per_day"] == 0
    clock.now += 30 * 3600
    log.write("align", ids=1)
    log.close()
    hours = sqlite3.connect(counters_path(path)).execute("SELECT COUNT(*), MIN(hour) FROM used").fetchone()
    assert hours[0] == 1 and hours[1] == int(clock.now // 3600)  # older hours pruned


def test_an_old_log_is_migrated_once_from_its_last_hours(tmp_path):
    """A log written before the counters existed: its last 25 hours are counted, once."""
    path, clock = tmp_path / "audit-telco.jsonl", Clock()
    entries = []
    for hours_ago in range(30, -1, -1):
        epoch = clock.now - hours_ago * 3600 - 5
        entries += [{"time": "t", "epoch": epoch, "party": "telco", "event": "align", "ids": 10 + hours_ago},
                    {"time": "t", "epoch": epoch, "party": "telco", "event": "aligned", "ids": 999},
                    {"time": "t", "epoch": epoch, "party": "telco", "event": "setup",
                     "rows": {"train": 1, "test": hours_ago}}]
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    log = AuditLog(path, "telco", clock=clock)
    hour = int(clock.now // 3600)
    window = [e for e in entries if int(e["epoch"] // 3600) >= hour - 24]
    assert dict(log.usage(DAY)) == dict(usage_since(window, 0))
    assert set(log.usage(DAY)) == set(RULES)
    log.close()
    migrated = [e for e in read_audit(path) if e["event"] == "budgets migrated"]
    assert len(migrated) == 1 and migrated[0]["lines"] == len(entries) and migrated[0]["unreadable"] == 0
    with path.open("a") as handle:  # not re-read: the counters are the party's state now
        handle.write(json.dumps({"time": "t", "epoch": clock.now, "event": "align", "ids": 5000}) + "\n")
    again = AuditLog(path, "telco", clock=clock)
    assert dict(again.usage(DAY)) == dict(usage_since(window, 0))
    again.close()


# --- rotation


def test_a_rotated_log_is_reopened_and_budgets_are_unchanged(tmp_path):
    path, clock = tmp_path / "audit-telco.jsonl", Clock()
    log = AuditLog(path, "telco", clock=clock)
    log.write("start", policy={"max_bits_per_row_per_day": 8, "output_bits": 8})
    log.write("align", ids=10)
    rotated = tmp_path / "audit-telco.jsonl.1"
    subprocess.run(["mv", str(path), str(rotated)], check=True)  # logrotate's default (then `create`)
    log.write("align", ids=7)
    assert path.exists() and path.stat().st_mode & 0o777 == 0o600
    assert [e["event"] for e in read_audit(rotated)] == ["start", "align"]
    new = read_audit(path)
    assert [e["event"] for e in new] == ["reopened", "align"] and new[1]["ids"] == 7
    assert new[0]["previous"]["inode"] == rotated.stat().st_ino
    assert log.usage(DAY)["max_psi_ids_per_day"] == 17
    text = summarise(new, usage=read_counters(path, now=clock.now), now=clock.now)
    assert "budget: 8 bits per row per day" in text  # the policy is repeated at the top of the new file
    assert "psi_ids 17, prediction_rows 0 (the party's budget counters)" in text
    assert "reopened after rotation: 1" in text

    # logrotate's `create`: a new empty file is put at the path first
    subprocess.run(["mv", str(path), str(tmp_path / "audit-telco.jsonl.2")], check=True)
    path.touch(mode=0o600)
    log.write("align", ids=1)
    assert [e["event"] for e in read_audit(path)] == ["reopened", "align"]

    # copytruncate: the same file, emptied in place; writing goes on at its (new) end
    shutil.copy(path, tmp_path / "audit-telco.jsonl.3")
    os.truncate(path, 0)
    log.write("align", ids=2)
    assert [e["event"] for e in read_audit(path)] == ["align"]

    # deleted: a new file
    path.unlink()
    log.write("predict", rows=4)
    assert [e["event"] for e in read_audit(path)] == ["reopened", "predict"]

    # a symlink planted at the path is never followed: the entry stays in the file still open
    moved = tmp_path / "audit-telco.jsonl.4"
    os.rename(path, moved)
    path.symlink_to(tmp_path / "elsewhere")
    log.write("align", ids=3)
    assert not (tmp_path / "elsewhere").exists()
    assert [e["event"] for e in read_audit(moved)] == ["reopened", "predict", "reopen failed", "align"]
    log.close()
    assert read_counters(path, now=clock.now) == Counter(
        {"max_psi_ids_per_day": 23, "max_prediction_rows_per_day": 4})


# --- bounded entries and refusals


def test_strings_are_capped_however_deeply_they_are_nested(tmp_path):
    path = tmp_path / "audit-telco.jsonl"
    log = AuditLog(path, "telco")
    deep: list = ["bottom"]
    for _ in range(40):
        deep = [deep]
    log.write("refused", detail="x" * 10_000, nested={"a": ["y" * 2000, {"b": "z" * 600}], "k" * 900: 1},
              items=list(range(MAX_ITEMS + 5)), deep=deep, array=np.arange(3), scalar=np.int64(7), path=tmp_path,
              **{"f" * 700: "field names too"})
    log.close()
    raw = path.read_bytes()
    assert len(raw) < 80_000  # MAX_ITEMS short ints, everything else capped
    entry = read_audit(path)[-1]
    marker = "...[cut: 9500 more chars]"
    assert entry["detail"] == "x" * MAX_STRING + marker
    assert entry["nested"]["a"][0] == "y" * MAX_STRING + "...[cut: 1500 more chars]"
    assert entry["nested"]["a"][1]["b"] == "z" * MAX_STRING + "...[cut: 100 more chars]"
    assert "k" * MAX_STRING + "...[cut: 400 more chars]" in entry["nested"]
    assert "f" * MAX_STRING + "...[cut: 200 more chars]" in entry
    assert entry["items"][-1] == "...[cut: 5 more items]" and len(entry["items"]) == MAX_ITEMS + 1
    assert "nested too deep" in json.dumps(entry["deep"])
    assert entry["array"] == [0, 1, 2] and entry["scalar"] == 7 and entry["path"] == str(tmp_path)


def test_refusals_are_rate_limited_per_reason_and_peer(tmp_path):
    path, clock = tmp_path / "audit-telco.jsonl", Clock()
    log = AuditLog(path, "telco", clock=clock)
    for i in range(50):  # one peer flooding undecodable frames
        log.refused("undecodable frame", peer="peer-a", address="10.0.0.1:5000", request="RouteRequest",
                    detail=f"frame {i}" + "!" * 1000)
        clock.now += 0.5
    for _ in range(5):
        log.refused("undecodable frame", peer="peer-b")
    log.refused("policy", peer="peer-a", rule="max_depth", detail="too deep")  # another reason: its own limit
    for _ in range(30):
        log.write("refused", rule="protocols", detail="write() is not rate-limited")
    written = [e for e in read_audit(path) if e["event"] == "refused"]
    assert sum(e.get("peer") == "peer-a" and e.get("reason") == "undecodable frame" for e in written) == 20
    assert sum(e.get("peer") == "peer-b" for e in written) == 5 and len(written) == 20 + 5 + 1 + 30
    assert all(len(e.get("detail", "")) <= MAX_STRING + 40 for e in written)
    assert not [e for e in read_audit(path) if e["event"] == "refusals suppressed"]

    clock.now += 40  # the minute is over: the next write says what was held back
    log.write("route", rows=1)
    summary = [e for e in read_audit(path) if e["event"] == "refusals suppressed"]
    assert len(summary) == 1 and summary[0]["suppressed"] == 30 and summary[0]["peer"] == "peer-a"
    assert summary[0]["written"] == 20 and summary[0]["last"]["detail"].startswith("frame 49")

    for _ in range(25):  # a new minute: 20 more, and the rest summed when the log closes
        log.refused("undecodable frame", peer="peer-a")
    log.close()
    entries = read_audit(path)
    summary = [e for e in entries if e["event"] == "refusals suppressed"]
    assert [s["suppressed"] for s in summary] == [30, 5]
    text = summarise(entries)
    assert "refusals: 76 written, 35 more suppressed by the rate limit (2 summaries)" in text
    assert "undecodable frame: 45, 35 more suppressed" in text and "suppressed by peer: peer-a 35" in text


def test_refusals_from_many_peers_are_bounded_in_all(tmp_path):
    path, clock = tmp_path / "audit-telco.jsonl", Clock()
    log = AuditLog(path, "telco", clock=clock)
    for peer in range(300):
        log.refused("handshake failed", peer=f"10.0.{peer // 256}.{peer % 256}")
    log.close()
    entries = read_audit(path)
    assert sum(e["event"] == "refused" for e in entries) == 200  # REFUSALS_PER_MINUTE_ALL
    assert sum(e["suppressed"] for e in entries if e["event"] == "refusals suppressed") == 100


def test_audit_show_reports_repairs_suppressed_refusals_and_the_counters(tmp_path):
    path = tmp_path / "audit-telco.jsonl"
    child(RESTART, path, "first")
    torn = b'{"time": "2025-01-01T00:0'
    with path.open("ab") as handle:
        handle.write(torn)
    log = AuditLog(path, "telco")
    for _ in range(25):
        log.refused("bad frame", peer="peer-a")
    log.write("setup", run_id="r1", rows={"train": 5, "test": 2})
    log.close()
    shown = subprocess.run([sys.executable, "-m", "teeboost.cli", "audit", "show", "--log", str(path)],
                           capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert shown.returncode == 0, shown.stderr
    assert f"repairs: 1 torn line(s) found on opening the log, {len(torn)} bytes dropped" in shown.stdout
    assert "refusals: 20 written, 5 more suppressed by the rate limit" in shown.stdout
    assert "last 24 h: runs 1, psi_ids 5, prediction_rows 2 (the party's budget counters)" in shown.stdout


# --- a large log


MEASURE = """
    import json, sys, time
    from pathlib import Path

    def memory():
        status = dict(line.split(":", 1) for line in open("/proc/self/status"))
        return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024

    from teeboost.audit import AuditLog
    before, _ = memory()
    began = time.perf_counter()
    log = AuditLog(Path(sys.argv[1]), "telco")
    used = log.usage(86_400)
    seconds = time.perf_counter() - began
    now = time.time()
    after, peak = memory()
    log.close()
    print(json.dumps({"seconds": seconds, "rss_growth_mb": max(after, peak) - before, "usage": used, "now": now}))
"""


def write_large_log(path: Path, megabytes: int, days: float = 10.0) -> Counter:
    """A log of ``megabytes`` spread over the last ``days``, streamed out; per (rule, hour): what it counts."""
    template = ('{{"time": "2025-01-01T00:00:00.000+00:00", "epoch": {epoch:.3f}, "party": "telco", "event": '
                '"{event}", "run_id": "run-{n}", '
                '"peer": "5f1c0e9a4b7d2c3e8f6a1b0d9c8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e"'
                ', {extra}}}\n')
    extras = [("route", '"dataset": "predict", "rows": 4096, "records": [12, 14, 15, 19]'),
              ("align", '"purpose": "predict", "ids": 7, "own_rows": 150000'),
              ("queries", '"queries": {"HistogramRequest": 120, "SplitRequest": 31, "RouteRequest": 900}'),
              ("predict", '"dataset": "predict", "rows": 3'),
              ("setup", '"protocol": "ntee", "params": {"n_trees": 50, "max_depth": 4}, '
                        '"rows": {"train": 9000, "test": 11, "valid": 0}')]
    line_bytes = len(template.format(epoch=1.0, event="route", n=0, extra=extras[0][1]))
    count = megabytes * 2**20 // line_bytes
    start = time.time() - days * DAY
    step = days * DAY / count
    counted: Counter = Counter()
    amounts = {"align": {"max_psi_ids_per_day": 7}, "predict": {"max_prediction_rows_per_day": 3},
               "setup": {"max_runs_per_day": 1, "max_prediction_rows_per_day": 11}}
    with path.open("w") as handle:
        chunk = []
        for n in range(count):
            event, extra = extras[n % len(extras)]
            epoch = start + n * step
            chunk.append(template.format(epoch=epoch, event=event, n=n % 1000, extra=extra))
            for rule, amount in amounts.get(event, {}).items():
                counted[(rule, int(epoch // 3600))] += amount
            if len(chunk) == 20_000:
                handle.write("".join(chunk))
                chunk = []
        handle.write("".join(chunk))
    return counted


@pytest.mark.serial
def test_start_up_does_not_grow_with_the_log(tmp_path):
    """200 MiB of entries over ten days: the first start migrates (streamed, once); every later
    start reads nothing of the log. Measured in fresh processes."""
    path = tmp_path / "audit-telco.jsonl"
    began = time.perf_counter()
    counted = write_large_log(path, 200)
    size = path.stat().st_size
    written = time.perf_counter() - began
    first = json.loads(child(MEASURE, path).stdout)
    later = json.loads(child(MEASURE, path).stdout)
    print(f"\nlarge log: {size / 2**20:.0f} MiB written in {written:.1f} s; "
          f"first start (migration from the last 25 h): "
          f"{first['seconds']:.2f} s, RSS +{first['rss_growth_mb']:.1f} MB; later start: {later['seconds']:.3f} s, "
          f"RSS +{later['rss_growth_mb']:.1f} MB")
    assert later["seconds"] < 1.0 and later["rss_growth_mb"] < 100
    assert first["rss_growth_mb"] < 100 and first["seconds"] < 15
    for measured in (first, later):
        hour = int(measured["now"] // 3600)
        expected = Counter()
        for (rule, h), amount in counted.items():
            if h >= hour - 24:
                expected[rule] += amount
        assert measured["usage"] == dict(expected)


def test_the_summary_counts_online_scoring_apart_from_prediction_batches(tmp_path):
    path, clock = tmp_path / "audit-bureau.jsonl", Clock()
    log = AuditLog(path, "bureau", clock=clock)
    log.write("predict", peer="bank", dataset="test", rows=300)
    for requests, ids in ((3, 3), (1, 1)):  # two micro-batches of blinded lookups
        log.write("align", peer="bank", purpose="online", ids=ids, requests=requests)
    log.write("predict", peer="bank", dataset="online", rows=4, requests=2)
    log.write("online route", peer="bank", rows=4, requests=2, questions=37)
    log.close()
    text = summarise(read_audit(path))
    assert "prediction batches: 1, rows scored: 300" in text
    assert "online scoring: 4 requests, 4 ids looked up, 4 rows scored, 37 routing answers" in text
