"""Every table and key of a party's ``party.toml``: type, default and meaning, in one place.

The parser (``teeboost.deploy.config``) takes each key's kind and default from here and refuses
any key this schema does not list, naming the table a misplaced key belongs in; the reference
``docs/configuration.md`` is written from it (``python -m teeboost.deploy.config_reference``),
so the two cannot drift. Tables read by a settings class (``[training]``, ``[protocol]``,
``[compute]``, ``[policy]``) list that class's fields, defaults read from the class itself.
"""

from __future__ import annotations

import difflib
from dataclasses import MISSING, dataclass, fields
from typing import Any

from ..compute import ComputeOptions
from ..config import PARAM_ALIASES, BoostParams, ProtocolOptions
from ..errors import ConfigError
from ..policy import SAFE_DEFAULTS, TEE_PROTOCOLS, Policy
from ..transport.grpc_transport import DEFAULT_MAX_MESSAGE_BYTES

__all__ = ["Key", "Table", "TABLES", "key", "check_keys"]

REQUIRED = ...  # a key without a default


@dataclass(frozen=True)
class Key:
    name: str
    type: str  # as the reference shows it ("string", "integer", "list of strings", ...)
    doc: str
    default: Any = REQUIRED
    kind: type | None = None  # what the parser checks (str, int, float, bool); None: checked by its reader
    role: str | None = None  # "active" or "passive": read for that role only
    default_text: str | None = None  # a default computed from other keys, in words

    def shown_default(self) -> str:
        if self.default_text is not None:
            return self.default_text
        if self.default is REQUIRED:
            return "required"
        return "unset" if self.default is None else f"`{_toml(self.default)}`"


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    keys: tuple[Key, ...]
    role: str | None = None
    array: bool = False  # [[name]]: a list of tables
    aliases: tuple[str, ...] = ()  # further accepted names (XGBoost's, in [training])

    def names(self) -> set[str]:
        return {k.name for k in self.keys} | set(self.aliases)


