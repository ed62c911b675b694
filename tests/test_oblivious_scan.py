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
    assert np.array_equal(scan(words, handles), expected)
