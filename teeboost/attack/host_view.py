"""What a passive host holds after a run, read as an attacker reads it.

``read_passive_host_view`` walks every file the host stores or receives (model directory,
checkpoints, audit log and its counters, its stdout): JSON at any depth, JSON lines, zip/npz
members, SQLite cells, and raw text, and collects every split record it can read; sealed or
encrypted blobs count as read but opaque. The crafted-columns attack (``crafted_columns``)
scores labels from what it finds.
"""

from __future__ import annotations

import io
import json
import math
import re
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

__all__ = ["FoundRecord", "FileSeen", "HostView", "read_passive_host_view"]


@dataclass(frozen=True)
class FoundRecord:
    """One split record found in the host's files (any field may be unknown: None)."""

    feature: str | None
    index: int | None
    threshold: float | None
    missing_left: bool | None
    tree: int | None
    categories: int | None = None
    vocabulary: tuple[str, ...] | None = None  # the file's code order of this feature, when it says
    source: str = ""
    active: bool = False  # found inside the label owner's own file ("role": "active"): not this party's

    def key(self) -> tuple:
        return (self.feature if self.feature is not None else self.index, self.threshold, self.missing_left,
                self.tree, self.categories, self.active)


@dataclass(frozen=True)
class FileSeen:
    path: str
    kind: str  # json, jsonl, text, archive, sqlite, array, opaque, empty, unreadable
    records: int = 0
    opaque_blobs: int = 0  # long base64/hex strings inside a readable file (sealed data)


@dataclass
class HostView:
    """Every split record the host could read, and every file it looked at."""

    records: list[FoundRecord]
    files: list[FileSeen]

    @property
    def files_read(self) -> list[str]:
        """Every file looked at (an archive once, not per member)."""
        return list(dict.fromkeys(f.path.split("!", 1)[0] for f in self.files))

    @property
    def unreadable(self) -> list[str]:
        """Files or archive members that were opaque: read, nothing learned."""
        return [f.path for f in self.files if f.kind in ("opaque", "unreadable")]

    def summary(self) -> str:
        kinds = Counter(f.kind for f in self.files)
        blobs = sum(f.opaque_blobs for f in self.files)
        return (f"{len(self.files)} file(s) read ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}); "
                f"{len(self.records)} split record(s) in the clear; {blobs} sealed/encoded blob(s) inside them")


_BLOB = re.compile(r"^(?:[0-9a-fA-F]{200,}|[A-Za-z0-9+/_-]{200,}={0,2})$")  # sealed data, not digests
_TEXT_RECORD = re.compile(r"[{(\[][^{}()\[\]]*?\bfeature\b[^{}()\[\]]*[})\]]")
_FIELD = {
    "feature": re.compile(r"""\bfeature['"]?\s*[:=]\s*['"]?([^'",\s)}]+)"""),
    "threshold": re.compile(r"""\bthreshold['"]?\s*[:=]\s*([-+0-9.eEinfINFnaN]+)"""),
    "missing_left": re.compile(r"""\bmissing_left['"]?\s*[:=]\s*['"]?(true|false|True|False|1|0)"""),
    "tree": re.compile(r"""\btree['"]?\s*[:=]\s*(\d+)"""),
    "categories": re.compile(r"""\bcategories['"]?\s*[:=]\s*(\d+)"""),
}


