import gmpy2
import numpy as np
import pytest
from gmpy2 import mpz
from phe import paillier as phe

from teeboost.crypto.fixed_base import FixedBaseTable, random_exponent_digits
from teeboost.crypto.paillier import generate_paillier_keypair
from teeboost.errors import ConfigError, ProtocolError


@pytest.fixture(scope="module")
def key2048():
    return generate_paillier_keypair(2048)


def test_refuses_short_keys_unless_explicitly_insecure():
    with pytest.raises(ConfigError, match="key_bits=1024 is below 2048"):
        generate_paillier_keypair(1024)
    assert generate_paillier_keypair(1024, insecure_key_bits=True).public.bits == 1024


def test_key_shape(key2048):
    assert key2048.public.bits == 2048 and key2048.p != key2048.q
    assert key2048.p.bit_length() == key2048.q.bit_length() == 1024


def test_teeboost_ciphertexts_decrypt_with_phe_and_back(key2048):
    n = int(key2048.public.n)
    public = phe.PaillierPublicKey(n)
    private = phe.PaillierPrivateKey(public, int(key2048.p), int(key2048.q))
    messages = [0, 1, 2**100 + 7, n - 1]
    fast = key2048.encrypt_many(messages)  # DJN/CRT fixed-base path
    assert [private.raw_decrypt(int(c)) for c in fast] == messages
    textbook = [key2048.public.encrypt(m) for m in messages[:2]]
    assert [private.raw_decrypt(int(c)) for c in textbook] == messages[:2]
    theirs = [public.raw_encrypt(m) for m in messages]
    assert [int(key2048.decrypt(mpz(c))) for c in theirs] == messages


def test_fresh_randomness_every_ciphertext(key2048):
    a, b = key2048.encrypt_many([5, 5])
    assert a != b and key2048.decrypt(a) == key2048.decrypt(b) == 5


def test_additive_homomorphism_and_shift(key2048):
    n2 = key2048.public.n_square
    a, b = key2048.encrypt_many([123, 456])
    assert key2048.decrypt(a * b % n2) == 579
    assert key2048.decrypt(gmpy2.powmod(a, 1 << 64, n2)) == 123 << 64
    assert key2048.decrypt(a * gmpy2.invert(b, n2) % n2) == key2048.public.n - 333  # 123 - 456 mod n


def test_out_of_range_ciphertext_is_refused(key2048):
    with pytest.raises(ProtocolError, match="out of range"):
        key2048.decrypt(key2048.public.n_square + 5)


def test_fixed_base_table_matches_powmod():
    modulus = mpz(2**127 - 1)
    table = FixedBaseTable(3, modulus, 100, 7)
    digits = random_exponent_digits(5, 100, 7)
    for row in digits:
        exponent = sum(int(d) << (7 * i) for i, d in enumerate(row))
        assert exponent < 2**100
        assert table.power(row) == gmpy2.powmod(3, exponent, modulus)


def test_random_exponents_use_every_bit():
    digits = random_exponent_digits(2000, 1024, 12)
    exponents = [sum(int(d) << (12 * i) for i, d in enumerate(row)) for row in digits[:50]]
    assert max(e.bit_length() for e in exponents) == 1024
    assert digits.max() < 4096 and np.unique(digits[:, 0]).size > 1000
