"""Additively homomorphic schemes by name: key generation and keys rebuilt from numbers."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .okamoto_uchiyama import OUPrivateKey, OUPublicKey, generate_ou_keypair
from .paillier import PaillierPrivateKey, PaillierPublicKey, generate_paillier_keypair
from .randomizer_length import randomizer_bits

__all__ = ["SCHEMES", "generate_keypair", "public_from_numbers", "private_from_numbers"]

SCHEMES = {
    "paillier": (PaillierPublicKey, PaillierPrivateKey, generate_paillier_keypair),
    "ou": (OUPublicKey, OUPrivateKey, generate_ou_keypair),
}


def _entry(scheme: str):
    try:
        return SCHEMES[scheme]
    except KeyError:
        raise ConfigError(f"scheme={scheme!r} must be one of {', '.join(SCHEMES)}") from None


def generate_keypair(scheme: str, bits: int, *, insecure_key_bits: bool = False,
                     short_randomizer: bool | None = None) -> Any:
    """A fresh private key; ``short_randomizer`` None keeps the scheme's default exponent length."""
    return _entry(scheme)[2](bits, insecure_key_bits=insecure_key_bits,
                             randomizer_bits=randomizer_bits(scheme, bits, short_randomizer))


def public_from_numbers(scheme: str, numbers: dict[str, int]) -> Any:
    return _entry(scheme)[0].from_numbers(numbers)


def private_from_numbers(scheme: str, public_numbers: dict[str, int], private_numbers: dict[str, int],
                         window: int = 12, exponent_bits: int | None = None) -> Any:
    public = public_from_numbers(scheme, public_numbers)
    return _entry(scheme)[1](public, private_numbers["p"], private_numbers["q"], window=window,
                             randomizer_bits=exponent_bits)
