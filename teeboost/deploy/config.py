"""``party.toml``: everything one party needs to run on its own host, validated on load.

Tables: [party], [tls], [[peers]] (active), [training] (active), [protocol], [tee],
[attestation], [compute], [network], [policy], [serving] (active), [audit]. Every key, its type, default and
meaning is in ``teeboost.deploy.config_schema``, which this parser reads (kinds, defaults, the
keys each table takes) and ``docs/configuration.md`` is generated from.

Relative paths are relative to the config file. Errors name the file and the field; a key in
the wrong table names the table it belongs in.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..compute import ComputeOptions
from ..config import PARAM_ALIASES, BoostParams, ProtocolOptions
from ..core.constraints import parse_monotone
from ..data_sources import DataSource
from ..number_format import NumberFormat
from ..errors import ConfigError
from ..federation import set_compute
from ..policy import Policy
from ..serving.settings import ServingSettings
from teeboost.protocols.env import ProtocolEnv
from ..tee.identity import PartyIdentity
from ..tee.simulated import SimulatedPlatform
from ..transport.grpc_transport import DEFAULT_MAX_MESSAGE_BYTES, Peer
from ..transport.tls import TlsFiles, party_name_ok
from .config_schema import check_keys, key

__all__ = ["PartyConfig", "load_config", "protocol_env"]


@dataclass
class PartyConfig:
    path: Path
    name: str
    role: str
    data: Path | DataSource  # a file, or a SQL source (docs/data.md)
    id_column: str
    model_dir: Path
    checkpoint_dir: Path | None = None
    index: int = 0
    listen: str = ""
    label: str | None = None
    weight_column: str | None = None  # active: a column of per-row sample weights
    tls: TlsFiles | None = None
    insecure: bool = False
    peers: list[Peer] = field(default_factory=list)
    protocol: str = "plain"
    test_size: float = 0.3
    params: BoostParams = field(default_factory=BoostParams)
    options: ProtocolOptions = field(default_factory=ProtocolOptions)
    platform: Path | None = None
    trusted_roots: tuple[bytes, ...] = ()
    identity: Path | None = None
    identities: tuple[bytes, ...] = ()
    attestation: dict | None = None  # [attestation]: hardware quote policy and collateral source
    timeout: float = 600.0
    connect_timeout: float = 30.0
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    retries: int = 3
    recover_timeout: float = 120.0
    max_recoveries: int = 3
    policy: Policy = field(default_factory=Policy)
    audit_log: Path | None = None
    active_party: str = "active"
    monotone: dict[str, int] = field(default_factory=dict)  # passive: [party] monotone_constraints, its own columns
    compute: ComputeOptions = field(default_factory=ComputeOptions)
    number_format: NumberFormat = field(default_factory=NumberFormat)  # [party] decimal, thousands
    serving: ServingSettings = field(default_factory=ServingSettings)  # active: [serving], teeboost serve


def _get(table: dict, key: str, kind, where: str, default: Any = ..., path: Path | None = None):
    if key not in table:
        if default is ...:
            raise ConfigError(f"{path}: [{where}] needs {key!r}")
        return default
    value = table[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"{path}: [{where}] {key} = {value!r} must be {kind.__name__}")
    return value


def _value(raw: dict, table: str, name: str, path: Path, default: Any = ...):
    """``[table] name`` with the kind and default the schema gives it (``default``: one
    computed from other keys)."""
    spec = key(table, name)
    return _get(raw, name, spec.kind, table, spec.default if default is ... else default, path=path)


def _hex_keys(table: dict, key: str, path: Path) -> tuple[bytes, ...]:
    values = table.get(key, [])
    try:
        keys = tuple(bytes.fromhex(v) for v in values)
    except (TypeError, ValueError):
        raise ConfigError(f"{path}: [tee] {key} must be a list of hexadecimal Ed25519 public keys") from None
    bad = [i for i, k in enumerate(keys) if len(k) != 32]
    if bad:
        raise ConfigError(f"{path}: [tee] {key}[{bad[0]}] is not a 32-byte (64 hex digit) Ed25519 public key")
    return keys


def protocol_env(config: PartyConfig) -> ProtocolEnv:
    """What this party's side of a protocol is built from: options, its compute backend, and
    for TEE protocols its simulated platform, its identity key and the pinned identities of
    every party."""
    # never created here: a new platform's key would be in nobody's trusted_roots
    platform = SimulatedPlatform(config.platform) if config.platform else None
    identity = PartyIdentity.load(config.identity) if config.identity else None
    env = ProtocolEnv(config.options, platform, config.trusted_roots, identity, config.identities,
                      hardware_verifier=hardware_verifier(config.attestation) if config.attestation else None)
    set_compute(env, config.compute)  # Ray is reached here, before any peer is contacted
    return env


def hardware_verifier(table: dict):
    """A DCAP verifier from an ``[attestation]`` table (policy + collateral file or PCCS URL)."""
    from ..tee.dcap import DcapPolicy, DcapQuoteVerifier, load_collateral

    policy = DcapPolicy.from_config({k: v for k, v in table.items() if k not in ("collateral", "pccs_url")})
    collateral = load_collateral(table["collateral"]) if "collateral" in table else None
    return DcapQuoteVerifier(policy, collateral, pccs_url=table.get("pccs_url"))


def _data_source(text: str, base: Path, path: Path) -> Path | DataSource:
    """``[party] data``: a file relative to the config, or a SQL source."""
    from ..errors import DataError

    try:
        source = DataSource.parse(text, base)
    except DataError as exc:
        raise ConfigError(f"{path}: [party] data: {exc}") from None
    return source.path if source.is_file else source


def _number_format(party: dict, path: Path) -> NumberFormat:
    """``[party] decimal`` and ``thousands``: how the party's numbers written as text look."""
    try:
        return NumberFormat.of(_value(party, "party", "decimal", path), _value(party, "party", "thousands", path))
    except ConfigError as exc:
        raise ConfigError(f"{path}: [party] {exc}") from None


