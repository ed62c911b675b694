"""Okamoto-Uchiyama encryption (EUROCRYPT 1998): the faster scheme behind the same interface.

n = p^2 q with |p| = |q| (2048-bit n: 683/682-bit primes), g in Z_n with g^(p-1) of order p
modulo p^2, h = g^n mod n. ``Enc(m) = g^m h^r mod n`` for m < 2^(|p|-1); ciphertexts multiply
modulo n (not n^2, as in Paillier) to add plaintexts, so they are half the size and additions
about three times cheaper. Decryption: ``m = L(c^(p-1) mod p^2) / L(g^(p-1) mod p^2) mod p``
with L(x) = (x - 1) / p. Security rests on factoring n = p^2 q (no method is known that uses
the square factor at this size; NFS on a 2048-bit n and ECM on a 683-bit p are both out of
reach) and the p-subgroup assumption.

The randomiser h^r takes r of 2 * lambda bits (224 at 2048-bit keys, 256 at 3072: see
``randomizer_length`` for the generic attack this length answers and why shorter is unsafe).
<h> has order about 2^1365, hidden by the factorisation of n.

The key holder computes g^m and h^r modulo p^2 and q with fixed-base tables and joins them
by the CRT. h^r, the costly part, does not depend on m: ``randomizers`` computes it ahead and
``encrypt_with`` is then g^m (a window-8 table: one multiplication per 8 plaintext bits, 14 for
SecureBoost's 112-bit packed gradients) times the ready randomiser. Ciphertexts are textbook
ones, so a short r only ever allows the generic plaintext test of ``randomizer_length``. (A
factor 1 + mK, with K the CRT of g's order-p component, would make encryption a single
multiplication, but such c satisfy c^n = (h^n)^r: one short discrete logarithm would give r,
then m K, and gcd(m K, n) would factor n. At 2 lambda bits that is still 2^lambda work, but
its prize is the key instead of one plaintext, so it is not used.)
Anyone with only the public key encrypts textbook-style (``OUPublicKey.encrypt``).
Paillier stays the default; choose this scheme with ``scheme="ou"``.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import gmpy2
from gmpy2 import mpz

from ..errors import ConfigError, ProtocolError
from .fixed_base import FixedBaseTable, random_exponent_digits
from .paillier import MIN_SECURE_BITS, _random_prime
from .randomizer_length import check_randomizer_bits, randomizer_bits as default_randomizer_bits

__all__ = ["OUPublicKey", "OUPrivateKey", "generate_ou_keypair"]


@dataclass(frozen=True)
class OUPublicKey:
    n: mpz
    g: mpz
    h: mpz

    scheme = "ou"

    @property
    def bits(self) -> int:
        return int(self.n.bit_length())

    @property
    def ciphertext_modulus(self) -> mpz:
        return self.n

    @property
    def ciphertext_bytes(self) -> int:
        return (self.bits + 7) // 8

    @property
    def plaintext_bits(self) -> int:
        """Plaintexts below 2**plaintext_bits are below p (|p| = ceil(bits / 3))."""
        return (self.bits + 2) // 3 - 2

    def encrypt(self, m: int) -> mpz:
        """Public-key encryption with r uniform in Z_n (anyone holding the public key)."""
        if not 0 <= m < 1 << self.plaintext_bits:
            raise ConfigError("plaintext out of range")
        r = mpz(secrets.randbelow(int(self.n)))
        return gmpy2.powmod(self.g, m, self.n) * gmpy2.powmod(self.h, r, self.n) % self.n

    def check_ciphertext(self, c: mpz) -> None:
        if not 0 < c < self.n:
            raise ProtocolError("ciphertext out of range for this key")

    def numbers(self) -> dict[str, int]:
        return {"n": int(self.n), "g": int(self.g), "h": int(self.h)}

    @classmethod
    def from_numbers(cls, numbers: dict[str, int]) -> "OUPublicKey":
        n, g, h = mpz(numbers["n"]), mpz(numbers["g"]), mpz(numbers["h"])
        if n.bit_length() < 256 or not (0 < g < n and 0 < h < n):
            raise ProtocolError("malformed Okamoto-Uchiyama public key")
        return cls(n, g, h)


class OUPrivateKey:
    def __init__(self, public: OUPublicKey, p: int, q: int, *, window: int = 12,
                 randomizer_bits: int | None = None) -> None:
        """``randomizer_bits``: length of the random exponent r (default 2 * lambda)."""
        p, q = mpz(p), mpz(q)
        if p * p * q != public.n or p == q:
            raise ConfigError("p and q do not match the public key")
        self.public = public
        self.p, self.q = p, q
        self.p_square = p * p
        l_g = (gmpy2.powmod(public.g, p - 1, self.p_square) - 1) // p
        self._l_g_inv = gmpy2.invert(l_g, p)
        self._q_inv_p2 = gmpy2.invert(q, self.p_square)
        self.window = window
        self.exponent_bits = check_randomizer_bits(randomizer_bits or default_randomizer_bits("ou", public.bits),
                                                   public.bits)
        self._tables: tuple[FixedBaseTable, ...] | None = None

    def numbers(self) -> dict[str, int]:
        return {"p": int(self.p), "q": int(self.q)}

    def build_tables(self) -> None:
        if self._tables is None:
            pub, bits, m_bits = self.public, self.exponent_bits, self.public.plaintext_bits
            self._tables = (
                FixedBaseTable(pub.h, self.p_square, bits, self.window),
                FixedBaseTable(pub.h, self.q, bits, self.window),
                FixedBaseTable(pub.g, self.p_square, m_bits, 8),
                FixedBaseTable(pub.g, self.q, m_bits, 8),
            )

    def _crt(self, a_p2: mpz, a_q: mpz) -> mpz:
        """x mod n from x mod p^2 and x mod q."""
        return a_q + self.q * ((a_p2 - a_q) * self._q_inv_p2 % self.p_square)

    def randomizers(self, count: int) -> list[mpz]:
        """``count`` fresh h^r mod n, r of ``exponent_bits`` bits (the costly part)."""
        self.build_tables()
        h_p, h_q = self._tables[:2]
        digits = random_exponent_digits(count, self.exponent_bits, self.window)
        return [self._crt(h_p.power(row), h_q.power(row)) for row in digits]

    def encrypt_with(self, plaintexts: list[int], randomizers: list[mpz]) -> list[mpz]:
        """g^m * h^r mod n with a ready h^r. Each randomiser must be fresh from
        ``randomizers`` and used once."""
        if len(randomizers) != len(plaintexts):
            raise ConfigError(f"{len(plaintexts)} plaintexts but {len(randomizers)} randomizers")
        self.build_tables()
        g_p, g_q = self._tables[2:]
        limit = 1 << self.public.plaintext_bits
        n = self.public.n
        out = []
        for m, r in zip(plaintexts, randomizers):
            if not 0 <= m < limit:
                raise ConfigError("plaintext out of range")
            m_digits = [(m >> (8 * i)) & 0xFF for i in range((m.bit_length() + 7) // 8)]
            out.append(self._crt(g_p.power(m_digits), g_q.power(m_digits)) * r % n)
        return out

    def encrypt_many(self, plaintexts: list[int]) -> list[mpz]:
        return self.encrypt_with(plaintexts, self.randomizers(len(plaintexts)))

    def decrypt(self, c: mpz) -> mpz:
        self.public.check_ciphertext(c)
        p = self.p
        return (gmpy2.powmod(c, p - 1, self.p_square) - 1) // p * self._l_g_inv % p

    def decrypt_many(self, ciphertexts: list[mpz]) -> list[mpz]:
        return [self.decrypt(c) for c in ciphertexts]


def generate_ou_keypair(bits: int = 2048, *, insecure_key_bits: bool = False, window: int = 12,
                        randomizer_bits: int | None = None) -> OUPrivateKey:
    if bits < MIN_SECURE_BITS and not insecure_key_bits:
        raise ConfigError(f"key_bits={bits} is below {MIN_SECURE_BITS}; smaller keys need insecure_key_bits=True")
    prime_bits = (bits + 2) // 3
    while True:
        p, q = _random_prime(prime_bits), _random_prime(bits - 2 * prime_bits)
        n = p * p * q
        if p != q and n.bit_length() == bits:
            break
    p2 = p * p
    while True:
        g = mpz(secrets.randbelow(int(n) - 2) + 2)
        if gmpy2.gcd(g, n) == 1 and gmpy2.powmod(g, p - 1, p2) != 1:
            break
    public = OUPublicKey(n, g, gmpy2.powmod(g, n, n))
    return OUPrivateKey(public, p, q, window=window, randomizer_bits=randomizer_bits)
