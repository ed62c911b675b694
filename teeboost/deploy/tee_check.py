"""Before any enclave starts, the parties of a deployed run compare their public ``[tee]``
set-ups and name what does not fit, with the fix.

The enclaves' own checks stay authoritative and deliberately opaque: a refused quote says
only "remote attestation failed", so a host probing its peer learns nothing about which
check failed (docs/enclaves.md). In a new federation, though, almost every refusal is a
configuration mistake: a party without ``[tee]``, a platform key missing from
``trusted_roots``, an identity key that is not the one the others pinned, another teeboost
version. All of that is public, so each party first checks its own set-up, then the active
party and every passive party swap a ``TeeProfile`` (public keys, the settings the enclave
measurement covers, the measurement itself) and each side names any mismatch. A host that
lies here gains nothing: the enclaves check everything again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import __version__
from ..errors import AttestationError, ConfigError, ProtocolError
from teeboost.protocols.ntee import hosts as ntee
from teeboost.protocols.onetee import hosts as onetee
from teeboost.protocols.strict import hosts as strict
from teeboost.protocols.env import ProtocolEnv, enclave_code
from teeboost.protocols.registry import PROTOCOLS
from .messages import TeeProfile

__all__ = ["uses_enclaves", "check_own_tee", "own_profile", "compare_profiles", "check_peers",
           "explain_attestation_failure", "SETUP_STEPS"]

_PROGRAMS = {"ntee": ntee.PROGRAM, "onetee": onetee.PROGRAM, "strict": strict.PROGRAM}

SETUP_STEPS = ("on every party's host run `teeboost tee platform --out platform.key` (prints its platform key) "
               "and `teeboost tee identity --out identity.key` (prints its identity key), then give every "
               "party's config a [tee] section with platform = \"platform.key\", identity = \"identity.key\", "
               "allow_simulated = true, trusted_roots = [every party's platform key] and identities = [every "
               "party's identity key, by party index: 0 the active party, then passive 1, 2, ...] "
               "(README, \"Across hosts\")")


def uses_enclaves(protocol: str) -> bool:
    spec = PROTOCOLS.get(protocol)
    return spec is not None and spec.uses_enclaves


def _runs_enclave(protocol: str, index: int) -> bool:
    """1-TEE has one enclave, the active party's; N-TEE and strict one per party."""
    return protocol != "onetee" or index == 0


def _signs_handshakes(protocol: str, index: int) -> bool:
    """In 1-TEE only the passive parties sign (the active enclave is the responder)."""
    return protocol != "onetee" or index != 0


def _hardware(env: ProtocolEnv, protocol: str, index: int) -> bool:
    """A 1-TEE passive party with [attestation] checks the active enclave with DCAP, not with
    trusted_roots and the simulated backend."""
    return env.hardware_verifier is not None and protocol == "onetee" and index != 0


def check_own_tee(env: ProtocolEnv, *, party: str, config: Path, index: int, protocol: str,
                  n_parties: int | None = None) -> None:
    """This party's own [tee] set-up for ``protocol`` (``index`` 0: the active party): what is
    missing or inconsistent, and how to fix it. ``n_parties``: the federation's size, when
    this party knows it (the active party)."""
    where = f"party {party!r} ({config})"
    if env.platform is None and env.identity is None and not env.trusted_roots and not env.party_keys \
            and env.hardware_verifier is None:
        raise ConfigError(f"{where} has no [tee] section, and protocol {protocol!r} runs on enclaves: {SETUP_STEPS}")
    hardware = _hardware(env, protocol, index)
    needs = []
    if _runs_enclave(protocol, index) and env.platform is None:
        needs.append('platform = "platform.key" (create it with `teeboost tee platform --out platform.key`)')
    if _signs_handshakes(protocol, index) and env.identity is None:
        needs.append('identity = "identity.key" (create it with `teeboost tee identity --out identity.key`)')
    if not env.party_keys:
        needs.append("identities = [every party's identity key, by party index: 0 the active party, then passive "
                     "1, 2, ...]")
    if not hardware and not env.trusted_roots:
        needs.append("trusted_roots = [every party's platform key]")
    if not hardware and not env.options.allow_simulated_tee:
        needs.append("allow_simulated = true (or --allow-simulated-tee: accept the simulated enclave backend, "
                     "which gives no hardware isolation)")
    if needs:
        raise ConfigError(f"{where}: protocol {protocol!r} needs in [tee]: " + "; ".join(needs))
    if _runs_enclave(protocol, index) and env.platform.attestation_root not in env.trusted_roots:
        raise ConfigError(f"{where}: [tee] trusted_roots lacks this party's own platform key "
                          f"{env.platform.attestation_root.hex()} (of {env.platform.path}): add it, here and in "
                          "every other party's trusted_roots")
    if n_parties is not None and len(env.party_keys) != n_parties:
        raise ConfigError(f"{where}: [tee] identities lists {len(env.party_keys)} key(s), but the federation has "
                          f"{n_parties} parties: list every party's identity key, by party index (0 this party, "
                          "then each [[peers]] index)")
    if index >= len(env.party_keys):
        raise ConfigError(f"{where}: [tee] identities lists {len(env.party_keys)} key(s) and has none for this "
                          f"party's index {index}: list every party's identity key, by party index (0 the active "
                          "party, then passive 1, 2, ...)")
    if env.identity is not None and env.party_keys[index] != env.identity.public_key:
        raise ConfigError(f"{where}: [tee] identities[{index}] is {env.party_keys[index].hex()}, but this party's "
                          f"identity key has public key {env.identity.public_key.hex()} (`teeboost tee public-key "
                          f"identity.key` prints it): put that in identities[{index}], here and at every other party")


