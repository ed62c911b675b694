"""Lossless integer arrays in as few bytes as their values need.

Fixed-point gradients are int64 but use far fewer bits (about 37 for 1e5 rows): sending the
low ``width`` bytes of each two's-complement value and sign-extending on arrival is exact and
cuts gradient traffic by ~40%.
"""

from __future__ import annotations

import numpy as np

from ..errors import ProtocolError

__all__ = ["pack_ints", "unpack_ints"]


def pack_ints(values: np.ndarray) -> tuple[int, np.ndarray]:
    """int64 values -> (bytes per value, uint8 array)."""
    values = np.ascontiguousarray(values, dtype="<i8")
    largest = int(max(values.max(initial=0), -values.min(initial=0) - 1))
    width = max(1, (largest.bit_length() + 1 + 7) // 8)  # +1 for the sign
    return width, values.view(np.uint8).reshape(-1, 8)[:, :width].reshape(-1).copy()


def unpack_ints(data: np.ndarray, width: int, count: int) -> np.ndarray:
    if not 1 <= width <= 8 or data.size != width * count:
        raise ProtocolError(f"{data.size} bytes do not hold {count} integers of {width} bytes")
    full = np.zeros((count, 8), dtype=np.uint8)
    full[:, :width] = data.reshape(count, width)
    if width < 8:
        negative = full[:, width - 1] >= 0x80
        full[negative, width:] = 0xFF
    return full.reshape(-1).view("<i8").copy()
