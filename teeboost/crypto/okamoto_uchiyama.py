"""Okamoto-Uchiyama encryption (EUROCRYPT 1998): the faster scheme behind the same interface.

n = p^2 q with |p| = |q| (2048-bit n: 683/682-bit primes), g in Z_n with g^(p-1) of order p
modulo p^2, h = g^n mod n. ``Enc(m) = g^m h^r mod n`` for m < 2^(|p|-1); ciphertexts multiply
modulo n (not n^2, as in Paillier) to add plaintexts, so they are half the size and additions
about three times cheaper. Decryption: ``m = L(c^(p-1) mod p^2) / L(g^(p-1) mod p^2) mod p``
with L(x) = (x - 1) / p. Security rests on factoring n = p^2 q (no method is known that uses
the square factor at this size; NFS on a 2048-bit n and ECM on a 683-bit p are both out of
reach) and the p-subgroup assumption.

The randomiser h^r uses r uniform of n/2 = 1024 bits, the short-exponent setting of
Damgard-Jurik-Nielsen (IJIS 2010, section 4.1) carried over: <h> has order about 2^1365, so the
exponent is not shortened below the length the crypto notes require. The key holder computes
g^m and h^r modulo p^2 and q separately with fixed-base tables and joins them by the CRT.
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
    def __init__(self, public: OUPublicKey, p: int, q: int, *, window: int = 12) -> None:
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
        self._tables: tuple[FixedBaseTable, ...] | None = None

    @property
    def exponent_bits(self) -> int:
        return self.public.bits // 2

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

    def encrypt_many(self, plaintexts: list[int]) -> list[mpz]:
        self.build_tables()
        h_p, h_q, g_p, g_q = self._tables
        limit = 1 << self.public.plaintext_bits
        digits = random_exponent_digits(len(plaintexts), self.exponent_bits, self.window)
        p2, q = self.p_square, self.q
        out = []
        for m, row in zip(plaintexts, digits):
            if not 0 <= m < limit:
                raise ConfigError("plaintext out of range")
            m_digits = [(m >> (8 * i)) & 0xFF for i in range((m.bit_length() + 7) // 8)]
            gm_p, gm_q = g_p.power(m_digits), g_q.power(m_digits)
            c_p = gm_p * h_p.power(row) % p2
            c_q = gm_q * h_q.power(row) % q
            out.append(self._crt(c_p, c_q))
        return out

    def decrypt(self, c: mpz) -> mpz:
        self.public.check_ciphertext(c)
        p = self.p
        return (gmpy2.powmod(c, p - 1, self.p_square) - 1) // p * self._l_g_inv % p

    def decrypt_many(self, ciphertexts: list[mpz]) -> list[mpz]:
        return [self.decrypt(c) for c in ciphertexts]


def generate_ou_keypair(bits: int = 2048, *, insecure_key_bits: bool = False, window: int = 12) -> OUPrivateKey:
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
    return OUPrivateKey(public, p, q, window=window)
