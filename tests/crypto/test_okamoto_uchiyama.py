import gmpy2
import pytest

from teeboost.crypto.okamoto_uchiyama import generate_ou_keypair
from teeboost.errors import ConfigError


@pytest.fixture(scope="module")
def key():
    return generate_ou_keypair(2048)


def test_key_shape(key):
    assert key.public.bits == 2048
    assert key.p * key.p * key.q == key.public.n
    assert key.public.plaintext_bits < key.p.bit_length()


def test_roundtrip_homomorphism_and_public_encryption(key):
    n = key.public.n
    limit = (1 << key.public.plaintext_bits) - 1
    a, b, c = key.encrypt_many([0, 2**90 + 3, limit])
    assert [int(key.decrypt(x)) for x in (a, b, c)] == [0, 2**90 + 3, limit]
    assert key.decrypt(a * b % n) == 2**90 + 3
    assert key.decrypt(gmpy2.powmod(b, 1 << 100, n)) == (2**90 + 3) << 100
    assert key.decrypt(key.public.encrypt(77)) == 77


def test_plaintext_range_is_enforced(key):
    with pytest.raises(ConfigError, match="out of range"):
        key.encrypt_many([1 << key.public.plaintext_bits])


def test_short_keys_need_the_insecure_flag():
    with pytest.raises(ConfigError, match="below 2048"):
        generate_ou_keypair(1024)
