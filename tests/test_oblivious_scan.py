"""The strict passive enclave's oblivious scan returns exactly the rows asked for, for any
number of handles (each kernel, and the padding between them), including handles outside the
table (nothing) and the same handle twice."""

import numpy as np
import pytest

from teeboost.protocols.strict.enclave.oblivious_scan import BLOCK_ROWS, scan


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 7, 8, 9, 17, 40])
def test_the_scan_returns_the_rows_at_the_handles(k):
    rng = np.random.default_rng(k)
    n = 2 * BLOCK_ROWS + 37  # blocks and a ragged last one
    words = rng.integers(0, 2**63, size=(n, 3), dtype=np.int64).astype(np.uint64)
    handles = rng.integers(-2, n + 2, size=k)
    handles[0] = n - 1  # the last row of the ragged block
    if k > 1:
        handles[1] = handles[0]  # asked twice
    expected = np.zeros((k, 3), dtype=np.uint64)
    inside = (handles >= 0) & (handles < n)
    expected[inside] = words[handles[inside]]
    assert np.array_equal(scan(np.ascontiguousarray(words.T), handles), expected)


@pytest.mark.parametrize("threads, k", [(2, 3), (3, 21), (4, 9)])
def test_a_large_table_is_scanned_by_threads_whose_rows_depend_on_its_size_alone(monkeypatch, threads, k):
    """Past ``PARALLEL_ROWS`` each thread scans a fixed run of whole blocks for every handle:
    the runs cover the table once, whatever the handles, and rows at the runs' edges are found
    (with each kernel: four handles a pass, and eight)."""
    from teeboost.protocols.strict.enclave import oblivious_scan as module

    monkeypatch.setattr(module, "threads", lambda: threads)
    n = module.PARALLEL_ROWS + 5 * BLOCK_ROWS + 11
    runs = module.row_runs(n)
    assert len(runs) == threads and runs[0][0] == 0 and runs[-1][1] == n
    assert all(a % BLOCK_ROWS == 0 and a < b for a, b in runs) and all(x[1] == y[0] for x, y in zip(runs, runs[1:]))
    rng = np.random.default_rng(7)
    words = rng.integers(0, 2**63, size=(n, 2), dtype=np.int64).astype(np.uint64)
    columns = np.ascontiguousarray(words.T)
    seen = []
    for name in ("_scan4", "_scan8"):
        kernel = getattr(module, name)
        monkeypatch.setattr(module, name, lambda c, q, out, kernel=kernel: (seen.append((c.shape, q.size)),
                                                                            kernel(c, q, out)))
    edges = np.array([a for a, _ in runs[1:]] + [b - 1 for _, b in runs] + [-1, n, 0, 1, 5, 9, 13, 17, n - 1] * 3,
                     dtype=np.int64)[:k]
    calls = []
    for handles in (edges, rng.integers(0, n, size=edges.size)):
        seen.clear()
        expected = np.zeros((handles.size, 2), dtype=np.uint64)
        inside = (handles >= 0) & (handles < n)
        expected[inside] = words[handles[inside]]
        assert np.array_equal(module.scan(columns, handles), expected)
        calls.append(sorted(seen))
    # the same runs and sizes for other handles, each column of each run once
    assert calls[0] == calls[1] and len(calls[0]) == threads * 2


_COMPILED = """
import json, sys
import numpy as np
from teeboost.protocols.strict.enclave import oblivious_scan as module
width = int(sys.argv[1])
def compiled():
    return [len(module._scan4.signatures), len(module._scan8.signatures)]
before = compiled()
module.compile_kernels(width)
after_load = compiled()
words = np.arange(3 * module.BLOCK_ROWS * width, dtype=np.uint64).reshape(-1, width)
for k in (1, 4, 5, 8, 20):
    handles = np.arange(k, dtype=np.int64) * 7
    assert np.array_equal(module.scan(np.ascontiguousarray(words.T), handles), words[handles])
print(json.dumps([before, after_load, compiled()]))
"""


@pytest.mark.parametrize("width", [2, 5])
def test_both_kernels_are_compiled_before_the_first_request(width):
    """A table load compiles the four- and eight-wide kernels: no request waits for numba (the
    first batch of more than four rows once waited about 200 ms). In a fresh process, as an
    enclave starts."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _COMPILED, str(width)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    before, after_load, after_requests = json.loads(done.stdout)
    assert before == [0, 0] and after_load == [1, 1]
    assert after_requests == after_load  # requests of 1 to 20 rows compiled nothing more


def test_codes_decode_to_the_thresholds_they_stand_for_without_indexing_by_them():
    """``decode`` picks each numeric code's threshold by comparing it with every threshold
    (an index would touch the scored row's cache line): the values are the ones an index gives,
    +inf above every threshold, NaN for missing, the category itself for a categorical column."""
    from teeboost.protocols.strict.enclave.oblivious_scan import CodeTable

    rng = np.random.default_rng(11)
    raw = rng.normal(size=(400, 3))
    raw[rng.random(raw.shape) < 0.1] = np.nan
    raw[:, 2] = np.where(np.isnan(raw[:, 2]), np.nan, rng.integers(0, 7, 400))
    features = np.array([0, 0, 1, 1, 1, 2, 0])
    thresholds = np.array([-0.5, 0.25, -1.0, 0.0, 1.5, 0.0, -0.0])
    categories = np.array([0, 0, 0, 0, 0, 9, 0])
    table = CodeTable(raw, np.zeros((400, 16), np.uint8), features, thresholds, categories)
    found, _ = table.rows(np.arange(400))
    for c in range(2):
        cuts = np.append(table.cuts[c], np.inf)
        code = np.searchsorted(table.cuts[c], np.where(np.isnan(raw[:, c]), 0, raw[:, c]), side="left")
        expected = np.where(np.isnan(raw[:, c]), np.nan, cuts[np.clip(code, 0, cuts.size - 1)])
        np.testing.assert_array_equal(found[:, c], expected)
    np.testing.assert_array_equal(found[:, 2], raw[:, 2])
