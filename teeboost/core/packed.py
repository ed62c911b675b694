"""Signed integers kept in as few bytes as their values need, one fixed-size item per row.

Fixed-point gradients are int64 but use far fewer bits (about 37 at 1e6 rows of logistic
gradients). Kept as the low ``width`` bytes of each little-endian two's-complement value, a
node's g and h take 9 bytes a row instead of 16; they split with the node's rows like any
array (one ``width``-byte item per row, ``NodeRows`` values) and are widened to int64 only a
block at a time, where they are summed. The same bytes are the wire format
(``protocols.enclave.intcodec``), so what arrives is stored as it is.
"""

from __future__ import annotations

import numpy as np

from ..errors import ProtocolError

__all__ = ["PackedInts", "BLOCK", "select"]

#: Items widened at a time when summing: bounds the int64 temporaries to a few MB.
BLOCK = 1 << 16


class PackedInts:
    """A row-aligned array of signed integers stored in ``width`` bytes each."""

    __slots__ = ("items", "width")

    def __init__(self, items: np.ndarray, width: int) -> None:
        self.items = items  # 1-D, one opaque ``width``-byte item per row
        self.width = width

    @classmethod
    def pack(cls, values: np.ndarray) -> "PackedInts":
        """int64 values -> the fewest bytes each (at least one) that hold every value."""
        values = np.ascontiguousarray(values, dtype="<i8")
        largest = max(int(values.max(initial=0)), -int(values.min(initial=0)) - 1)
        width = max(1, (largest.bit_length() + 1 + 7) // 8)  # +1 for the sign
        low = np.ascontiguousarray(values.view(np.uint8).reshape(-1, 8)[:, :width])
        return cls(low.view(_item(width)).reshape(-1), width)

    @classmethod
    def from_buffer(cls, data: np.ndarray, width: int, count: int) -> "PackedInts":
        """``count`` items of ``width`` bytes, read in place from ``data`` (checked)."""
        data = np.asarray(data)
        if not 1 <= width <= 8 or data.dtype != np.uint8 or data.ndim != 1 or data.size != width * count:
            raise ProtocolError(f"{data.size} bytes do not hold {count} integers of {width} bytes")
        return cls(data.view(_item(width)), width)

    @property
    def shape(self) -> tuple[int]:
        return self.items.shape

    @property
    def size(self) -> int:
        return int(self.items.size)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index) -> "PackedInts":
        """The items of some rows (a boolean mask or a slice), still packed."""
        if isinstance(index, np.ndarray) and index.dtype == bool:
            return PackedInts(select(self.items, index), self.width)
        return PackedInts(self.items[index], self.width)

    def as_bytes(self) -> np.ndarray:
        """The items as a flat uint8 array (the wire format)."""
        return self.items.view(np.uint8)

    def unpack(self) -> np.ndarray:
        """int64 values, read through strided views of the items' bytes: the top byte as a
        signed int8 (it carries the sign), the bytes below it as unsigned 4-, 2- and 1-byte
        fields, each widened and shifted into place (no per-byte copying)."""
        n, width = self.size, self.width
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        raw = np.ascontiguousarray(self.items).view(np.uint8)

        def field(dtype: str, offset: int) -> np.ndarray:
            return np.ndarray((n,), dtype=dtype, buffer=raw, offset=offset, strides=(width,))

        out = field("i1", width - 1).astype(np.int64) << np.int64(8 * (width - 1))
        offset = 0
        for size, dtype in ((4, "<u4"), (2, "<u2"), (1, "u1")):
            while width - 1 - offset >= size:
                out |= field(dtype, offset).astype(np.int64) << np.int64(8 * offset)
                offset += size
        return out

    def total(self) -> int:
        """The sum as numpy's int64 sum gives it (wrapping; a codec keeps real sums far inside
        int64): each byte field (the signed top byte, the unsigned ones below it) summed on its
        own and shifted into place, a block at a time, never widened to int64 items (143
        against 439 us for 1e5 items of 4 bytes, this machine, 2026-12-07)."""
        n, width = self.size, self.width
        raw = np.ascontiguousarray(self.items).view(np.uint8)
        total = 0
        for start in range(0, n, BLOCK):
            count = min(BLOCK, n - start)

            def field(dtype: str, offset: int) -> np.ndarray:
                return np.ndarray((count,), dtype=dtype, buffer=raw, offset=start * width + offset, strides=(width,))

            total += int(field("i1", width - 1).sum(dtype=np.int64)) << (8 * (width - 1))
            offset = 0
            for size, dtype in ((4, "<u4"), (2, "<u2"), (1, "u1")):
                while width - 1 - offset >= size:
                    total += int(field(dtype, offset).sum(dtype=np.int64)) << (8 * offset)
                    offset += size
        return ((total + (1 << 63)) % (1 << 64)) - (1 << 63)  # as int64 arithmetic wraps, as numpy's sum


def select(items: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``items[mask]`` for a 1-D array of opaque fixed-size items, gathered as rows of bytes:
    numpy copies void items one at a time (487 us for 1e5 items of 4 bytes, half chosen),
    rows of bytes in 121 us with the mask's positions (this machine, 2026-12-07)."""
    if mask.shape != items.shape:
        raise IndexError(f"a mask of {mask.shape} does not select from {items.shape} items")
    size = items.dtype.itemsize
    rows = np.ascontiguousarray(items).view(np.uint8).reshape(-1, size)
    return rows.take(np.flatnonzero(mask), axis=0).view(items.dtype).reshape(-1)


def _item(width: int) -> np.dtype:
    return np.dtype((np.void, width))
