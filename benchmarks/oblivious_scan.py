"""The strict passive enclave's oblivious scan at 1e6 rows: milliseconds per call for 1, 20 and
100 handles, on a table of 2 uint64 words a row (5 one-byte column codes and an 8-byte ledger
key: what online scoring scans). Median of ``--repeat`` calls after one warm-up (numba compiles).

    python benchmarks/oblivious_scan.py
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from teeboost.protocols.strict.enclave.oblivious_scan import scan  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--handles", type=int, nargs="+", default=[1, 20, 100])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    words = rng.integers(0, 2**63, size=(args.rows, 2), dtype=np.int64).astype(np.uint64)
    columns = np.ascontiguousarray(words.T)  # stored a column at a time, as a CodeTable stores it
    for k in args.handles:
        handles = rng.integers(0, args.rows, size=k)
        assert np.array_equal(scan(columns, handles), words[handles])  # also compiles the kernel
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            scan(columns, handles)
            times.append(time.perf_counter() - started)
        print(json.dumps({"rows": args.rows, "handles": k, "ms": round(1000 * float(np.median(times)), 2),
                          "table_mb": round(words.nbytes / 1e6, 1)}))


if __name__ == "__main__":
    main()