def _toml(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def _from_class(cls, docs: dict[str, tuple[str, str]], *, kinds: bool = False, skip: tuple[str, ...] = ()) \
        -> tuple[Key, ...]:
    """One key per field of ``cls``, its default from the class; a field without a meaning in
    ``docs`` is an error here, so a new setting cannot go undocumented."""
    out = []
    for f in fields(cls):
        if f.name in skip:
            continue
        if f.name not in docs:
            raise ConfigError(f"teeboost.deploy.config_schema: {cls.__name__}.{f.name} has no entry in the schema")
        kind, doc = docs[f.name]
        default = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
        out.append(Key(f.name, kind, doc, default))
    return tuple(out)


_TRAINING_DOCS = {
    "objective": ("string", "binary, multiclass, regression, poisson, tweedie, gamma or pseudohuber (or XGBoost's "
                            "names: reg:tweedie, reg:gamma, reg:pseudohubererror, ...); unset: inferred from the label"),
    "n_trees": ("integer", "boosting rounds (XGBoost: n_estimators)"),
    "max_depth": ("integer", "depth of each tree"),
    "learning_rate": ("number", "shrinkage of every tree's leaf weights (XGBoost: eta)"),
    "subsample": ("number", "fraction of rows each tree is grown on"),
    "reg_lambda": ("number", "L2 regularisation of leaf weights (XGBoost: lambda)"),
    "min_child_weight": ("number", "least hessian sum of a child"),
    "min_split_gain": ("number", "least gain of a split (XGBoost: gamma, min_split_loss)"),
    "min_samples_leaf": ("integer", "least rows of a child; a passive party's policy may require more "
                                    "([policy] min_rows_per_node)"),
    "max_bin": ("integer", "bins per feature (at most 65,535)"),
    "random_state": ("integer", "seed of row sampling, column sampling and the train/test split"),
    "early_stopping_rounds": ("integer", "stop when the watched validation metric has not improved for this many "
                                         "rounds; unset: no early stopping"),
    "category_subsets": ("boolean", "categorical splits into gradient-sorted category subsets (false: the first k "
                                    "categories in code order vs the rest)"),
    "reg_alpha": ("number", "L1 regularisation of leaf weights (XGBoost: alpha)"),
    "max_delta_step": ("number", "cap on a leaf weight's magnitude (0: none); unset: 0.7 for poisson, else 0"),
    "colsample_bytree": ("number", "fraction of each party's columns a tree may split on (a passive party must "
                                   "allow it: [policy] column_sampling)"),
    "scale_pos_weight": ("number", "weight of positive rows (binary; a passive party must allow it: [policy] "
                                   "sample_weights)"),
    "eval_metric": ("string or list of strings", "held-out metrics by XGBoost's names; early stopping watches the "
                                                 "last; unset: the objective's default"),
    "positive_class": ("string or number", "binary: which label value is class 1 (predictions give its "
                                           "probability); unset: the larger of the two"),
    "tweedie_variance_power": ("number", "objective tweedie's variance power, in [1, 2) (XGBoost's default 1.5)"),
    "huber_slope": ("number", "objective pseudohuber's (and the mphe metric's) slope, > 0"),
    "monotone_constraints": ("table", "column = 1 (the score may only rise with it) or -1 (only fall), for any "
                                      "party's columns by name; each party resolves its own (docs/constraints.md)"),
    "interaction_constraints": ("list of lists of strings", "sets of column names allowed to interact along a "
                                                           "tree's paths, any party's (docs/constraints.md)"),
}

_PROTOCOL_DOCS = {
    "scheme": ("string", 'SecureBoost\'s additively homomorphic scheme: "paillier" or "ou" (Okamoto-Uchiyama, '
                         "faster); every party of a run must set the same (docs/scaling.md)"),
    "key_bits": ("integer", "modulus bits of the homomorphic key (even, 2048 or more)"),
    "insecure_key_bits": ("boolean", "allow key_bits below 2048 (tests only)"),
    "pack_gradients": ("boolean", "a row's gradient and hessian in one plaintext"),
    "pack_bins": ("boolean", "several bin sums per plaintext before decryption"),
    "crypto_workers": ("integer", "processes for big-integer work; unset: one per core"),
    "short_randomizer": ("boolean", "random exponents of twice the key's security level (true) or n/2 (false); "
                                    "unset: the scheme's default (docs/secureboost.md)"),
    "precompute_randomizers": ("boolean", "compute the next tree's randomisers while passive parties work"),
    "randomizer_reserve_mb": ("integer", "memory bound of randomisers computed ahead (MB)"),
    "aes_bits": ("integer", "AES-GCM key size of attested enclave channels: 128 or 256"),
    "onetee_bins_once": ("boolean", "1-TEE: each passive party seals its bins to the enclave once (false: masked "
                                    "sums with index sets per node; docs/tee-protocols.md)"),
    "allow_simulated_tee": ("boolean", "accept simulated enclaves and quotes (no hardware protection); "
                                       "[tee] allow_simulated sets it too"),
}

_COMPUTE_DOCS = {
    "backend": ("string", '"local" (processes on this machine) or "ray" (docs/scaling.md)'),
    "address": ("string", 'Ray: "auto" (the cluster of this machine), "ray://host:10001" (Ray Client), '
                          '"host:6379" (the GCS) or "local" (a private instance)'),
    "workers": ("integer", "task processes; unset: one per CPU of the machine or cluster"),
    "shard_rows": ("integer", "rows per object-store shard"),
    "num_cpus": ("integer", 'CPUs of a private Ray instance (address "local" only)'),
    "object_store_mb": ("integer", 'object store of a private Ray instance (address "local" only); unset: '
                                   "Ray's default"),
    "max_retries": ("integer", "reruns of a task whose Ray worker died"),
}

_POLICY_DOCS = {
    "protocols": ("list of strings", "protocols this party takes part in; plain and secureboost reveal "
                                     "aggregates and must be opted into (docs/hardening.md)"),
    "max_trees": ("integer or \"none\"", "trees of one run, every output counted"),
    "max_depth": ("integer or \"none\"", "depth of a tree"),
    "min_rows_per_node": ("integer", "k: least rows on either side of every partition this party reveals"),
    "max_runs_per_day": ("integer or \"none\"", "training runs set up in any 24 hours"),
    "max_psi_ids_per_day": ("integer or \"none\"", "ids the active party submits to alignment in any 24 hours"),
    "max_prediction_rows_per_day": ("integer or \"none\"", "rows scored in any 24 hours"),
    "column_sampling": ("boolean", "allow colsample_bytree < 1 (lets the active party aim a tree at one column)"),
    "interaction_constraints": ("boolean", "allow N-TEE and 1-TEE runs with interaction constraints (their active "
                                           "host names each node's interaction state; docs/constraints.md)"),
    "monotone_constraints": ("boolean", "allow N-TEE and 1-TEE runs with monotone constraints (crafted gradients "
                                        "then ask about rows on every constrained column at once; docs/constraints.md)"),
    "sample_weights": ("boolean", "allow weighted rows (weights of 0 defeat min_rows_per_node)"),
    "max_outputs": ("integer or \"none\"", "outputs per model (classes of a multiclass model)"),
    "output_bits": ("integer or \"none\"", "strict: bits each released output is quantized to (at most 52)"),
    "max_bits_per_row_per_day": ("integer or \"none\"", "bits about one of this party's rows that may leave in "
                                                        "any 24 hours"),
    "max_passive_features": ("integer or \"none\"", "active: columns one passive party may bring to a run"),
}


def _policy_keys() -> tuple[Key, ...]:
    """A passive party gets SAFE_DEFAULTS for what it leaves out, an active party no limits."""
    out = []
    for k in _from_class(Policy, _POLICY_DOCS):
        if k.name == "protocols":
            k = Key(k.name, k.type, k.doc, list(TEE_PROTOCOLS))
        elif k.name in SAFE_DEFAULTS:
            k = Key(k.name, k.type, k.doc, k.default,
                    default_text=f"passive: `{SAFE_DEFAULTS[k.name]}`; active: {_toml(k.default)}")
        out.append(k)
    return tuple(out)


TABLES: tuple[Table, ...] = (
    Table("party", "Who this party is and where its data lives.", (
        Key("name", "string", "this party's name; its certificate's name (letters, digits, '-', '_', '.')", kind=str),
        Key("role", "string", '"active" (holds the labels, drives the run) or "passive"', kind=str),
        Key("data", "path", "this party's data: a CSV or Parquet file, or a SQL source `URL#table=T` / "
            "`URL#query=SELECT ...` (docs/data.md)", kind=str),
        Key("decimal", "string", 'the decimal separator of numbers written as text in its data (e.g. ",")', ".",
            kind=str),
        Key("thousands", "string", "the thousands separator of numbers written as text (none by default)", None,
            kind=str),
        Key("id_column", "string", "the column of row ids, matched across parties by PSI", kind=str),
        Key("model_dir", "path", "where this party saves its model file", kind=str,
            default_text='`"model-<name>"`'),
        Key("checkpoint_dir", "path", "where this party checkpoints every round", None, kind=str,
            default_text='`"<model_dir>/checkpoint"`'),
        Key("index", "integer", "this passive party's index (1, 2, ...), as in the active party's [[peers]]",
            kind=int, role="passive"),
        Key("listen", "string", 'address to serve on ("host:port"; port 0: any free port)', kind=str,
            role="passive"),
        Key("active_party", "string", "the certificate name of the only party this one serves", "active",
            kind=str, role="passive"),
        Key("monotone_constraints", "table", "column = 1 or -1: the direction this party declares for its own "
            "columns; it refuses a run that does not constrain them so (docs/constraints.md)", None,
            role="passive"),
        Key("label", "string", "the label column", kind=str, role="active"),
        Key("weight_column", "string", "a column of per-row sample weights", None, kind=str, role="active"),
    )),
    Table("tls", "Mutual TLS between the parties (`teeboost certs` creates the files).", (
        Key("ca", "path", "the federation's CA certificate", kind=str, default_text="required unless insecure"),
        Key("cert", "path", "this party's certificate", kind=str, default_text="required unless insecure"),
        Key("key", "path", "this party's private key", kind=str, default_text="required unless insecure"),
        Key("insecure", "boolean", "plaintext without certificates (testing only)", False, kind=bool),
    )),
    Table("peers", "One entry per passive party (the active party's config only).", (
        Key("index", "integer", "the passive party's index: 1..number of passive parties", kind=int),
        Key("name", "string", "its certificate name", kind=str),
        Key("address", "string", 'where it listens ("host:port")', kind=str),
    ), role="active", array=True),
    Table("training", "The run the active party starts: protocol, held-out share and any training parameter "
                      "(XGBoost's names are accepted too; the defaults are XGBoost's).", (
        Key("protocol", "string", "plain, secureboost, ntee, onetee or strict (docs/tee-protocols.md)", "plain",
            kind=str),
        Key("test_size", "number", "share of the shared rows held out and scored after training", 0.3, kind=float),
        *_from_class(BoostParams, _TRAINING_DOCS),
    ), role="active", aliases=tuple(PARAM_ALIASES)),
    Table("protocol", "Settings of the secure protocols (ignored by plain).", _from_class(ProtocolOptions,
                                                                                           _PROTOCOL_DOCS)),
    Table("tee", "Enclaves (simulated backend): this party's platform and identity, and whom it trusts.", (
        Key("platform", "path", "this party's simulated platform key file (`teeboost tee platform`)", None,
            kind=str),
        Key("trusted_roots", "list of strings", "every party's platform key, hexadecimal Ed25519", []),
        Key("identity", "path", "this party's identity key file (`teeboost tee identity`)", None, kind=str),
        Key("identities", "list of strings", "every party's identity public key in hexadecimal, by party index "
                                             "(0: the active party)", []),
        Key("allow_simulated", "boolean", "accept simulated enclaves (no hardware protection)", False, kind=bool),
    )),
    Table("attestation", "Hardware quotes (DCAP): the policy a quote must meet and where collateral comes from "
                         "(docs/enclaves.md); exactly one of collateral or pccs_url.", (
        Key("accept_status", "list of strings", "TCB statuses accepted", ["UpToDate"]),
        Key("accept_advisories", "list of strings", "Intel security advisories accepted", []),
        Key("min_tcb_evaluation_data_number", "integer", "least TCB evaluation data number", 0),
        Key("mrenclave", "list of strings", "SGX enclave measurements accepted (hexadecimal)", []),
        Key("mrsigner", "list of tables", "SGX signers accepted: {mrsigner, isv_prod_id, min_isv_svn}", []),
        Key("tdx", "list of tables", "TDX measurements accepted: {mrtd, rtmr0..3, mrconfigid, "
                                     "allow_unpinned_rtmrs}", []),
        Key("collateral", "path", "a collateral file", None, kind=str),
        Key("pccs_url", "string", "a PCCS to fetch collateral from", None, kind=str),
    )),
    Table("compute", "Where this party's heavy loops run; never sent to another party.",
          _from_class(ComputeOptions, _COMPUTE_DOCS)),
    Table("network", "Timeouts, retries and message sizes of the gRPC connections.", (
        Key("timeout", "number", "seconds one request may take", 600.0, kind=float),
        Key("connect_timeout", "number", "seconds to wait for the peers at the start", 30.0, kind=float),
        Key("max_message_mb", "number", "largest gRPC message either way (MB)", DEFAULT_MAX_MESSAGE_BYTES / 2**20,
            kind=float),
        Key("retries", "integer", "resends while a peer is unreachable", 3, kind=int),
        Key("recover_timeout", "number", "active: seconds to wait for a lost passive party before resuming from "
                                         "the checkpoints (0: stop at once)", 120.0, kind=float),
        Key("max_recoveries", "integer", "active: recoveries of one run", 3, kind=int),
    )),
    Table("policy", "What this party agrees to serve (teeboost/policy.py, docs/hardening.md). A passive party "
                    "gets safe defaults for what it leaves out; \"none\" lifts a limit.", _policy_keys()),
    Table("serving", "The active party's scoring service, `teeboost serve --config` (docs/serving.md); its flags "
                     "override these keys.", (
        Key("listen", "string", 'address the HTTP API listens on ("host:port"; port 0: any free port)',
            "127.0.0.1:8080", kind=str),
        Key("models", "table", 'served model name = "directory" of this party\'s model, or a list of directories '
                               "(versions served at once; the first answers requests that pin none)",
            default_text='`{default = "<model_dir>"}`'),
        Key("fallback_model", "string or table", "the served model (trained on this party's columns only) that "
                                                 "scores rows the others could not; a table maps model name = "
                                                 "fallback name", None),
        Key("on_unmatched", "string or table", 'what a row the model could not score gets (a passive party lacks '
                                               'its id, or is down): "error" (saying why) or "fallback" (to '
                                               "fallback_model, flagged); a table maps model name = policy", None,
            default_text='`"fallback"` with a fallback_model, else `"error"`'),
        Key("max_rows_per_request", "integer", "rows one request may carry (413 beyond)", 1000, kind=int),
        Key("timeout", "number", "seconds a passive party has to answer an online scoring request before the "
                                 "request fails fast (or falls back): a party down or stalled", 2.0, kind=float),
    ), role="active"),
    Table("audit", "This party's own audit log (`teeboost audit show`).", (
        Key("log", "path", "the JSON-lines audit log", kind=str, default_text='`"audit-<name>.jsonl"` beside the '
                                                                            "config"),
    )),
)

_BY_NAME = {t.name: t for t in TABLES}
_KEYS = {t.name: {k.name: k for k in t.keys} for t in TABLES}


def key(table: str, name: str) -> Key:
    return _KEYS[table][name]


def _where_else(name: str, table: str | None) -> list[str]:
    return [t.name for t in TABLES if t.name != table and name in t.names()]


def _home(name: str, table: str | None) -> str:
    """Where a key that is not in ``table`` belongs, or what it may be a misspelling of."""
    homes = _where_else(name, table)
    here = f"[{table}]" if table else "the top level"
    if homes:
        return f"{name} belongs in {' or '.join(f'[{h}]' for h in homes)}, not {here}"
    known = sorted(_BY_NAME[table].names()) if table else []
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"{here} has unknown field(s) {name}{hint}"


def check_keys(raw: dict, path) -> None:
    """Every table and key of a config is one this schema lists; a misplaced key names the
    table it belongs in ("scheme belongs in [protocol], not [training]")."""
    problems = []
    for name, value in raw.items():
        table = _BY_NAME.get(name)
        if table is None:
            if isinstance(value, (dict, list)) and name not in {k for t in TABLES for k in t.names()}:
                close = difflib.get_close_matches(name, list(_BY_NAME), n=1)
                hint = f" (did you mean [{close[0]}]?)" if close else ""
                problems.append(f"unknown table [{name}]{hint}; the tables are "
                                f"{', '.join(f'[{t}]' for t in _BY_NAME)} (docs/configuration.md)")
            else:
                problems.append(_home(name, None))
            continue
        entries = value if table.array and isinstance(value, list) else [value]
        for entry in entries:
            if not isinstance(entry, dict):
                shape = f"[[{name}]] entries" if table.array else f"[{name}]"
                raise ConfigError(f"{path}: {shape} must be a table, not {entry!r}")
            for field in entry:
                if field not in table.names():
                    problems.append(_home(field, name))
    if problems:
        raise ConfigError(f"{path}: " + "; ".join(dict.fromkeys(problems)) + " (docs/configuration.md)")
