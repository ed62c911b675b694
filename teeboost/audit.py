"""A party's own record of what it served and to whom: JSON lines, one event per line.

Each line has the time, this party's name, the event, and what the event is about: the run
id, the peer's certificate fingerprint (SHA-256 of its DER certificate), the protocol and
parameters, row counts, per-run counts of every query type, and every refusal with its rule.
Ids and raw values never go in: the log is meant to be shown to auditors.

The file is opened for appending only, created mode 0600 and never through a symlink; each
line is flushed as it is written, so a crash loses at most the line being written. The
policy's daily budgets are counted from this file, so restarting a party does not reset them.
``teeboost audit show`` summarises it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import stat
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from .errors import ConfigError

__all__ = ["AuditLog", "read_audit", "usage_since", "summarise"]

_COUNTED = ("align", "predict", "setup")  # the events daily budgets are counted from


class AuditLog:
    def __init__(self, path: Path | None, party: str) -> None:
        self.path = path
        self.party = party
        self._lock = threading.Lock()
        self._handle = None
        self._counted: list[dict[str, Any]] = []  # entries budgets count, read once and kept up to date
        if path is not None:
            self._counted = [e for e in read_audit(path) if e["event"] in _COUNTED]
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, stat.S_IRUSR | stat.S_IWUSR)
            except OSError as exc:
                raise ConfigError(f"cannot open the audit log {path}: {exc.strerror}") from None
            self._handle = os.fdopen(fd, "a", encoding="utf-8")

    def write(self, event: str, **fields: Any) -> None:
        if self._handle is None:
            return
        now = time.time()
        entry = {"time": dt.datetime.fromtimestamp(now, dt.timezone.utc).isoformat(timespec="milliseconds"),
                 "epoch": round(now, 3), "party": self.party, "event": event, **fields}
        line = json.dumps(entry, sort_keys=False, default=_plain) + "\n"
        with self._lock:
            self._handle.write(line)
            self._handle.flush()
            if event in _COUNTED:
                self._counted.append(json.loads(line))

    def usage(self, seconds: float) -> dict[str, int]:
        """What budgets count, over the last ``seconds``."""
        with self._lock:
            return usage_since(self._counted, time.time() - seconds)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def read_audit(path: Path) -> list[dict[str, Any]]:
    """Every complete line; a torn last line (a crash mid-write) is skipped, any other bad
    line is an error naming it."""
    if path is None or not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")
    entries = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):  # no newline after it: the write was cut short
                continue
            raise ConfigError(f"{path}: line {number} is not a JSON audit entry") from None
        if not isinstance(entry, dict) or "event" not in entry or "epoch" not in entry:
            raise ConfigError(f"{path}: line {number} is not an audit entry (no event or epoch)")
        entries.append(entry)
    return entries


def usage_since(entries: Iterable[dict[str, Any]], since: float) -> Counter:
    used: Counter = Counter()
    for entry in entries:
        if entry.get("epoch", 0) < since:
            continue
        if entry["event"] == "align":
            used["max_psi_ids_per_day"] += int(entry.get("ids", 0))
        elif entry["event"] == "predict":
            used["max_prediction_rows_per_day"] += int(entry.get("rows", 0))
        elif entry["event"] == "setup":
            used["max_runs_per_day"] += 1
            used["max_prediction_rows_per_day"] += int((entry.get("rows") or {}).get("test", 0))
    return used


def leakage_lines(entries: list[dict[str, Any]], routing: dict[str, int] | None, now: float) -> list[str]:
    """Bits about this party's rows that left in the last 24 h, against the policy's budget:
    routing answers from the row ledger (``routing``: ``RowLedger.day()``), strict sessions
    from what the passive enclave reported after each one."""
    policy = next((e.get("policy") or {} for e in reversed(entries) if e["event"] == "start"), {})
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
    refused = [e for e in entries if e["event"] == "refused" and e.get("rule") == "max_bits_per_row_per_day"
               and e.get("epoch", 0) >= now - 86_400]
    if refused:
        lines.append(f"  refused for the budget: {len(refused)}")
    return lines


def summarise(entries: list[dict[str, Any]], *, now: float | None = None,
              routing: dict[str, int] | None = None) -> str:
    """Runs served (peer, protocol, parameters, rows, queries), prediction batches, refusals,
    the last 24 hours' use of each budget and the bits that left per row (``routing``: the
    row ledger's ``day()``)."""
    if not entries:
        return "the audit log is empty"
    now = time.time() if now is None else now
    runs: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    predictions: list[dict[str, Any]] = []
    refusals: list[dict[str, Any]] = []
    peers: Counter = Counter()
    for entry in entries:
        event = entry["event"]
        if entry.get("peer"):
            peers[entry["peer"]] += 1
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
    party = entries[-1].get("party", "?")
    lines = [f"audit log of party {party!r}: {len(entries)} entries, {entries[0]['time']} .. {entries[-1]['time']}"]
    lines.append(f"runs: {len(runs)}")
    for run_id in order + [r for r in runs if r not in order]:
        run = runs[run_id]
        params = run.get("params") or {}
        shown = ", ".join(f"{k}={params[k]}" for k in ("n_trees", "max_depth", "min_samples_leaf") if k in params)
        rows = run.get("rows") or {}
        status = f"finished {run['finished']}" if "finished" in run else "not finished"
        queries = ", ".join(f"{k} {v}" for k, v in sorted(run["queries"].items()))
        lines.append(f"  {run.get('time', '?')}  run {run_id[:24]}  {run.get('protocol', '?')}  "
                     f"peer {str(run.get('peer', '?'))[:23]}  {shown}  rows {json.dumps(rows)}  {status}")
        if queries:
            lines.append(f"      queries: {queries}")
    lines.append(f"prediction batches: {len(predictions)}, rows scored: "
                 f"{sum(int(p.get('rows', 0)) for p in predictions)}")
    lines.append(f"refusals: {len(refusals)}")
    by_rule = Counter(r.get("rule", "-") for r in refusals)
    for rule, count in sorted(by_rule.items()):
        last = [r for r in refusals if r.get("rule", "-") == rule][-1]
        lines.append(f"  {rule}: {count} (last {last['time']}: {str(last.get('detail', ''))[:160]})")
    used = usage_since(entries, now - 86_400)
    lines.append("last 24 h: " + ", ".join(f"{k.removeprefix('max_').removesuffix('_per_day')} {used[k]}"
                                          for k in ("max_runs_per_day", "max_psi_ids_per_day",
                                                    "max_prediction_rows_per_day")))
    lines.extend(leakage_lines(entries, routing, now))
    if peers:
        lines.append("peers: " + ", ".join(f"{p} ({n} entries)" for p, n in peers.most_common()))
    return "\n".join(lines)

