"""Exact fixed-point gradients: the reason every protocol grows bit-identical trees.

Each tree's (g, h) are rounded once to integers ``round(v * 2**frac_bits)``. From then on
every protocol (plain sums, Paillier sums, masked ring sums, enclave sums) adds the *same
integers* exactly, in any order, so histogram sums, gains and chosen splits do not depend
on the protocol. ``frac_bits`` is chosen per tree so that a sum over all rows of the tree
stays below 2**52: such sums are exact even in float64 (numpy's weighted bincount), and
leave room for the crypto layers' packing. Precision is 2**-frac_bits (about 1e-11 for
1e5 rows of logistic gradients).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import DataError
from .compiled import ON_HOST

if ON_HOST:  # compiled kernels (``compiled``); an enclave keeps numpy
    from .row_kernels import masked_totals, node_totals
else:
    masked_totals = node_totals = None

__all__ = ["GradientCodec", "EncodedGradients", "SUM_BITS", "MAX_FRAC_BITS", "MIN_FRAC_BITS"]

#: Every sum of encoded values over a tree's rows has magnitude < 2**SUM_BITS.
SUM_BITS = 52
#: Beyond this, extra fractional bits buy nothing for float64 gains.
MAX_FRAC_BITS = 48
#: Below this, gradients are too large to represent usefully: the user must rescale.
MIN_FRAC_BITS = 8


@dataclass(frozen=True)
class GradientCodec:
    """Power-of-two fixed-point scale shared by the parties that decode sums."""

    frac_bits: int

    @property
    def scale(self) -> float:
        return math.ldexp(1.0, self.frac_bits)

    @classmethod
    def for_values(cls, g: np.ndarray, h: np.ndarray, n_rows: int) -> "GradientCodec":
        """Largest precision for which a sum over ``n_rows`` encoded values cannot overflow."""
        # max |g| without an array of |g|
        largest = max(float(np.max(g, initial=0.0)), -float(np.min(g, initial=0.0)), float(np.max(h, initial=0.0)))
        if not math.isfinite(largest):
            raise DataError("gradients are not finite: check the label column for inf values")
        largest = max(largest, 2.0**-30)
        # n * (largest * 2**f + 0.5) < 2**SUM_BITS, with one bit to spare
        n = max(n_rows, 1)
        limit = (2.0**SUM_BITS / n - 0.5) / largest
        frac_bits = min(MAX_FRAC_BITS, math.floor(math.log2(limit)) - 1)
        if frac_bits < MIN_FRAC_BITS:
            raise DataError(
                f"gradients of magnitude {largest:.3g} over {n_rows} rows leave only "
                f"{frac_bits} fractional bits of fixed-point precision; scale the label "
                "column down (e.g. regress on thousands instead of units)"
            )
        return cls(frac_bits)

    def encode(self, values: np.ndarray, *, overwrite: bool = False) -> np.ndarray:
        """``overwrite``: ``values`` is a float64 scratch copy the scaling may reuse."""
        values = np.asarray(values, dtype=np.float64)
        scaled = np.ldexp(values, self.frac_bits, out=values if overwrite else None)
        return np.rint(scaled, out=scaled).astype(np.int64)

    def decode(self, sums: np.ndarray | int) -> np.ndarray | float:
        return np.ldexp(np.asarray(sums, dtype=np.float64), -self.frac_bits)


@dataclass(frozen=True)
class EncodedGradients:
    """One tree's integer gradients, indexed by training row (zero outside the sample)."""

    g: np.ndarray  # int64, shape (n_rows,)
    h: np.ndarray  # int64, shape (n_rows,)
    codec: GradientCodec

    @classmethod
    def encode(
        cls, g: np.ndarray, h: np.ndarray, rows: np.ndarray, n_rows: int
    ) -> "EncodedGradients":
        """Encode the sampled ``rows`` of (g, h); other rows carry zero."""
        g_rows = np.asarray(g, dtype=np.float64)[rows]  # fresh copies: scaled in place below
        h_rows = np.asarray(h, dtype=np.float64)[rows]
        codec = GradientCodec.for_values(g_rows, h_rows, rows.size)
        g_int = np.zeros(n_rows, dtype=np.int64)
        g_int[rows] = codec.encode(g_rows, overwrite=True)
        del g_rows
        h_int = np.zeros(n_rows, dtype=np.int64)
        h_int[rows] = codec.encode(h_rows, overwrite=True)
        return cls(g_int, h_int, codec)

    def totals(self, rows: np.ndarray) -> tuple[int, int]:
        """Exact integer (G, H) over ``rows``."""
        if node_totals is not None and self.g.dtype == np.int64 and self.h.dtype == np.int64:
            return node_totals(self.g, self.h, rows)
        return int(self.g[rows].sum()), int(self.h[rows].sum())

    def totals_where(self, rows: np.ndarray, chosen: np.ndarray) -> tuple[int, int]:
        """``totals(rows[chosen])`` (a split's left rows, from the node's rows and the split)."""
        if masked_totals is not None and self.g.dtype == np.int64 and self.h.dtype == np.int64:
            return masked_totals(self.g, self.h, rows, chosen)
        return self.totals(rows[chosen])