def own_profile(env: ProtocolEnv, *, party: str, index: int, protocol: str) -> TeeProfile:
    """What this party tells its peers about its set-up (all of it public)."""
    hardware = _hardware(env, protocol, index)
    measurement = b"" if hardware else enclave_code(_PROGRAMS[protocol], env.trusted_roots, env.options).measurement
    root = env.platform.attestation_root if _runs_enclave(protocol, index) and env.platform is not None else b""
    identity = env.identity.public_key if env.identity is not None else b""
    return TeeProfile(party, index, protocol, __version__, root, identity, measurement,
                      bool(env.options.allow_simulated_tee), int(env.options.aes_bits), hardware,
                      _key_rows(env.trusted_roots), _key_rows(env.party_keys))


def _key_rows(keys: tuple[bytes, ...]) -> np.ndarray:
    return np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), 32)


def _keys(array: np.ndarray, what: str) -> list[bytes]:
    if array.ndim != 2 or (array.size and array.shape[1] != 32) or array.shape[0] > 1024:
        raise ProtocolError(f"{what} must be a list of 32-byte keys")
    return [bytes(row) for row in array]


def _roots(profile: TeeProfile) -> set[bytes]:
    return set(_keys(profile.trusted_roots, "trusted_roots"))


def _checked(profile: TeeProfile) -> TeeProfile:
    """A peer's profile is network input: bounded names, key sizes, nothing else trusted."""
    if len(profile.party) > 80 or len(profile.version) > 40 or not 0 <= profile.index < 1024:
        raise ProtocolError("the peer's [tee] profile has an over-long name or version, or an index out of range")
    for name in ("platform_root", "identity", "measurement"):
        if len(getattr(profile, name)) not in (0, 32):
            raise ProtocolError(f"the peer's [tee] profile field {name} must be empty or 32 bytes")
    _keys(profile.trusted_roots, "trusted_roots")
    _keys(profile.identities, "identities")
    return profile


