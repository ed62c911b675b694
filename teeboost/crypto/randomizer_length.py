"""How many bits the random exponent of a fixed-base randomiser needs, and why.

Both schemes randomise a ciphertext with a power of a public base: h_s^x (Paillier, DJN form)
or h^r (Okamoto-Uchiyama). The cost of that power grows with the bits of the exponent. The
best known attack on a short exponent is generic: Pollard's kangaroo (lambda) method, or
baby-step giant-step, finds an exponent known to lie below 2^t in about 2^(t/2) group
operations (van Oorschot and Wiener, "On Diffie-Hellman key agreement with short exponents",
EUROCRYPT 1996). It lets anyone holding the public key test a guessed plaintext m' against a
ciphertext c: divide out the guessed plaintext's factor and search for a short exponent.
The Pohlig-Hellman speed-up of that paper needs the factorisation of the base's order,
which is hidden here because it needs the factorisation of n.

So an exponent of 2 * lambda bits, lambda being the modulus's security level, keeps that test
at 2^lambda operations, as hard as factoring n. Security levels are those of NIST SP 800-57
Part 1 Rev. 5, Table 2 (integer factorisation). Indistinguishability of short-exponent powers
from full ones is the short-exponent assumption (Koshiba and Kurosawa, "Short exponent
Diffie-Hellman problems", PKC 2004), the one Damgard, Jurik and Nielsen use for h_s^x.

HEU's Okamoto-Uchiyama draws 110-bit exponents at 2048-bit keys: the kangaroo test then costs
about 2^55 operations per ciphertext, far below the key's 112 bits, which is why we do not.
"""

from __future__ import annotations

from ..errors import ConfigError

__all__ = ["security_level", "short_randomizer_bits", "full_randomizer_bits", "randomizer_bits",
           "check_randomizer_bits"]

#: (smallest modulus bits, security level in bits), NIST SP 800-57 Part 1 Rev. 5, Table 2.
_LEVELS = ((15360, 256), (7680, 192), (3072, 128), (2048, 112), (1024, 80))


def security_level(modulus_bits: int) -> int:
    """Bits of security of factoring a ``modulus_bits`` modulus (the level of the largest
    NIST size it reaches). Moduli below 1024 bits, accepted only for tests, count as 80."""
    for smallest, level in _LEVELS:
        if modulus_bits >= smallest:
            return level
    return 80


def short_randomizer_bits(modulus_bits: int) -> int:
    """2 * lambda: 224 at 2048 bits, 256 at 3072 (never above the full length)."""
    return min(2 * security_level(modulus_bits), full_randomizer_bits(modulus_bits))


def full_randomizer_bits(modulus_bits: int) -> int:
    """n/2 bits, as in Damgard-Jurik-Nielsen (IJIS 2010, section 4.1)."""
    return modulus_bits // 2


#: Each scheme's default: Okamoto-Uchiyama short, Paillier the DJN length.
_SHORT_BY_DEFAULT = {"paillier": False, "ou": True}


def randomizer_bits(scheme: str, modulus_bits: int, short: bool | None = None) -> int:
    """Exponent length for ``scheme``: ``short`` None takes the scheme's default."""
    if scheme not in _SHORT_BY_DEFAULT:
        raise ConfigError(f"scheme={scheme!r} must be one of {', '.join(_SHORT_BY_DEFAULT)}")
    if short is None:
        short = _SHORT_BY_DEFAULT[scheme]
    return short_randomizer_bits(modulus_bits) if short else full_randomizer_bits(modulus_bits)


def check_randomizer_bits(bits: int, modulus_bits: int) -> int:
    """``bits`` if it lies between 2 * lambda and n/2; nothing shorter is ever drawn."""
    low, high = short_randomizer_bits(modulus_bits), full_randomizer_bits(modulus_bits)
    if not low <= bits <= high:
        raise ConfigError(f"a {modulus_bits}-bit key needs a randomizer exponent of {low} to {high} bits "
                          f"(2 x its {security_level(modulus_bits)}-bit security level up to n/2), not {bits}")
    return bits
