import numpy as np
import pytest

from teeboost.core.packed import PackedInts
from teeboost.errors import ProtocolError


@pytest.mark.parametrize("largest", [1, 200, 2**12, 2**20, 2**30, 2**39, 2**47, 2**55, 2**62])
def test_packed_integers_split_slice_and_sum_exactly(largest):
    rng = np.random.default_rng(largest % 97)
    values = rng.integers(-largest, largest, 3000)
    values[:2] = (-largest, largest - 1)
    packed = PackedInts.pack(values)
    assert packed.width == max(1, ((largest - 1).bit_length() + 8) // 8)  # [-largest, largest - 1]
    mask = rng.random(values.size) < 0.4
    assert packed.unpack().tolist() == values.tolist()
    assert packed[mask].unpack().tolist() == values[mask].tolist()
    assert packed[~mask][5:700].unpack().tolist() == values[~mask][5:700].tolist()
    assert packed.total() == int(values.sum()) and packed[mask].total() == int(values[mask].sum())
    again = PackedInts.from_buffer(packed.as_bytes(), packed.width, values.size)
    assert again.unpack().tolist() == values.tolist()


def test_packed_extremes_and_empty():
    extremes = np.array([-2**63, 2**63 - 1, 0, -1], dtype=np.int64)
    assert PackedInts.pack(extremes).unpack().tolist() == extremes.tolist()
    empty = PackedInts.from_buffer(np.empty(0, dtype=np.uint8), 5, 0)
    assert empty.unpack().size == 0 and empty.total() == 0


def test_packed_buffer_of_the_wrong_size_is_refused():
    with pytest.raises(ProtocolError, match="do not hold"):
        PackedInts.from_buffer(np.zeros(11, dtype=np.uint8), 5, 2)
    with pytest.raises(ProtocolError, match="do not hold"):
        PackedInts.from_buffer(np.zeros(9, dtype=np.uint8), 9, 1)


@pytest.mark.parametrize("largest", [2**7, 2**30, 2**62])
def test_a_total_over_several_blocks_is_exact_and_a_mask_of_another_length_is_refused(largest):
    """``total`` sums each byte field a block at a time: across blocks and from a view that starts
    inside the array, it is numpy's int64 sum (wrapping past int64, as numpy's does)."""
    from teeboost.core.packed import BLOCK

    rng = np.random.default_rng(3)
    values = rng.integers(-largest, largest, 2 * BLOCK + 777)
    packed = PackedInts.pack(values)
    assert packed.total() == int(values.sum())
    assert packed[1001:].total() == int(values[1001:].sum())
    mask = rng.random(values.size) < 0.5
    assert packed[mask].total() == int(values[mask].sum())
    with pytest.raises(IndexError):
        packed[mask[:-1]]
