import numpy as np
import pytest

from teeboost.crypto.packing import SlotLayout
from teeboost.errors import ProtocolError


def test_known_answer_layout_and_plaintexts():
    g = np.array([-3, 5], dtype=np.int64)
    h = np.array([2, 1], dtype=np.int64)
    layout = SlotLayout.for_tree(g, h, n_rows=2, plaintext_bits=64)
    assert layout.offset == 8  # next power of two above max |value| = 5 (+1)
    assert layout.slot_bits == 7  # bits(2 * 2 * 8) + 1
    assert layout.ciphertexts_per_plaintext == 64 // 14
    assert layout.sample_plaintexts(g, h) == [(5 << 7) | 10, (13 << 7) | 9]
    unpacked = SlotLayout.for_tree(g, h, 2, 64, pack_gradients=False, pack_bins=False)
    assert unpacked.sample_plaintexts(g, h) == [5, 10, 13, 9]
    assert unpacked.ciphertexts_per_plaintext == 1


def test_sums_of_any_rows_decode_exactly_including_negatives():
    rng = np.random.default_rng(0)
    g = rng.integers(-2**40, 2**40, 1000)
    h = rng.integers(0, 2**40, 1000)
    layout = SlotLayout.for_tree(g, h, 1000, plaintext_bits=2047)
    plain = layout.sample_plaintexts(g, h)
    # "homomorphic" sums of two bins = integer sums of plaintexts, packed by shifting
    bins = [np.arange(0, 600), np.arange(600, 1000)]
    sums = [sum(plain[i] for i in rows) for rows in bins]
    packed = (sums[0] << layout.ciphertext_bits) | sums[1]
    values = layout.unpack([packed], 2)
    decoded = layout.decode_sums(values, np.array([600, 400]))
    assert decoded.tolist() == [[int(g[r].sum()), int(h[r].sum())] for r in bins]


def test_corrupt_plaintexts_are_detected():
    g = np.array([1, -1]); h = np.array([1, 1])
    layout = SlotLayout.for_tree(g, h, 2, 256)
    with pytest.raises(ProtocolError, match="bits above its slots"):
        layout.unpack([1 << 255], 1)
    values = layout.unpack([(3 << layout.slot_bits) | 3], 1)
    with pytest.raises(ProtocolError, match="exceeds what its row count allows"):
        layout.decode_sums([values[0] + 10**6, values[1]], np.array([1]))
