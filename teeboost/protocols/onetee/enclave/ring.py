"""Exact per-bin sums in the ring Z_2^64 (one-time-pad masked values) with numpy.

Masked values are uniform 64-bit integers; summing them modulo 2^64 per bin must be exact.
numpy's bincount sums in float64, so each value is split into three limbs of at most 22
bits whose per-bin sums stay below 2^53 for up to 2^30 rows, and the limb sums are
recombined with wrap-around uint64 arithmetic.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ring_bincount"]

_LIMB = 22


def ring_bincount(bins: np.ndarray, values: np.ndarray, width: int) -> np.ndarray:
    """sum(values[bins == b]) mod 2^64 for every b < width, as uint64."""
    values = np.asarray(values, dtype=np.uint64)
    total = np.zeros(width, dtype=np.uint64)
    for k in range(3):
        limb = ((values >> np.uint64(_LIMB * k)) & np.uint64((1 << _LIMB) - 1)).astype(np.float64)
        part = np.bincount(bins, weights=limb, minlength=width).astype(np.uint64)
        total += part << np.uint64(_LIMB * k)
    return total