def load_config(path: str | Path) -> PartyConfig:
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    base = path.parent
    check_keys(raw, path)  # every table and key is one the schema lists; a misplaced key names its table
    party = raw.get("party")
    if not isinstance(party, dict):
        raise ConfigError(f"{path}: needs a [party] table")
    name = _value(party, "party", "name", path)
    if not party_name_ok(name):
        raise ConfigError(f"{path}: [party] name = {name!r} may use letters, digits, '-', '_' and '.' only")
    role = _value(party, "party", "role", path)
    if role not in ("active", "passive"):
        raise ConfigError(f"{path}: [party] role = {role!r} must be 'active' or 'passive'")
    config = PartyConfig(
        path=path, name=name, role=role,
        data=_data_source(_value(party, "party", "data", path), base, path),
        id_column=_value(party, "party", "id_column", path),
        model_dir=base / _value(party, "party", "model_dir", path, default=f"model-{name}"),
    )
    config.number_format = _number_format(party, path)
    checkpoint_dir = _value(party, "party", "checkpoint_dir", path)
    config.checkpoint_dir = config.model_dir / "checkpoint" if checkpoint_dir is None else base / checkpoint_dir
    if role == "passive":
        config.index = _value(party, "party", "index", path)
        if config.index < 1:
            raise ConfigError(f"{path}: [party] index = {config.index} must be >= 1")
        config.listen = _value(party, "party", "listen", path)
        config.active_party = _value(party, "party", "active_party", path)
        if not party_name_ok(config.active_party):
            raise ConfigError(f"{path}: [party] active_party = {config.active_party!r} is not a party name")
        try:
            config.monotone = parse_monotone(party.get("monotone_constraints"), where=f"{path}: [party] "
                                                                                      "monotone_constraints")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    else:
        config.label = _value(party, "party", "label", path)
        config.weight_column = _value(party, "party", "weight_column", path)
    tls = raw.get("tls", {})
    config.insecure = bool(_value(tls, "tls", "insecure", path))
    if not config.insecure:
        config.tls = TlsFiles(*(base / _value(tls, "tls", k, path) for k in ("ca", "cert", "key")))
    if role == "active":
        peers = raw.get("peers")
        if not isinstance(peers, list) or not peers:
            raise ConfigError(f"{path}: the active party needs at least one [[peers]] entry")
        for entry in peers:
            config.peers.append(Peer(_value(entry, "peers", "index", path),
                                     _value(entry, "peers", "name", path),
                                     _value(entry, "peers", "address", path)))
        indices = [p.index for p in config.peers]
        if sorted(indices) != list(range(1, len(indices) + 1)):
            raise ConfigError(f"{path}: [[peers]] indices must be 1..{len(indices)}, got {indices}")
        training = dict(raw.get("training", {}))
        config.protocol = _value(training, "training", "protocol", path)
        config.test_size = _value(training, "training", "test_size", path)
        known = {f.name for f in fields(BoostParams)} | set(PARAM_ALIASES)
        try:
            config.params = BoostParams.from_user(**{k: v for k, v in training.items() if k in known})
        except (ConfigError, TypeError) as exc:
            raise ConfigError(f"{path}: [training] {exc}") from None
    protocol = dict(raw.get("protocol", {}))
    try:
        config.options = ProtocolOptions(**protocol)
    except (ConfigError, TypeError) as exc:
        raise ConfigError(f"{path}: [protocol] {exc}") from None
    config.compute = ComputeOptions.from_table(raw.get("compute", {}), f"{path}: [compute]")
    tee = raw.get("tee", {})
    if "platform" in tee:
        config.platform = base / _value(tee, "tee", "platform", path)
    config.trusted_roots = _hex_keys(tee, "trusted_roots", path)
    config.identities = _hex_keys(tee, "identities", path)
    if "identity" in tee:
        config.identity = base / _value(tee, "tee", "identity", path)
    if "allow_simulated" in tee:
        allow = _value(tee, "tee", "allow_simulated", path)
        config.options = replace(config.options, allow_simulated_tee=allow)
    attestation = raw.get("attestation")
    if attestation is not None:
        if not isinstance(attestation, dict):
            raise ConfigError(f"{path}: [attestation] must be a table")
        if ("collateral" in attestation) == ("pccs_url" in attestation):
            raise ConfigError(f"{path}: [attestation] needs exactly one of collateral (a file) or pccs_url")
        from ..tee.dcap import DcapPolicy

        try:  # the whole policy is checked now, not when a run starts
            DcapPolicy.from_config(attestation)
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        attestation = dict(attestation)
        if "collateral" in attestation:
            attestation["collateral"] = str(base / _value(attestation, "attestation", "collateral", path))
        config.attestation = attestation
    config.policy = Policy.from_table(raw.get("policy"), str(path), role)
    serving = raw.get("serving", {})
    if not isinstance(serving, dict):
        raise ConfigError(f"{path}: [serving] must be a table")
    config.serving = ServingSettings.from_table(serving, path)
    audit = raw.get("audit", {})
    config.audit_log = base / _value(audit, "audit", "log", path, default=f"audit-{name}.jsonl")
    network = raw.get("network", {})
    config.timeout = _value(network, "network", "timeout", path)
    config.connect_timeout = _value(network, "network", "connect_timeout", path)
    config.max_message_bytes = int(_value(network, "network", "max_message_mb", path) * 2**20)
    config.retries = _value(network, "network", "retries", path)
    config.recover_timeout = _value(network, "network", "recover_timeout", path)
    config.max_recoveries = _value(network, "network", "max_recoveries", path)
    for key in ("timeout", "connect_timeout", "max_message_bytes", "retries", "recover_timeout", "max_recoveries"):
        if getattr(config, key) < 0 or (key in ("timeout", "connect_timeout", "max_message_bytes")
                                        and getattr(config, key) == 0):
            raise ConfigError(f"{path}: [network] {key} = {getattr(config, key)!r} is out of range")
    return config
