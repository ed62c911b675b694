"""Fixed-point slots inside one Paillier plaintext.

A sample's encoded gradient g (and h) is shifted by an offset B so it is non-negative, then
placed in a slot of ``slot_bits`` bits: with packing, one plaintext holds ``(g+B, h+B)``,
halving encryptions, additions and bytes. Slots are wide enough that summing the slots of
every row of a tree cannot carry into the next slot: ``slot_bits = bits(2 * n_rows * B) + 1``.
After homomorphic summation over k rows a slot holds ``sum + k*B``; the active party, who
receives the plaintext count k per bin, subtracts ``k*B``. Several bin sums are packed into
one plaintext before decryption by shifting ciphertexts (``c ** (2**bits)``) and adding.
The precision is the fixed-point codec's (2**-frac_bits); packing loses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ProtocolError

__all__ = ["SlotLayout"]


@dataclass(frozen=True)
class SlotLayout:
    offset: int  # B: every encoded |g|, |h| is below it
    slot_bits: int
    pack_gradients: bool  # (g, h) in one plaintext, else one plaintext each
    ciphertexts_per_plaintext: int  # summed ciphertexts packed per decryption (1 = no bin packing)

    @classmethod
    def for_tree(cls, g: np.ndarray, h: np.ndarray, n_rows: int, plaintext_bits: int,
                 *, pack_gradients: bool = True, pack_bins: bool = True) -> "SlotLayout":
        largest = int(max(np.max(np.abs(g), initial=0), np.max(np.abs(h), initial=0)))
        offset = 1 << (largest + 1).bit_length()  # a power of two: reveals only a magnitude
        slot_bits = (2 * max(n_rows, 1) * offset).bit_length() + 1
        per_ciphertext = slot_bits * (2 if pack_gradients else 1)
        if per_ciphertext > plaintext_bits:
            raise ProtocolError(f"a bin sum needs {per_ciphertext} bits; the key holds {plaintext_bits}")
        group = plaintext_bits // per_ciphertext if pack_bins else 1
        return cls(offset, slot_bits, pack_gradients, group)

    @property
    def slots_per_ciphertext(self) -> int:
        return 2 if self.pack_gradients else 1

    @property
    def ciphertext_bits(self) -> int:
        """Bits one summed ciphertext occupies when packed for decryption."""
        return self.slot_bits * self.slots_per_ciphertext

    def sample_plaintexts(self, g: np.ndarray, h: np.ndarray) -> list[int]:
        """One plaintext per row (packed) or two per row (g then h), row-major."""
        gs = (g.astype(object) + self.offset).tolist()
        hs = (h.astype(object) + self.offset).tolist()
        if self.pack_gradients:
            shift = self.slot_bits
            return [(a << shift) | b for a, b in zip(gs, hs)]
        return [v for pair in zip(gs, hs) for v in pair]

    def unpack(self, plaintexts: list[int], n_ciphertexts: int) -> list[int]:
        """Decrypted packed plaintexts -> every slot value, in ciphertext order."""
        mask = (1 << self.slot_bits) - 1
        group, width, slots = self.ciphertexts_per_plaintext, self.ciphertext_bits, self.slots_per_ciphertext
        expected = (n_ciphertexts + group - 1) // group
        if len(plaintexts) != expected:
            raise ProtocolError(f"{len(plaintexts)} packed histogram ciphertexts, expected {expected}")
        values: list[int] = []
        remaining = n_ciphertexts
        for value in plaintexts:
            here = min(group, remaining)
            if value >> (here * width):
                raise ProtocolError("a decrypted histogram has bits above its slots (tampered or corrupt)")
            for k in range(here):
                packed = value >> ((here - 1 - k) * width)
                for s in range(slots):
                    values.append((packed >> ((slots - 1 - s) * self.slot_bits)) & mask)
            remaining -= here
        return values

    def decode_sums(self, slot_values: list[int], counts: np.ndarray) -> np.ndarray:
        """Slot values (g, h per bin) -> exact int64 (bins, 2) sums, checking each is possible."""
        counts = counts.tolist()
        if len(slot_values) != 2 * len(counts):
            raise ProtocolError(f"{len(slot_values)} slot values for {len(counts)} bins")
        out = np.empty((len(counts), 2), dtype=np.int64)
        b = self.offset
        for i, count in enumerate(counts):
            for channel in range(2):
                value = slot_values[2 * i + channel]
                if value > 2 * count * b:
                    raise ProtocolError("a decrypted bin sum exceeds what its row count allows "
                                        "(tampered or corrupt)")
                out[i, channel] = value - count * b
        return out
