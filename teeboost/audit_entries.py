"""One line of an audit log: what goes into it, and how it is read back.

The writer (``teeboost.audit``), the budget counters (``teeboost.audit_counters``) and the
reader (``teeboost.audit_report``) share this format, so it lives apart from all three. Every
string in an entry is cut at ``MAX_STRING`` characters (with a marker saying how much was cut),
and every list or table at ``MAX_ITEMS`` items, however deeply nested, so a peer cannot make a
line unbounded; a line torn by a crash with a whole entry glued after it still gives that entry.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

__all__ = ["MAX_STRING", "MAX_ITEMS", "MAX_DEPTH", "cap_string", "bounded", "timestamp", "parse_entry"]

MAX_STRING = 500  # characters of any one string in an entry
MAX_ITEMS = 10_000  # items of any one list or table in an entry
MAX_DEPTH = 12  # nesting below this is cut
_ENTRY_START = b'{"time": '


def cap_string(text: str) -> str:
    """``text`` cut at ``MAX_STRING`` characters, with a marker saying how much was cut."""
    if len(text) <= MAX_STRING:
        return text
    return f"{text[:MAX_STRING]}...[cut: {len(text) - MAX_STRING} more chars]"


def bounded(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON-able data with every string capped and every container bounded."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return cap_string(value)
    if depth >= MAX_DEPTH:
        return "...[cut: nested too deep]"
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for number, (key, item) in enumerate(value.items()):
            if number >= MAX_ITEMS:
                out["..."] = f"[cut: {len(value) - MAX_ITEMS} more items]"
                break
            if isinstance(key, str):
                key = cap_string(key)
            elif not (key is None or isinstance(key, (bool, int, float))):
                key = cap_string(str(key))
            out[key] = bounded(item, depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        items = [bounded(item, depth + 1) for item in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            items.append(f"...[cut: {len(value) - MAX_ITEMS} more items]")
        return items
    if hasattr(value, "tolist") and hasattr(value, "shape"):  # numpy arrays and scalars
        if len(getattr(value, "shape", ())) >= 1 and value.shape[0] > MAX_ITEMS:
            return bounded(list(value[:MAX_ITEMS].tolist()) + [f"...[cut: {value.shape[0] - MAX_ITEMS} more items]"],
                           depth)
        return bounded(value.tolist(), depth)
    if hasattr(value, "item"):
        try:
            return bounded(value.item(), depth)
        except (TypeError, ValueError):
            pass
    return cap_string(str(value))


def timestamp(epoch: float) -> str:
    """An entry's "time": ISO 8601 in UTC, to the millisecond."""
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).isoformat(timespec="milliseconds")


def parse_entry(raw: bytes) -> Any:
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

