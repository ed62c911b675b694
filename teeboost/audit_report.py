"""Reading an audit log back and summarising it for auditors (``teeboost audit show``).

Only complete entries are read: a line torn by a crash mid-write is skipped. The summary
gives the runs served (or, in the active party's log, started), prediction batches, refusals (with those the rate limit suppressed),
repairs of torn lines, each daily budget's use over the last 24 hours and the bits about the
party's rows that left.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Iterator

from .audit_counters import BUDGET_RULES, COUNTED_EVENTS, budget_amounts
from .audit_entries import parse_entry
from .errors import ConfigError

__all__ = ["iter_audit", "read_audit", "usage_since", "leakage_lines", "summarise"]

#: Events only the active party writes (it starts runs; passive parties are set up).
_ACTIVE_EVENTS = ("run", "trained", "recovery")


def iter_audit(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete line, streamed; a torn last line (a crash mid-write) is skipped, any
    other bad line is an error naming it."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            entry = parse_entry(raw)
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
        if entry.get("epoch", 0) < since or entry["event"] not in COUNTED_EVENTS:
            continue
        for rule, amount in budget_amounts(entry["event"], entry).items():
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
        # at most: the enclave does not say what it charged (a row scored online with the same
        # inputs is free, and which rows were scored online its host must not learn)
        most = sum(int(e.get("rows", 0)) * int(e.get("cost_per_row", 0)) for e in sessions)
        lines.append(f"  strict sessions: {len(sessions)}, {sum(int(e.get('rows', 0)) for e in sessions)} rows, at most "
                     f"{most} bits charged (each row at most {max(int(e.get('cost_per_row', 0)) for e in sessions)}; "
                     f"its enclave keeps the rest); the enclave's ledger: {last.get('window_rows', 0)} rows asked")
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


def _peers(value: Any) -> list[str]:
    """The peers an entry names: a passive party's log holds one certificate fingerprint, the
    active party's a fingerprint for each passive party by name."""
    if isinstance(value, dict):
        return [f"{name} {str(fingerprint)[:23]}" for name, fingerprint in value.items()]
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)] if value else []


def _count_queries(run: dict[str, Any], queries: Any) -> None:
    """Per-type query counts (a passive party's entries) or one message count (the active
    party's ``messages``, written as ``queries`` by earlier versions)."""
    if isinstance(queries, dict):
        run["queries"].update({str(k): v for k, v in queries.items() if isinstance(v, int)})
    elif isinstance(queries, int) and not isinstance(queries, bool):
        run["messages"] = run.get("messages", 0) + queries


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
    online: Counter = Counter()  # online scoring (teeboost serve): requests, ids, rows, routing answers
    refusals: list[dict[str, Any]] = []
    suppressed: list[dict[str, Any]] = []
    repairs: list[dict[str, Any]] = []
    reopened = 0
    peers: Counter = Counter()
    for entry in entries:
        event = entry["event"]
        for peer in _peers(entry.get("peer")):
            peers[peer] += 1
        run_id = str(entry.get("run_id", "?"))
        if event in ("setup", "run"):
            run = runs.setdefault(run_id, {"queries": Counter()})
            if run_id not in order:
                order.append(run_id)
            run.update({k: entry[k] for k in ("time", "peer", "protocol", "params", "rows") if k in entry})
        elif event in ("queries", "finish", "trained"):
            run = runs.setdefault(run_id, {"queries": Counter()})
            _count_queries(run, entry.get("queries"))
            _count_queries(run, entry.get("messages"))
            if event in ("finish", "trained"):
                run["finished"] = entry["time"]
                for key in ("n_trees", "metric", "value"):
                    if key in entry:
                        run[key] = entry[key]
        elif event == "predict" and entry.get("dataset") == "online":
            online["rows"] += int(entry.get("rows", 0))
        elif event == "predict":
            predictions.append(entry)
        elif event == "align" and entry.get("purpose") == "online":
            online["requests"] += int(entry.get("requests", 0))
            online["ids"] += int(entry.get("ids", 0))
        elif event == "online route":
            online["answers"] += int(entry.get("questions", 0))
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
        peer = ", ".join(_peers(run.get("peer"))) or "?"
        lines.append(f"  {run.get('time', '?')}  run {str(run_id)[:24]}  {run.get('protocol', '?')}  "
                     f"peer {peer if isinstance(run.get('peer'), dict) else peer[:23]}  {shown}  "
                     f"rows {json.dumps(rows)}  {status}")
        if queries:
            lines.append(f"      queries: {queries}")
        if "messages" in run:
            lines.append(f"      messages: {run['messages']}")
    lines.append(f"prediction batches: {len(predictions)}, rows scored: "
                 f"{sum(int(p.get('rows', 0)) for p in predictions)}")
    if online:
        answers = f", {online['answers']} routing answers" if online["answers"] else ""  # strict: none leave
        lines.append(f"online scoring: {online['requests']} requests, {online['ids']} ids looked up, "
                     f"{online['rows']} rows scored{answers}")
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
    if any(e["event"] in _ACTIVE_EVENTS for e in entries):  # the label owner's log: it serves no budget
        lines.append("budgets and leakage: this is the active party's log; each passive party counts what it "
                     "served in its own (teeboost audit show --config passive.toml)")
        if peers:
            lines.append("peers: " + ", ".join(f"{p} ({n} entries)" for p, n in peers.most_common()))
        return "\n".join(lines)
    used = usage if usage is not None else usage_since(entries, now - 86_400)
    lines.append("last 24 h: " + ", ".join(f"{k.removeprefix('max_').removesuffix('_per_day')} {used.get(k, 0)}"
                                          for k in BUDGET_RULES)
                 + (" (the party's budget counters)" if usage is not None else ""))
    lines.extend(leakage_lines(entries, routing, now))
    if peers:
        lines.append("peers: " + ", ".join(f"{p} ({n} entries)" for p, n in peers.most_common()))
    return "\n".join(lines)
