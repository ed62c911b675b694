"""The random exponents actually drawn, and the key holder's Okamoto-Uchiyama shortcut.

Exponents are read back from the digits each key really drew (a spy around
``random_exponent_digits``) and checked against the ciphertexts they produced, so a key that
drew one length and used another would fail."""

import gmpy2
import numpy as np
import pytest
from gmpy2 import mpz

from teeboost.crypto import okamoto_uchiyama, paillier
from teeboost.crypto.okamoto_uchiyama import OUPrivateKey, OUPublicKey
from teeboost.crypto.randomizer_length import check_randomizer_bits, randomizer_bits, security_level
from teeboost.crypto.schemes import generate_keypair
from teeboost.errors import ConfigError


def _spy(monkeypatch, module):
    drawn = []
    real = module.random_exponent_digits

    def recording(count, bits, window):
        digits = real(count, bits, window)
        drawn.append((digits.copy(), window))
        return digits

    monkeypatch.setattr(module, "random_exponent_digits", recording)
    return drawn


def _exponents(drawn) -> list[int]:
    out = []
    for digits, window in drawn:
        for row in digits.tolist():
            out.append(sum(int(d) << (window * i) for i, d in enumerate(row)))
    return out


@pytest.mark.parametrize("scheme, short, bits, expected", [
    ("ou", None, 2048, 224),
    ("ou", False, 2048, 1024),
    ("paillier", None, 2048, 1024),
    ("paillier", True, 2048, 224),
    ("ou", None, 3072, 256),
])
def test_the_exponents_drawn_have_the_promised_length_and_are_the_ones_used(monkeypatch, scheme, short, bits,
                                                                            expected):
    key = generate_keypair(scheme, bits, short_randomizer=short)
    assert key.exponent_bits == expected == randomizer_bits(scheme, bits, short)
    module = okamoto_uchiyama if scheme == "ou" else paillier
    drawn = _spy(monkeypatch, module)
    plaintexts = [int(m) for m in np.random.default_rng(0).integers(0, 2**40, 300)]
    ciphertexts = key.encrypt_many(plaintexts)
    exponents = _exponents(drawn)
    assert len(exponents) == len(plaintexts)
    lengths = [x.bit_length() for x in exponents]
    assert max(lengths) == expected  # 300 draws: the top bit is set in one of them but for 2**-300
    assert min(lengths) > expected - 20  # uniform, not small
    assert len(set(exponents)) == len(exponents)
    public = key.public
    for m, x, c in list(zip(plaintexts, exponents, ciphertexts))[:20]:
        if scheme == "paillier":  # (1 + m n) h_s^x mod n^2, all public values
            n2 = public.n_square
            assert c == (1 + m * public.n) * gmpy2.powmod(public.h_s, x, n2) % n2
        else:  # textbook g^m h^x mod n
            n = public.n
            assert c == gmpy2.powmod(public.g, m, n) * gmpy2.powmod(public.h, x, n) % n
        assert key.decrypt(c) == m


def test_security_levels_and_the_floor():
    assert [security_level(b) for b in (2048, 3072, 4096, 7680, 15360)] == [112, 128, 128, 192, 256]
    assert randomizer_bits("ou", 2048) == 224 and randomizer_bits("ou", 3072) == 256
    assert randomizer_bits("paillier", 2048) == 1024 and randomizer_bits("paillier", 2048, True) == 224
    with pytest.raises(ConfigError, match="224 to 1024 bits"):
        check_randomizer_bits(110, 2048)  # HEU's length is refused
    with pytest.raises(ConfigError, match="224 to 1024 bits"):
        check_randomizer_bits(1025, 2048)
    key = generate_keypair("ou", 2048)
    with pytest.raises(ConfigError, match="not 110"):
        OUPrivateKey(key.public, key.p, key.q, randomizer_bits=110)


def _toy_key(p: int, q: int) -> OUPrivateKey:
    p, q = mpz(p), mpz(q)
    n = p * p * q
    g = next(mpz(x) for x in range(2, 1000) if gmpy2.gcd(x, n) == 1 and gmpy2.powmod(x, p - 1, p * p) != 1)
    return OUPrivateKey(OUPublicKey(n, g, gmpy2.powmod(g, n, n)), p, q)


def _subgroup(base: mpz, modulus: mpz) -> set[int]:
    out, x = {1}, base % modulus
    while x != 1:
        out.add(int(x))
        x = x * base % modulus
    return out


def test_key_holder_ciphertexts_are_textbook_encryptions(monkeypatch):
    """With toy primes, <h> is small enough to list: every key-holder ciphertext c of m has
    c / g^m in <h>, and c^n is never (h^n)^r for its own short r. That relation holds for the
    one-multiplication shortcut (1 + m K) h^r, where one short discrete logarithm of c^n would
    give r, then m K, and gcd(m K, n) would factor n; so the shortcut must never come back."""
    key = _toy_key(251, 241)
    n, g, h = key.public.n, key.public.g, key.public.h
    powers_of_h = _subgroup(h, n)
    assert len(powers_of_h) > 100
    drawn = _spy(monkeypatch, okamoto_uchiyama)
    plaintexts = list(range(1, 1 << key.public.plaintext_bits)) * 3
    ciphertexts = key.encrypt_many(plaintexts)
    exponents = _exponents(drawn)
    h_n = gmpy2.powmod(h, n, n)
    for m, r, c in zip(plaintexts, exponents, ciphertexts):
        assert key.decrypt(c) == m
        assert int(c * gmpy2.invert(gmpy2.powmod(g, m, n), n) % n) in powers_of_h
        assert gmpy2.powmod(c, n, n) != gmpy2.powmod(h_n, r, n)
