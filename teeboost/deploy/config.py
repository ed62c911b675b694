"""``party.toml``: everything one party needs to run on its own host, validated on load.

    [party]    name, role ("active"|"passive"), index (passive), listen (passive), data (a CSV or
               Parquet file, or a SQL source "URL#table=T"; docs/data.md), decimal and thousands
               (how its numbers are written, e.g. decimal = ","),
               id_column, label and weight_column (active), model_dir, checkpoint_dir (default model_dir/checkpoint),
               active_party (passive: the certificate name of the only party it serves; "active")
    [policy]   protocols (default: the TEE protocols only), max_trees, max_depth,
               min_rows_per_node, max_runs_per_day, max_psi_ids_per_day,
               max_prediction_rows_per_day, max_outputs, output_bits,
               max_bits_per_row_per_day (see teeboost/policy.py; a passive party gets
               SAFE_DEFAULTS for what it leaves out)
    [audit]    log (JSON-lines audit log; default audit-<name>.jsonl beside the config)
    [tls]      ca, cert, key   (or insecure = true: plaintext, testing only)
    [[peers]]  name, index, address                       (active)
    [training] protocol, test_size, and any BoostParams field  (active)
    [protocol] any ProtocolOptions field (scheme, key_bits, aes_bits, onetee_bins_once, ...)
    [tee]      platform (simulated platform key file), trusted_roots (hex Ed25519 keys),
               identity (this party's identity key file), identities (every party's identity
               public key in hex, by party index), allow_simulated (accept simulated enclaves)
    [compute]  backend ("local" processes, the default, or "ray"), address ("auto",
               "ray://host:10001", or "local" for a private instance), workers, shard_rows,
               num_cpus, object_store_mb, max_retries (this party's own machines; never sent)
    [network]  timeout, connect_timeout, max_message_mb (largest gRPC message either way, default
               1024; a passive party reads a request's body only from the party it serves),
               retries (resends while a peer is unreachable), recover_timeout (active: how long to
               wait for a lost passive party to come back before resuming from the checkpoints;
               0 = stop at once), max_recoveries

Relative paths are relative to the config file. Errors name the file and the field.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..compute import ComputeOptions
from ..config import PARAM_ALIASES, BoostParams, ProtocolOptions
from ..data_sources import DataSource
from ..number_format import NumberFormat
from ..errors import ConfigError
from ..federation import set_compute
from ..policy import Policy
from teeboost.protocols.env import ProtocolEnv
from ..tee.identity import PartyIdentity
from ..tee.simulated import SimulatedPlatform
from ..transport.grpc_transport import DEFAULT_MAX_MESSAGE_BYTES, Peer
from ..transport.tls import TlsFiles, party_name_ok

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
    compute: ComputeOptions = field(default_factory=ComputeOptions)
    number_format: NumberFormat = field(default_factory=NumberFormat)  # [party] decimal, thousands


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
        return NumberFormat.of(_get(party, "decimal", str, "party", ".", path=path),
                               _get(party, "thousands", str, "party", None, path=path))
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
    party = raw.get("party")
    if not isinstance(party, dict):
        raise ConfigError(f"{path}: needs a [party] table")
    name = _get(party, "name", str, "party", path=path)
    if not party_name_ok(name):
        raise ConfigError(f"{path}: [party] name = {name!r} may use letters, digits, '-', '_' and '.' only")
    role = _get(party, "role", str, "party", path=path)
    if role not in ("active", "passive"):
        raise ConfigError(f"{path}: [party] role = {role!r} must be 'active' or 'passive'")
    config = PartyConfig(
        path=path, name=name, role=role,
        data=_data_source(_get(party, "data", str, "party", path=path), base, path),
        id_column=_get(party, "id_column", str, "party", path=path),
        model_dir=base / _get(party, "model_dir", str, "party", f"model-{name}", path=path),
    )
    config.number_format = _number_format(party, path)
    checkpoint_dir = _get(party, "checkpoint_dir", str, "party", None, path=path)
    config.checkpoint_dir = config.model_dir / "checkpoint" if checkpoint_dir is None else base / checkpoint_dir
    if role == "passive":
        config.index = _get(party, "index", int, "party", path=path)
        if config.index < 1:
            raise ConfigError(f"{path}: [party] index = {config.index} must be >= 1")
        config.listen = _get(party, "listen", str, "party", path=path)
        config.active_party = _get(party, "active_party", str, "party", "active", path=path)
        if not party_name_ok(config.active_party):
            raise ConfigError(f"{path}: [party] active_party = {config.active_party!r} is not a party name")
    else:
        config.label = _get(party, "label", str, "party", path=path)
        config.weight_column = _get(party, "weight_column", str, "party", None, path=path)
    tls = raw.get("tls", {})
    config.insecure = bool(_get(tls, "insecure", bool, "tls", False, path=path))
    if not config.insecure:
        config.tls = TlsFiles(*(base / _get(tls, k, str, "tls", path=path) for k in ("ca", "cert", "key")))
    if role == "active":
        peers = raw.get("peers")
        if not isinstance(peers, list) or not peers:
            raise ConfigError(f"{path}: the active party needs at least one [[peers]] entry")
        for entry in peers:
            config.peers.append(Peer(_get(entry, "index", int, "peers", path=path),
                                     _get(entry, "name", str, "peers", path=path),
                                     _get(entry, "address", str, "peers", path=path)))
        indices = [p.index for p in config.peers]
        if sorted(indices) != list(range(1, len(indices) + 1)):
            raise ConfigError(f"{path}: [[peers]] indices must be 1..{len(indices)}, got {indices}")
        training = dict(raw.get("training", {}))
        config.protocol = _get(training, "protocol", str, "training", "plain", path=path)
        config.test_size = _get(training, "test_size", float, "training", 0.3, path=path)
        known = {f.name for f in fields(BoostParams)} | set(PARAM_ALIASES)
        unknown = set(training) - known - {"protocol", "test_size"}
        if unknown:
            raise ConfigError(f"{path}: [training] has unknown field(s) {', '.join(sorted(unknown))}")
        try:
            config.params = BoostParams.from_user(**{k: v for k, v in training.items() if k in known})
        except (ConfigError, TypeError) as exc:
            raise ConfigError(f"{path}: [training] {exc}") from None
    protocol = dict(raw.get("protocol", {}))
    unknown = set(protocol) - {f.name for f in fields(ProtocolOptions)}
    if unknown:
        raise ConfigError(f"{path}: [protocol] has unknown field(s) {', '.join(sorted(unknown))}")
    try:
        config.options = ProtocolOptions(**protocol)
    except (ConfigError, TypeError) as exc:
        raise ConfigError(f"{path}: [protocol] {exc}") from None
    config.compute = ComputeOptions.from_table(raw.get("compute", {}), f"{path}: [compute]")
    tee = raw.get("tee", {})
    if "platform" in tee:
        config.platform = base / _get(tee, "platform", str, "tee", path=path)
    unknown = set(tee) - {"platform", "trusted_roots", "identity", "identities", "allow_simulated"}
    if unknown:
        raise ConfigError(f"{path}: [tee] has unknown field(s) {', '.join(sorted(unknown))}")
    config.trusted_roots = _hex_keys(tee, "trusted_roots", path)
    config.identities = _hex_keys(tee, "identities", path)
    if "identity" in tee:
        config.identity = base / _get(tee, "identity", str, "tee", path=path)
    if "allow_simulated" in tee:
        allow = _get(tee, "allow_simulated", bool, "tee", path=path)
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
            attestation["collateral"] = str(base / _get(attestation, "collateral", str, "attestation", path=path))
        config.attestation = attestation
    config.policy = Policy.from_table(raw.get("policy"), str(path), role)
    audit = raw.get("audit", {})
    if not isinstance(audit, dict) or set(audit) - {"log"}:
        raise ConfigError(f"{path}: [audit] takes one field, log (the audit log file)")
    config.audit_log = base / _get(audit, "log", str, "audit", f"audit-{name}.jsonl", path=path)
    network = raw.get("network", {})
    config.timeout = _get(network, "timeout", float, "network", 600.0, path=path)
    config.connect_timeout = _get(network, "connect_timeout", float, "network", 30.0, path=path)
    config.max_message_bytes = int(_get(network, "max_message_mb", float, "network",
                                         DEFAULT_MAX_MESSAGE_BYTES / 2**20, path=path) * 2**20)
    config.retries = _get(network, "retries", int, "network", 3, path=path)
    config.recover_timeout = _get(network, "recover_timeout", float, "network", 120.0, path=path)
    config.max_recoveries = _get(network, "max_recoveries", int, "network", 3, path=path)
    for key in ("timeout", "connect_timeout", "max_message_bytes", "retries", "recover_timeout", "max_recoveries"):
        if getattr(config, key) < 0 or (key in ("timeout", "connect_timeout", "max_message_bytes")
                                        and getattr(config, key) == 0):
            raise ConfigError(f"{path}: [network] {key} = {getattr(config, key)!r} is out of range")
    return config