def _number(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _boolean(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    return None


class _Reader:
    """Walks files, archives and JSON values, collecting records and counting blobs."""

    def __init__(self, feature_names: Sequence[str] | None, names: Iterable[str]) -> None:
        self.feature_names = list(feature_names) if feature_names is not None else None
        self.names = sorted({str(n) for n in names}, key=len, reverse=True)
        self.records: list[FoundRecord] = []
        self.files: list[FileSeen] = []
        self._blobs = 0

    def record(self, raw: dict[str, Any], features: list[str] | None, vocabularies: dict, source: str,
               active: bool = False) -> None:
        feature = raw.get("feature", raw.get("feature_name"))
        index = _integer(feature) if not isinstance(feature, str) or feature.strip().lstrip("-").isdigit() else None
        name = None if index is not None else (str(feature) if feature is not None else None)
        names = features if features is not None or active else self.feature_names
        if index is not None and names is not None and 0 <= index < len(names):
            name = names[index]
        vocabulary = None
        entry = vocabularies.get(name) if name is not None else None
        if isinstance(entry, dict) and isinstance(entry.get("categories"), list):
            vocabulary = tuple(str(c) for c in entry["categories"])
        categories = _integer(raw.get("categories"))
        self.records.append(FoundRecord(name, index, _number(raw.get("threshold")), _boolean(raw.get("missing_left")),
                                        _integer(raw.get("tree")), categories or None, vocabulary, source, active))

    def walk(self, value: Any, features: list[str] | None, vocabularies: dict, source: str,
             active: bool = False) -> None:
        if isinstance(value, dict):
            active = active or value.get("role") == "active"  # the label owner's model or checkpoint
            found = value.get("features")
            if isinstance(found, list) and all(isinstance(f, str) for f in found):
                features = found
            found = value.get("categories")
            if isinstance(found, dict):
                vocabularies = found
            if "feature" in value and ("threshold" in value or "categories" in value or "missing_left" in value):
                self.record(value, features, vocabularies, source, active)
            for item in value.values():
                self.walk(item, features, vocabularies, source, active)
        elif isinstance(value, list):
            for item in value:
                self.walk(item, features, vocabularies, source, active)
        elif isinstance(value, str):
            text = value.strip()
            if len(text) >= 200 and _BLOB.match(text):
                self._blobs += 1
            elif text[:1] in "{[":
                try:
                    self.walk(json.loads(text), features, vocabularies, source, active)
                except ValueError:
                    self.scan_text(text, source)
            elif any(n in text for n in self.names) or "feature" in text:
                self.scan_text(text, source)

    def scan_text(self, text: str, source: str) -> None:
        """Records written as text: dict or repr fragments naming ``feature=``, and lines that
        name a crafted column beside a cut (``age_7 <= 41.5 ... missing left ... tree 3``)."""
        spans = []
        for match in _TEXT_RECORD.finditer(text):
            fragment = match.group(0)
            raw = {k: m.group(1) for k, p in _FIELD.items() if (m := p.search(fragment))}
            if "feature" in raw and len(raw) > 1:
                spans.append(match.span())
                self.record(raw, None, {}, source)
        if not self.names:
            return
        pattern = re.compile("|".join(re.escape(n) for n in self.names))
        for line_start, line in _lines(text):
            for match in pattern.finditer(line):
                at = line_start + match.start()
                if any(a <= at < b for a, b in spans):
                    continue
                end = match.end()
                if end < len(line) and (line[end].isalnum() or line[end] == "_"):
                    continue  # "age_1" inside "age_12"
                rest = line[end:end + 160]
                raw: dict[str, Any] = {"feature": match.group(0)}
                if m := re.match(r"\s*(<=|<|>=|>)\s*([-+0-9.eE]+)", rest):
                    raw["threshold"] = m.group(2)
                if m := re.search(r"missing\w*\W{0,3}(left|right|true|false)", rest, re.I):
                    raw["missing_left"] = m.group(1).lower() in ("left", "true")
                if m := re.search(r"tree\W{0,3}(\d+)", rest, re.I):
                    raw["tree"] = m.group(1)
                if m := re.search(r"(?:mask|categories)\W{0,3}(\d+)", rest, re.I):
                    raw["categories"] = m.group(1)
                if len(raw) > 1:
                    self.record(raw, None, {}, source)

    def read_bytes(self, data: bytes, source: str) -> None:
        before, outer, self._blobs = len(self.records), self._blobs, 0  # an archive's members count apart
        kind = self._classify(data, source)
        self.files.append(FileSeen(source, kind, len(self.records) - before, self._blobs))
        self._blobs = outer

    def _classify(self, data: bytes, source: str) -> str:
        if not data:
            return "empty"
        if data[:4] == b"PK\x03\x04":
            return self._archive(data, source)
        if data[:6] == b"\x93NUMPY":
            return self._npy(data, source)
        if data[:16] == b"SQLite format 3\x00":
            return self._sqlite(data, source)
        text = _decode(data)
        if text is None:
            return "opaque"
        stripped = text.strip()
        try:
            self.walk(json.loads(stripped), None, {}, source)
            return "json"
        except ValueError:
            pass
        lines = [line for line in stripped.splitlines() if line.strip()]
        parsed = 0
        for line in lines:
            try:
                value = json.loads(line)
            except ValueError:
                self.scan_text(line, source)
                continue
            parsed += 1
            self.walk(value, None, {}, source)
        if lines and parsed == len(lines):
            return "jsonl"
        if len(stripped) >= 200 and _BLOB.match(stripped):
            self._blobs += 1
            return "opaque"
        return "text"

    def _archive(self, data: bytes, source: str) -> str:
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                for member in archive.namelist():
                    self.read_bytes(archive.read(member), f"{source}!{member}")
        except (zipfile.BadZipFile, OSError, RuntimeError, ValueError):
            return "unreadable"
        return "archive"

    def _sqlite(self, data: bytes, source: str) -> str:
        """An SQLite file (audit counters, say): every cell of every table."""
        import sqlite3
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "copy.sqlite"
            copy.write_bytes(data)
            try:
                with sqlite3.connect(copy) as db:
                    tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
                    for table in tables:
                        for row in db.execute(f'SELECT * FROM "{table}"'):
                            for cell in row:
                                if isinstance(cell, bytes):
                                    self._classify(cell, f"{source}!{table}")
                                elif isinstance(cell, str):
                                    self.walk(cell, None, {}, source)
            except sqlite3.Error:
                return "unreadable"
        return "sqlite"

    def _npy(self, data: bytes, source: str) -> str:
        try:
            array = np.load(io.BytesIO(data), allow_pickle=False)
        except (ValueError, OSError):
            return "opaque"
        if array.dtype == np.uint8:
            return self._classify(array.tobytes(), source)
        if array.dtype.kind in "US":
            for item in array.reshape(-1):
                self.walk(str(item), None, {}, source)
        return "array"


def _decode(data: bytes) -> str | None:
    """Text, or None for binary (undecodable, or more than 5% control bytes)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    sample = text[:65536]
    control = sum(1 for ch in sample if ord(ch) < 32 and ch not in "\n\r\t\f")
    return None if control > 0.05 * max(len(sample), 1) else text


def _lines(text: str):
    start = 0
    for line in text.splitlines(keepends=True):
        yield start, line
        start += len(line)


def read_passive_host_view(paths: str | Path | Iterable[str | Path], *, feature_names: Sequence[str] | None = None,
                           names: Iterable[str] = ()) -> HostView:
    """Every split record the passive host can read after a run, from every file under
    ``paths`` (directories walked, hidden and temporary files included): JSON and JSON-lines
    (any "records" list or record-shaped object, however nested, JSON inside strings too),
    zip/npz archives (checkpoints) member by member, SQLite files cell by cell (audit
    counters), and a raw scan of any other text for
    record fragments and for the crafted column ``names`` beside a cut. Records from several
    copies of the same table (model file, checkpoint, log) are counted once. Binary files and
    long base64/hex strings are opaque: read, counted, nothing learned. ``feature_names``
    (the party's columns in file order) names records that carry only an index."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    reader = _Reader(feature_names, names)
    for root in paths:
        root = Path(root)
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []
        for path in files:
            try:
                data = path.read_bytes()
            except OSError:
                reader.files.append(FileSeen(str(path), "unreadable"))
                continue
            reader.read_bytes(data, str(path))
    return HostView(_union(reader.records), reader.files)


def _union(records: list[FoundRecord]) -> list[FoundRecord]:
    """The same table saved twice (model file and checkpoint, say) counts once: per record
    key, the largest number of copies any one file holds."""
    per_file: dict[str, Counter] = {}
    first: dict[tuple, FoundRecord] = {}
    for record in records:
        top = record.source.split("!", 1)[0]
        per_file.setdefault(top, Counter())[record.key()] += 1
        previous = first.get(record.key())
        if previous is None or (previous.vocabulary is None and record.vocabulary is not None) \
                or (previous.feature is None and record.feature is not None):
            first[record.key()] = record
    counts: Counter = Counter()
    for counter in per_file.values():
        for key, count in counter.items():
            counts[key] = max(counts[key], count)
    return [first[key] for key, count in counts.items() for _ in range(count)]


# ---------------------------------------------------------------- scoring
