"""Lossless integer arrays in as few bytes as their values need.

Fixed-point gradients are int64 but use far fewer bits (about 37 for 1e5 rows): sending the
low ``width`` bytes of each two's-complement value and sign-extending on arrival is exact and
cuts gradient traffic by ~40%. The bytes are ``core.packed.PackedInts`` items, so an enclave
can keep what arrives as it is.
"""

from __future__ import annotations

import numpy as np

from teeboost.core.packed import PackedInts

__all__ = ["pack_ints", "unpack_ints"]


def pack_ints(values: np.ndarray) -> tuple[int, np.ndarray]:
    """int64 values -> (bytes per value, uint8 array)."""
    packed = PackedInts.pack(values)
    return packed.width, packed.as_bytes()


def unpack_ints(data: np.ndarray, width: int, count: int) -> np.ndarray:
    return PackedInts.from_buffer(data, width, count).unpack()
