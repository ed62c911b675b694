"""Finding rows by handle inside a strict passive enclave without its host learning which.

Online scoring asks a passive enclave about a few of its rows, named by handle (position in
the party's online id set). Reading ``table[handle]`` would show the host, through the memory
pages and cache lines it touches, which customer was scored. ``scan`` instead reads every row
of the table once, in order, for every batch, and keeps a row with a mask computed from a
comparison (no branch, no index that depends on a handle): the memory touched depends only on
the table's size and the number of rows asked for, never on which.

Rows are packed small so the scan is cheap: each of the party's columns becomes an 8-bit code
(16-bit if a column has more than 254 thresholds) that routes exactly like the raw value at
every one of its split records (a numeric value's code is how many of the feature's thresholds
lie below it; a category's code is the category; missing is all ones), and ``decode`` turns
codes back into values that each record sends the same way as the raw ones (a threshold
itself, +inf above all of them). The row's ledger key (the first 8 bytes of its keyed hash)
travels with it. At 1e6 rows of 5 columns that is 2 words a row, 16 MB per scan, stored a
column (of words) at a time.
"""

from __future__ import annotations

import os
import threading

import numba
import numpy as np

__all__ = ["CodeTable", "scan", "compile_kernels", "row_runs", "KEY_BYTES", "BLOCK_ROWS", "PARALLEL_ROWS"]

KEY_BYTES = 8


#: Rows read together: a block stays in the core's cache while every group of queries passes over it.
BLOCK_ROWS = 2048


@numba.njit(cache=False, nogil=True)  # the measured loader reads source, not files: compiled per enclave
def _scan4(column: np.ndarray, queries: np.ndarray, out: np.ndarray) -> None:
    """Four queries per pass over a block of one column (``queries`` padded with -1, which
    matches no row): one customer, the common online request, pays for four, not eight."""
    zero = np.uint64(0)
    for start in range(0, column.size, BLOCK_ROWS):
        stop = min(start + BLOCK_ROWS, column.size)
        for j in range(0, queries.size, 4):
            q0, q1, q2, q3 = queries[j], queries[j + 1], queries[j + 2], queries[j + 3]
            a0 = a1 = a2 = a3 = zero
            for i in range(start, stop):
                value = column[i]
                a0 |= value & (zero - np.uint64(q0 == i))
                a1 |= value & (zero - np.uint64(q1 == i))
                a2 |= value & (zero - np.uint64(q2 == i))
                a3 |= value & (zero - np.uint64(q3 == i))
            out[j] |= a0
            out[j + 1] |= a1
            out[j + 2] |= a2
            out[j + 3] |= a3


@numba.njit(cache=False, nogil=True)
def _scan8(column: np.ndarray, queries: np.ndarray, out: np.ndarray) -> None:
    """Eight queries per pass over a block of one column (``queries`` padded with -1)."""
    zero = np.uint64(0)
    for start in range(0, column.size, BLOCK_ROWS):
        stop = min(start + BLOCK_ROWS, column.size)
        for j in range(0, queries.size, 8):
            q0, q1, q2, q3 = queries[j], queries[j + 1], queries[j + 2], queries[j + 3]
            q4, q5, q6, q7 = queries[j + 4], queries[j + 5], queries[j + 6], queries[j + 7]
            a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = zero
            for i in range(start, stop):
                value = column[i]
                a0 |= value & (zero - np.uint64(q0 == i))
                a1 |= value & (zero - np.uint64(q1 == i))
                a2 |= value & (zero - np.uint64(q2 == i))
                a3 |= value & (zero - np.uint64(q3 == i))
                a4 |= value & (zero - np.uint64(q4 == i))
                a5 |= value & (zero - np.uint64(q5 == i))
                a6 |= value & (zero - np.uint64(q6 == i))
                a7 |= value & (zero - np.uint64(q7 == i))
            out[j] |= a0
            out[j + 1] |= a1
            out[j + 2] |= a2
            out[j + 3] |= a3
            out[j + 4] |= a4
            out[j + 5] |= a5
            out[j + 6] |= a6
            out[j + 7] |= a7


