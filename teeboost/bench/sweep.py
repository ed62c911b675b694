"""A sweep of benchmark points, each in its own process, resumable.

Every finished point is appended to ``results.jsonl`` in the output directory; running the
same sweep again skips points already there (a point is identified by protocol, rows, trees,
parties, extra features and scheme), so an interrupted hour-long sweep loses at most the
point that was running. A point that fails is reported and retried next time. Each point's
peak memory is its whole process tree's (party, enclaves, workers), polled from here
(``process_tree``).
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from .process_tree import run_measured

__all__ = ["Point", "plan", "run_sweep", "load_results"]


@dataclass(frozen=True)
class Point:
    protocol: str
    rows: int
    n_trees: int = 5
    passive_parties: int = 1
    extra_features: int = 0
    scheme: str = "paillier"

    def key(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def plan(rows: list[int], protocols: list[str], **common) -> list[Point]:
    return [Point(protocol, n, **common) for n in rows for protocol in protocols]


def load_results(out_dir: Path) -> dict[str, dict]:
    path = out_dir / "results.jsonl"
    found = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                entry = json.loads(line)
                found[entry["point"]] = entry
    return found


def run_sweep(points: list[Point], out_dir: Path, *, timeout: float = 3600.0,
              on_point: Callable[[Point, dict | None, bool], None] | None = None) -> dict[str, dict]:
    out_dir.mkdir(parents=True, exist_ok=True)
    done = load_results(out_dir)
    with open(out_dir / "results.jsonl", "a") as results:
        for point in points:
            if point.key() in done:
                if on_point:
                    on_point(point, done[point.key()], True)
                continue
            command = [sys.executable, "-m", "teeboost.bench.point", "--protocol", point.protocol,
                       "--rows", str(point.rows), "--n-trees", str(point.n_trees),
                       "--passive-parties", str(point.passive_parties),
                       "--extra-features", str(point.extra_features), "--scheme", point.scheme]
            with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
                measured = run_measured(command, timeout=timeout, stdout=out, stderr=err)
                out.seek(0)
                err.seek(0)
                printed, complaint = out.read(), err.read()
            if measured.timed_out:
                print(f"teeboost bench: {point.protocol} at {point.rows} rows exceeded {timeout:g} s; skipped",
                      file=sys.stderr)
                if on_point:
                    on_point(point, None, False)
                continue
            if measured.returncode != 0:
                print(f"teeboost bench: {point.protocol} at {point.rows} rows failed: "
                      f"{complaint.strip()[-500:]}", file=sys.stderr)
                if on_point:
                    on_point(point, None, False)
                continue
            entry = {"point": point.key(), **json.loads(printed),
                     "peak_tree_mb": measured.peak_tree_mb, "peak_tree_rss_mb": measured.peak_tree_rss_mb,
                     "largest_process_mb": measured.largest_process_mb, "memory_measure": measured.measure,
                     "wall_seconds_with_startup": round(measured.seconds, 2)}
            results.write(json.dumps(entry) + "\n")
            results.flush()
            done[point.key()] = entry
            if on_point:
                on_point(point, entry, False)
    return done