def compare_profiles(mine: TeeProfile, theirs: TeeProfile) -> None:
    """``ConfigError`` naming every mismatch between two parties' set-ups, and who fixes it."""
    theirs = _checked(theirs)
    if theirs.protocol != mine.protocol:
        raise ProtocolError(f"party {theirs.party!r} described its [tee] set-up for protocol {theirs.protocol!r}, "
                            f"not {mine.protocol!r}")
    found = []
    ids_a, ids_b = _keys(mine.identities, "identities"), _keys(theirs.identities, "identities")
    if len(ids_a) != len(ids_b):
        found.append(f"party {mine.party!r} lists {len(ids_a)} key(s) in [tee] identities and party "
                     f"{theirs.party!r} {len(ids_b)}: every party lists all parties' identity keys, by party index "
                     "(0 the active party, then passive 1, 2, ...)")
    else:
        for k, (a, b) in enumerate(zip(ids_a, ids_b)):
            if a == b:
                continue
            owner, other = (mine, theirs) if mine.index == k else (theirs, mine) if theirs.index == k else (None, None)
            if owner is not None and owner.identity:
                found.append(f"[tee] identities[{k}] of party {other.party!r} is {(b if other is theirs else a).hex()}, "
                             f"but party {owner.party!r} (index {k}) has identity key {owner.identity.hex()}: put "
                             f"that in identities[{k}] of party {other.party!r} (party {owner.party!r} prints it with "
                             "`teeboost tee public-key identity.key`)")
            else:
                found.append(f"[tee] identities[{k}] is {a.hex()} at party {mine.party!r} but {b.hex()} at party "
                             f"{theirs.party!r}: both must list the key party {k} prints with `teeboost tee "
                             "public-key identity.key`")
    if not (mine.hardware or theirs.hardware):
        found += _platform_findings(mine, theirs)
    if mine.aes_bits != theirs.aes_bits:
        found.append(f"party {mine.party!r} uses [protocol] aes_bits = {mine.aes_bits} and party {theirs.party!r} "
                     f"{theirs.aes_bits}: set the same at every party")
    if not found and mine.measurement and theirs.measurement and mine.measurement != theirs.measurement:
        found.append(f"their enclave code differs: party {mine.party!r} runs teeboost {mine.version} (measurement "
                     f"{mine.measurement.hex()[:16]}...), party {theirs.party!r} teeboost {theirs.version} "
                     f"({theirs.measurement.hex()[:16]}...): install the same teeboost version, unmodified, at "
                     "every party")
    if found:
        raise ConfigError(f"party {mine.party!r} and party {theirs.party!r} cannot attest each other's enclaves for "
                          f"protocol {mine.protocol!r}: " + "; ".join(found))


def _platform_findings(mine: TeeProfile, theirs: TeeProfile) -> list[str]:
    """Each enclave's quotes must come from a platform the other party trusts, and the enclave
    measurement covers trusted_roots and allow_simulated, so those must be the same everywhere."""
    found = []
    for signer, verifier in ((theirs, mine), (mine, theirs)):
        if signer.platform_root and signer.platform_root not in _roots(verifier):
            found.append(f"the quotes of the enclave of party {signer.party!r} are signed by platform "
                         f"{signer.platform_root.hex()}, which is not in [tee] trusted_roots of party "
                         f"{verifier.party!r}: add it there (party {signer.party!r} prints it with "
                         "`teeboost tee public-key platform.key`)")
    if not found and _roots(mine) != _roots(theirs):
        only_mine = sorted(k.hex() for k in _roots(mine) - _roots(theirs))
        only_theirs = sorted(k.hex() for k in _roots(theirs) - _roots(mine))
        detail = "; ".join(f"only party {p.party!r} lists {', '.join(keys)}"
                           for p, keys in ((mine, only_mine), (theirs, only_theirs)) if keys)
        found.append(f"every party must list the same [tee] trusted_roots (the enclave code's measurement covers "
                     f"them): {detail}")
    if mine.allow_simulated != theirs.allow_simulated:
        yes, no = (mine, theirs) if mine.allow_simulated else (theirs, mine)
        found.append(f"party {yes.party!r} sets [tee] allow_simulated = true and party {no.party!r} does not: the "
                     "enclave code's measurement covers it, so set it the same at every party")
    return found


def check_peers(channel, env: ProtocolEnv, *, party: str, protocol: str) -> None:
    """The active party's side: swap profiles with every passive party. A mismatch a passive
    party sees comes back as its refusal; one this party sees is raised here."""
    mine = own_profile(env, party=party, index=0, protocol=protocol)
    for index, reply in sorted(channel.request_all({p: mine for p in channel.parties}).items()):
        if not isinstance(reply, TeeProfile) or reply.index != index:
            raise ProtocolError(f"passive party {index} did not answer the [tee] comparison with its own profile")
        compare_profiles(mine, reply)


def explain_attestation_failure(exc: Exception) -> Exception | None:
    """An opaque attestation refusal after the profiles matched, with what is left to check
    (None for any other error)."""
    local = isinstance(exc, AttestationError)
    if not (local or "AttestationError:" in str(exc)):  # remote: "passive party k refused ...: AttestationError: ..."
        return None
    return (AttestationError if local else ProtocolError)(f"{exc}. The parties' [tee] set-ups were compared before the enclaves started and fit, so "
                     "a quote or handshake failed for another reason: an enclave's code or platform file was "
                     "changed on its host after start-up, or a message was altered on the way. Check that every "
                     f"party runs unmodified teeboost {__version__} with the platform file its key in trusted_roots "
                     "came from, then retry")