def scan(columns: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """(width, rows) uint64 table, stored a column at a time, k handles -> (k, width) the rows
    at those handles, every row of every column read for each group of four or eight handles
    (which kernel, and how many passes, depends on k alone). A handle outside the table selects
    nothing (all zeros).

    A column at a time, each contiguous: a row-major table of two words cost 29.3 ms for 96
    handles at 1e6 rows, its two columns 16.4 ms (one thread, this machine, 2026-12-07).

    Tables of ``PARALLEL_ROWS`` rows or more are cut into ``threads()`` equal runs of whole
    blocks, each scanned by its own thread (the kernels release the GIL) for every handle,
    shifted into the run's own numbering: which rows a thread reads depends on the table's size
    alone, and the runs' answers are OR-ed (each row lies in one run)."""
    k = int(queries.size)
    group = 4 if k <= 4 else 8
    padded = np.full(max(group, -(-k // group) * group), -1, dtype=np.int64)
    padded[:k] = np.asarray(queries, dtype=np.int64)
    table = np.ascontiguousarray(columns, dtype=np.uint64)
    kernel = _scan4 if group == 4 else _scan8
    runs = row_runs(table.shape[1])
    outs = [np.zeros((table.shape[0], padded.size), dtype=np.uint64) for _ in runs]

    def run(a: int, b: int, out: np.ndarray) -> None:
        # a handle below a run's start goes negative, one past its end stays past it: neither matches
        shifted = np.where(padded >= 0, padded - a, -1)
        for c in range(table.shape[0]):
            kernel(table[c, a:b], shifted, out[c])

    if len(runs) == 1:
        run(*runs[0], outs[0])
    else:
        for future in [_pool().submit(run, a, b, out) for (a, b), out in zip(runs, outs)]:
            future.result()
    out = outs[0]
    for other in outs[1:]:
        out |= other
    return np.ascontiguousarray(out[:, :k].T)


def compile_kernels(width: int) -> None:
    """Both kernels compiled for a table ``width`` words wide, before any request. numba
    compiles a kernel at its first call: the eight-wide one took about 200 ms at the first batch
    of more than four rows, which 20 requests waited for (the p99 of a serving run at 1e6 ids,
    benchmarks/serving.py, 2026-11-27); a one-row table has the same types as the real one."""
    tiny = np.zeros((width, 1), dtype=np.uint64)
    for k in (4, 8):
        scan(tiny, np.full(k, -1, dtype=np.int64))


#: Tables this large are scanned by several threads (below it, a thread costs more than it saves).
PARALLEL_ROWS = 64 * BLOCK_ROWS
_POOL: list = []
_POOL_LOCK = threading.Lock()


def row_runs(n: int) -> list[tuple[int, int]]:
    """The (start, stop) rows each thread scans: whole blocks, as even as they go, from ``n`` alone."""
    parts = threads() if n >= PARALLEL_ROWS else 1
    blocks = -(-n // BLOCK_ROWS)
    edges = [min(n, (blocks * t // parts) * BLOCK_ROWS) for t in range(parts + 1)]
    return list(zip(edges, edges[1:]))


def threads() -> int:
    """Threads a large scan uses: the enclave's cores, at most 4."""
    return max(1, min(4, os.cpu_count() or 1))


def _pool():
    with _POOL_LOCK:  # one pool, also when two requests make the first large scan at once
        if not _POOL:
            from concurrent.futures import ThreadPoolExecutor

            _POOL.append(ThreadPoolExecutor(max_workers=threads(), thread_name_prefix="oblivious-scan"))
        return _POOL[0]


class CodeTable:
    """A party's rows as 16-bit codes per column plus a 16-byte key, packed into uint64 words."""

    def __init__(self, raw: np.ndarray, keys: np.ndarray, features: np.ndarray, thresholds: np.ndarray,
                 categories: np.ndarray) -> None:
        n, f = raw.shape
        self.n_features = f
        self.categorical = np.zeros(f, dtype=bool)
        self.cuts: list[np.ndarray] = []
        for c in range(f):
            mine = features == c
            self.categorical[c] = bool(np.any(categories[mine] != 0))
            self.cuts.append(np.unique(thresholds[mine & (categories == 0)]))
        wide = any(cuts.size > 254 for cuts in self.cuts)
        self.code_type = np.dtype(np.uint16 if wide else np.uint8)
        self.missing = int(np.iinfo(self.code_type).max)
        codes = np.zeros((n, f), dtype=self.code_type)
        for c in range(f):
            values = raw[:, c]
            missing = np.isnan(values)
            if self.categorical[c]:
                code = np.clip(np.where(missing, 0, values), 0, 63)
            else:
                code = np.searchsorted(self.cuts[c], np.where(missing, 0, values), side="left")
            codes[:, c] = np.where(missing, self.missing, code).astype(self.code_type)
        per_word = 8 // self.code_type.itemsize
        self.code_words = (f + per_word - 1) // per_word
        packed = np.zeros((n, self.code_words * per_word), dtype=self.code_type)
        packed[:, :f] = codes
        key = np.ascontiguousarray(np.asarray(keys, dtype=np.uint8)[:, :KEY_BYTES])
        # stored a column at a time, as ``scan`` reads it
        self.columns = np.ascontiguousarray(np.hstack([packed.view(np.uint64), key.view(np.uint64)]).T)

    @property
    def n_rows(self) -> int:
        return self.columns.shape[1]

    def rows(self, handles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values that route as the raw rows do, (k, KEY_BYTES) ledger keys) of the rows at ``handles``."""
        return self._unpacked(scan(self.columns, handles))

    def rows_known(self, handles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``rows`` for handles the host already knows (N-TEE: it charged them): read directly,
        since the pages touched tell it nothing new."""
        return self._unpacked(np.ascontiguousarray(self.columns[:, np.asarray(handles, dtype=np.int64)].T))

    def _unpacked(self, found: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        codes = np.ascontiguousarray(found[:, :self.code_words]).view(self.code_type)[:, :self.n_features]
        keys = np.ascontiguousarray(found[:, self.code_words:]).view(np.uint8).reshape(-1, KEY_BYTES)
        return self.decode(codes), keys

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """Values that route as the codes do. A numeric code picks its threshold by comparison
        with every threshold of the column, not by index: ``cuts[code]`` touched the cache line
        of the scored row's interval among the thresholds, which a host that loaded the table
        could match to its customers (red team, 2026-12-07)."""
        values = np.empty(codes.shape, dtype=np.float64)
        for c in range(self.n_features):
            code = codes[:, c].astype(np.int64)
            missing = code == self.missing
            if self.categorical[c]:
                value = code.astype(np.float64)
            else:
                cuts = np.append(self.cuts[c], np.inf)
                picked = np.clip(code, 0, cuts.size - 1)[:, None] == np.arange(cuts.size)[None, :]
                value = np.where(picked, cuts[None, :], 0.0).sum(axis=1)  # one term is the threshold, the rest 0
            values[:, c] = np.where(missing, np.nan, value)
        return values
