"""Paillier encryption over gmpy2, with the key holder's fast paths.

Public operations are textbook Paillier with g = n + 1: ``Enc(m) = (1 + m n) r^n mod n^2``
for a fresh uniform r in Z_n^*, addition is multiplication of ciphertexts modulo n^2.

The key holder (the active party, who knows p and q) encrypts faster, as in Damgard,
Jurik and Nielsen ("A generalization of Paillier's public-key system with applications to
electronic voting", IJIS 2010, section 4.1): with h = -y^2 mod n for random y and
h_s = h^n mod n^2 (public), the randomiser is h_s^x for x uniform of n/2 = 1024 bits (or, with
``randomizer_bits``, the 2 * lambda bits of ``randomizer_length``), computed modulo p^2 and q^2
separately with fixed-base tables and joined by the CRT. Randomisers do not depend on the
plaintext, so they can be computed ahead (``randomizers``); encrypting with one is then a
single multiplication (``encrypt_with``). Decryption uses the CRT (Paillier 1999, section 7).
Randomness comes only from ``secrets``.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import gmpy2
from gmpy2 import mpz

from ..errors import ConfigError, ProtocolError
from .fixed_base import FixedBaseTable, random_exponent_digits
from .randomizer_length import check_randomizer_bits, randomizer_bits as default_randomizer_bits

__all__ = ["PaillierPublicKey", "PaillierPrivateKey", "generate_paillier_keypair", "MIN_SECURE_BITS"]

#: Smallest modulus accepted without ``insecure_key_bits`` (NIST SP 800-57: 112-bit security).
MIN_SECURE_BITS = 2048


def _random_prime(bits: int) -> mpz:
    while True:
        candidate = mpz(secrets.randbits(bits)) | (mpz(3) << (bits - 2)) | 1  # top two bits set
        if gmpy2.is_prime(candidate, 64):
            return candidate


@dataclass(frozen=True)
class PaillierPublicKey:
    n: mpz
    h_s: mpz  # DJN generator h^n mod n^2 (public; lets anyone use short-exponent randomisers)

    scheme = "paillier"

    @property
    def n_square(self) -> mpz:
        return self.n * self.n

    @property
    def ciphertext_modulus(self) -> mpz:
        """Ciphertexts multiply modulo this to add plaintexts."""
        return self.n * self.n

    def numbers(self) -> dict[str, int]:
        return {"n": int(self.n), "h_s": int(self.h_s)}

    @classmethod
    def from_numbers(cls, numbers: dict[str, int]) -> "PaillierPublicKey":
        n, h_s = mpz(numbers["n"]), mpz(numbers["h_s"])
        if n.bit_length() < 256 or not 0 < h_s < n * n:
            raise ProtocolError("malformed Paillier public key")
        return cls(n, h_s)

    @property
    def bits(self) -> int:
        return int(self.n.bit_length())

    @property
    def ciphertext_bytes(self) -> int:
        return (2 * self.bits + 7) // 8

    @property
    def plaintext_bits(self) -> int:
        """Plaintexts below 2**plaintext_bits are always below n."""
        return self.bits - 1

    def encrypt(self, m: int) -> mpz:
        """Textbook encryption with a fresh r in Z_n^* (anyone holding the public key)."""
        n, n2 = self.n, self.n_square
        while True:
            r = mpz(secrets.randbelow(int(n) - 1) + 1)
            if gmpy2.gcd(r, n) == 1:
                break
        return (1 + mpz(m) % n * n) * gmpy2.powmod(r, n, n2) % n2

    def check_ciphertext(self, c: mpz) -> None:
        if not 0 < c < self.n_square:
            raise ProtocolError("ciphertext out of range for this key")


class PaillierPrivateKey:
    """p, q and everything precomputed from them; builds encryption tables on demand."""

    def __init__(self, public: PaillierPublicKey, p: int, q: int, *, window: int = 12,
                 randomizer_bits: int | None = None) -> None:
        """``randomizer_bits``: length of the random exponent x (default n/2, DJN's)."""
        p, q = mpz(p), mpz(q)
        if p == q or p * q != public.n:
            raise ConfigError("p and q do not match the public key")
        self.exponent_bits = check_randomizer_bits(randomizer_bits or default_randomizer_bits("paillier", public.bits),
                                                   public.bits)
        self.public = public
        self.p, self.q = p, q
        self.p_square, self.q_square = p * p, q * q
        # CRT decryption constants (g = n + 1)
        self._hp = gmpy2.invert(self._l(gmpy2.powmod(public.n + 1, p - 1, self.p_square), p), p)
        self._hq = gmpy2.invert(self._l(gmpy2.powmod(public.n + 1, q - 1, self.q_square), q), q)
        self._q_inv_p = gmpy2.invert(q, p)
        self._q2_inv_p2 = gmpy2.invert(self.q_square, self.p_square)
        self.window = window
        self._tables: tuple[FixedBaseTable, FixedBaseTable] | None = None

    @staticmethod
    def _l(x: mpz, d: mpz) -> mpz:
        return (x - 1) // d

    def numbers(self) -> dict[str, int]:
        return {"p": int(self.p), "q": int(self.q)}

    def _crt_square(self, a_p2: mpz, a_q2: mpz) -> mpz:
        """x mod n^2 from x mod p^2 and x mod q^2."""
        return a_q2 + self.q_square * ((a_p2 - a_q2) * self._q2_inv_p2 % self.p_square)

    def build_tables(self) -> None:
        if self._tables is None:
            bits = self.exponent_bits
            self._tables = (
                FixedBaseTable(self.public.h_s, self.p_square, bits, self.window),
                FixedBaseTable(self.public.h_s, self.q_square, bits, self.window),
            )

    def randomizers(self, count: int) -> list[mpz]:
        """``count`` fresh h_s^x mod n^2, each half by its fixed-base table (the costly part)."""
        self.build_tables()
        table_p, table_q = self._tables
        digits = random_exponent_digits(count, self.exponent_bits, self.window)
        return [self._crt_square(table_p.power(row), table_q.power(row)) for row in digits]

    def encrypt_with(self, plaintexts: list[int], randomizers: list[mpz]) -> list[mpz]:
        """(1 + m n) * r mod n^2: one multiplication per plaintext. Each randomiser must be
        fresh from ``randomizers`` and used once."""
        if len(randomizers) != len(plaintexts):
            raise ConfigError(f"{len(plaintexts)} plaintexts but {len(randomizers)} randomizers")
        n, n2 = self.public.n, self.public.n_square
        return [(1 + mpz(m) % n * n) * r % n2 for m, r in zip(plaintexts, randomizers)]

    def encrypt_many(self, plaintexts: list[int]) -> list[mpz]:
        """Fast key-holder encryption: (1 + m n) * h_s^x."""
        return self.encrypt_with(plaintexts, self.randomizers(len(plaintexts)))

    def decrypt(self, c: mpz) -> mpz:
        self.public.check_ciphertext(c)
        p, q = self.p, self.q
        m_p = self._l(gmpy2.powmod(c, p - 1, self.p_square), p) * self._hp % p
        m_q = self._l(gmpy2.powmod(c, q - 1, self.q_square), q) * self._hq % q
        return m_q + q * ((m_p - m_q) * self._q_inv_p % p)

    def decrypt_many(self, ciphertexts: list[mpz]) -> list[mpz]:
        return [self.decrypt(c) for c in ciphertexts]


def generate_paillier_keypair(bits: int = 2048, *, insecure_key_bits: bool = False,
                              window: int = 12, randomizer_bits: int | None = None) -> PaillierPrivateKey:
    """Fresh key pair with an n of exactly ``bits`` bits (p != q, both bits/2-bit primes)."""
    if bits < MIN_SECURE_BITS and not insecure_key_bits:
        raise ConfigError(
            f"key_bits={bits} is below {MIN_SECURE_BITS}; smaller keys are only for tests "
            "and need insecure_key_bits=True"
        )
    if bits < 256 or bits % 2:
        raise ConfigError(f"key_bits={bits} must be even and at least 256")
    while True:
        p, q = _random_prime(bits // 2), _random_prime(bits // 2)
        n = p * q
        if p != q and n.bit_length() == bits:
            break
    while True:
        y = mpz(secrets.randbelow(int(n) - 2) + 2)
        if gmpy2.gcd(y, n) == 1:
            break
    h = (-(y * y)) % n
    public = PaillierPublicKey(n, gmpy2.powmod(h, n, n * n))
    return PaillierPrivateKey(public, p, q, window=window, randomizer_bits=randomizer_bits)

