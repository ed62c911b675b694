"""Compact encodings of partitions, row sets and gradients: exact round trips, and every
malformed input refused."""

import numpy as np
import pytest

from teeboost.errors import ProtocolError
from teeboost.protocols.enclave.intcodec import pack_ints, unpack_ints
from teeboost.protocols.enclave.partition import bit_chunks, bitmap_rows, bits_to_masks, bits_to_subsets, encode_row_sets, masks_to_bits


def test_partitions_round_trip_as_bits_per_node():
    rng = np.random.default_rng(0)
    masks = [rng.random(size) < 0.4 for size in (1, 8, 13, 1000)]
    bits = masks_to_bits(masks)
    sizes = [m.size for m in masks]
    assert bits.size == sum((s + 7) // 8 for s in sizes)
    assert [m.tolist() for m in bits_to_masks(sizes, bits, "test")] == [m.tolist() for m in masks]
    assert [c.tolist() for c in bit_chunks(sizes, bits)] == [np.packbits(m).tolist() for m in masks]
    parents = [np.arange(s) * 3 for s in sizes]
    assert [s.tolist() for s in bits_to_subsets(parents, bits, "test")] == \
        [p[m].tolist() for p, m in zip(parents, masks)]


def test_partition_bits_of_the_wrong_length_or_beyond_the_node_are_refused():
    bits = masks_to_bits([np.ones(13, dtype=bool)])
    with pytest.raises(ProtocolError, match="bytes of row masks"):
        bits_to_masks([13, 5], bits, "test")
    padded = bits.copy()
    padded[-1] |= 1  # a 14th row in a node of 13
    with pytest.raises(ProtocolError, match="beyond the node"):
        bits_to_masks([13], padded, "test")


def test_bitmap_rows_are_sorted_distinct_and_bounded():
    rows = np.array([0, 5, 6, 19])
    encodings, offsets, payload = encode_row_sets([rows, np.arange(20)], 20)
    assert bitmap_rows(payload[offsets[1]:offsets[2]], 20, "test").tolist() == list(range(20))
    with pytest.raises(ProtocolError, match="bitmap of"):
        bitmap_rows(np.zeros(2, dtype=np.uint8), 20, "test")
    with pytest.raises(ProtocolError, match="beyond the dataset"):
        bitmap_rows(np.array([0, 0, 0x08], dtype=np.uint8), 20, "test")


@pytest.mark.parametrize("largest", [0, 127, 128, 2**20, 2**39, 2**55, 2**63 - 1])
def test_integers_round_trip_in_the_fewest_bytes(largest):
    values = np.array([0, 1, -1, largest, -largest, -largest - 1], dtype=np.int64)
    width, packed = pack_ints(values)
    assert width == max(1, (max(largest, 1).bit_length() + 8) // 8)
    assert packed.size == width * values.size
    assert unpack_ints(packed, width, values.size).tolist() == values.tolist()


def test_a_row_set_is_counted_as_decoding_would_check_it():
    from teeboost.protocols.enclave.partition import decode_row_sets, row_set_size

    for rows in (np.array([0, 5, 6, 19]), np.arange(3, 20)):  # a list, a bitmap
        encodings, offsets, payload = encode_row_sets([rows], 20)
        assert row_set_size(encodings, offsets, payload, 20, "test") == rows.size
    encodings, offsets, payload = encode_row_sets([np.arange(3, 20)], 20)
    bad = payload.copy()
    bad[-1] |= 1
    for check in (row_set_size, decode_row_sets):
        with pytest.raises(ProtocolError, match="beyond the dataset"):
            check(encodings, offsets, bad, 20, "test")
