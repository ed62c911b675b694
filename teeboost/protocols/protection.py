"""What a run report says protected a protocol's messages, and the options that protocol read.

``ProtocolOptions`` carries every protocol's settings, so reporting all of it would credit a
1-TEE run with a Paillier scheme it never used. Each protocol lists its own here.
"""

from __future__ import annotations

from typing import Any

from ..config import ProtocolOptions
from ..crypto.randomizer_length import randomizer_bits

__all__ = ["protection_report"]

_OPTIONS_READ = {
    "plain": (),
    "secureboost": ("scheme", "key_bits", "insecure_key_bits", "pack_gradients", "pack_bins", "crypto_workers",
                    "short_randomizer", "precompute_randomizers", "randomizer_reserve_mb"),
    "ntee": ("aes_bits", "allow_simulated_tee"),
    "onetee": ("aes_bits", "onetee_bins_once", "allow_simulated_tee"),
    "strict": ("aes_bits", "allow_simulated_tee"),
}


def _channel(options: ProtocolOptions) -> str:
    return f"enclaves reached over attested AES-{options.aes_bits}-GCM channels"


def protection_report(protocol: str, options: ProtocolOptions) -> dict[str, Any]:
    """``{"protection": what hid the messages, "options": the settings this protocol read}``."""
    if protocol not in _OPTIONS_READ:
        raise ValueError(f"protocol {protocol!r} has no protection report (known: {', '.join(_OPTIONS_READ)})")
    settings = {name: getattr(options, name) for name in _OPTIONS_READ[protocol]}
    if protocol == "plain":
        protection = "none: gradients and histograms travel in the clear"
    elif protocol == "secureboost":
        bits = randomizer_bits(options.scheme, options.key_bits, options.short_randomizer)
        protection = {"paillier": "Paillier", "ou": "Okamoto-Uchiyama"}[options.scheme] + \
            f" encryption of gradients ({options.key_bits}-bit key, {bits}-bit random exponents)"
    elif protocol == "onetee" and options.onetee_bins_once:
        protection = "passive bins sealed to the active enclave, which sums every histogram; " + _channel(options)
    elif protocol == "onetee":
        protection = "one-time pad in Z_2^64 on gradients; " + _channel(options)
    else:
        protection = _channel(options)
    return {"protection": protection, "options": settings}
