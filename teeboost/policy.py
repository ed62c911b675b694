"""What a party agrees to serve: the ``[policy]`` section of its config.

A passive party's columns are its own; the active party only asks. Every request that could
reveal more than the party agreed to is checked here, at the party, against rules its own
operator wrote: which protocols may run (the TEE protocols unless plain or SecureBoost are
opted into, since both reveal per-bin or per-row aggregates of this party's data to the
active party), how large a model may grow, how small a partition of rows it reveals may be
(k-anonymity of partitions), whether the active party may sample this party's columns or
weigh rows (either lets it aim every split of a tree at one row: see docs/enclaves.md), how much
alignment and prediction it serves per day (budgets, counted from the audit log so a restart
does not reset them), and how many bits about any one of its rows may leave per day
(``max_bits_per_row_per_day``: every routing answer is one bit; a strict prediction releases
``outputs x output_bits``), counted per row in its row ledger (``teeboost.budget``).

A passive party that says nothing gets ``SAFE_DEFAULTS``: limits that let a normal credit
model (a few hundred trees of depth <= 8, nodes of >= 20 rows, one output) train and score
each row once a day at 8 bits, and that stop the measured prediction attacks
(docs/hardening.md, "The leakage budget"). An active party's own policy defaults to no limits.

A refusal is a ``PolicyRefused`` naming the party and the rule; the active party's error
carries the same text.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from .errors import ConfigError, ProtocolError

__all__ = ["Policy", "PolicyRefused", "TEE_PROTOCOLS", "ALL_PROTOCOLS", "DAY_SECONDS", "SAFE_DEFAULTS",
           "MAX_OUTPUT_BITS"]

TEE_PROTOCOLS = ("ntee", "onetee", "strict")
ALL_PROTOCOLS = ("plain", "secureboost", *TEE_PROTOCOLS)
DAY_SECONDS = 86_400.0
MAX_OUTPUT_BITS = 52  # a float64's mantissa: more is full precision

#: What a passive party gets for every rule its [policy] does not set (measured and justified
#: in docs/hardening.md, "The leakage budget"): 8 bits per row per day is one strict score at
#: 8-bit precision, which costs < 0.001 AUC, while the attacks of the budget's review used
#: 32 to 200 bits per row.
SAFE_DEFAULTS = {
    "max_trees": 500,
    "max_depth": 8,
    "min_rows_per_node": 20,
    "max_runs_per_day": 20,
    "max_outputs": 1,
    "output_bits": 8,
    "max_bits_per_row_per_day": 8,
}

# what each opt-in protocol reveals of the refusing party, for the refusal message: a passive
# party's features to the active party, or the active party's labels to the passive parties
_REVEALS = {
    "passive": {
        "plain": "this party's per-bin gradient histograms and every partition, and sends the labels' gradients "
                 "in the clear",
        "secureboost": "every per-bin gradient sum of this party's features to the active party (which decrypts "
                       "them)",
    },
    "active": {
        "plain": "this party's labels: it sends the gradients of every row in the clear to every passive party",
        "secureboost": "this party's labels, encrypted: it sends the gradients of every row, encrypted under its own "
                       "key, to every passive party, and each split's partition of rows to the parties "
                       "(docs/secureboost.md)",
    },
}


class PolicyRefused(ProtocolError):
    """A request outside what the party's ``[policy]`` allows."""

    def __init__(self, party: str, rule: str, detail: str) -> None:
        super().__init__(f"party {party!r} refuses by its policy ([policy] {rule}): {detail}")
        self.party = party
        self.rule = rule
        self.detail = detail


class SealedRefusal(PolicyRefused):
    """A passive party's refusal its enclave sealed in its answer's place, for the active
    enclave to tell its host alone: the passive host cannot tell it from an answer, so nothing
    the active party does next may differ from what follows an answer (online: the session goes
    on; a batch: no ``Abandon``, whose frame told the passive host of the refusal: red team)."""


def _positive(name: str, value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: [policy] {name} = {value!r} must be a whole number >= 1")
    return value


def _limit(name: str, table: dict, defaults: dict, where: str) -> int | None:
    """A limit from the table; "none" lifts a default limit (the operator says so in words)."""
    value = table.get(name, defaults.get(name))
    if value == "none":
        return None
    return _positive(name, value, where)


def _flag(name: str, value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: [policy] {name} = {value!r} must be true or false")
    return value


#: What each constraint lets an N-TEE or 1-TEE active host do, which a passive party must allow.
_CONSTRAINT_RISKS = {
    "interaction_constraints": "the active host can keep this party's candidates to one column below a split",
    "monotone_constraints": "with crafted gradients, whether this party has any valid split answers a question about "
                            "rows on all its constrained columns at once",
}


@dataclass(frozen=True)
class Policy:
    protocols: tuple[str, ...] = TEE_PROTOCOLS
    max_trees: int | None = None  # trees of one run (every output counted)
    max_depth: int | None = None
    min_rows_per_node: int = 1  # k: both sides of every partition this party reveals or scores
    max_runs_per_day: int | None = None  # training runs set up in any 24 h
    max_psi_ids_per_day: int | None = None  # ids the active party submits to alignment in any 24 h
    max_prediction_rows_per_day: int | None = None  # rows scored in any 24 h
    # colsample_bytree < 1: with a seed ground offline, every split of a tree falls on one chosen column
    column_sampling: bool = False
    # weighted rows (sample weights, scale_pos_weight): k counts rows, not weight, so zero weights defeat it
    sample_weights: bool = False
    max_outputs: int | None = None  # outputs per model (classes of a multiclass model; 1 otherwise)
    # strict: each output a prediction releases is quantized to this many bits (None: full precision)
    output_bits: int | None = None
    # bits about one of this party's rows that may leave in any 24 h (a routing answer is one bit;
    # a strict score outputs x output_bits); None: not counted
    max_bits_per_row_per_day: int | None = None
    # the label owner's rule: columns one passive party may bring to a run (made-up columns are
    # how a passive party probes labels: docs/tee-protocols.md, "Crafted columns"); None: any
    max_passive_features: int | None = None
    # N-TEE, 1-TEE runs with interaction_constraints: the active host names each node's interaction
    # state, so it can narrow the columns this party's candidates come from (docs/constraints.md)
    interaction_constraints: bool = False
    # N-TEE, 1-TEE runs with monotone_constraints: whether this party has any valid split at all
    # answers, for crafted gradients, a question about rows on every constrained column at once
    monotone_constraints: bool = False

    @property
    def release_bits(self) -> int:
        """Bits one output of a strict prediction releases under this policy."""
        return self.output_bits if self.output_bits is not None else 64

    @classmethod
    def unrestricted(cls) -> "Policy":
        """One process, one operator: every protocol, no limits."""
        return cls(protocols=ALL_PROTOCOLS, column_sampling=True, sample_weights=True, interaction_constraints=True,
                   monotone_constraints=True)

    @classmethod
    def safe(cls) -> "Policy":
        """A passive party's policy when its config says nothing."""
        return cls(**SAFE_DEFAULTS)

    @classmethod
    def from_table(cls, table: Any, where: str = "config", role: str = "passive") -> "Policy":
        """``role`` passive: every rule left out takes ``SAFE_DEFAULTS``; active: no limits
        (its policy only says which protocols it takes part in)."""
        if table is None:
            table = {}
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: [policy] must be a table")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(table) - known)
        if unknown:
            raise ConfigError(f"{where}: [policy] has unknown field(s) {', '.join(unknown)} "
                              f"(known: {', '.join(sorted(known))})")
        protocols = table.get("protocols", list(TEE_PROTOCOLS))
        if not isinstance(protocols, list) or not protocols or not all(isinstance(p, str) for p in protocols):
            raise ConfigError(f"{where}: [policy] protocols must be a non-empty list of protocol names")
        bad = [p for p in protocols if p not in ALL_PROTOCOLS]
        if bad:
            raise ConfigError(f"{where}: [policy] protocols names unknown protocol(s) {', '.join(map(repr, bad))} "
                              f"(known: {', '.join(ALL_PROTOCOLS)})")
        defaults = SAFE_DEFAULTS if role == "passive" else {}
        limits = {name: _limit(name, table, defaults, where) for name in
                  ("max_trees", "max_depth", "max_runs_per_day", "max_psi_ids_per_day",
                   "max_prediction_rows_per_day", "max_outputs", "output_bits", "max_bits_per_row_per_day",
                   "max_passive_features")}
        if limits["output_bits"] is not None and limits["output_bits"] > MAX_OUTPUT_BITS:
            raise ConfigError(f"{where}: [policy] output_bits = {limits['output_bits']} must be at most "
                              f"{MAX_OUTPUT_BITS} (a float64's precision); leave it out for full precision")
        k = _positive("min_rows_per_node", table.get("min_rows_per_node", defaults.get("min_rows_per_node", 1)), where)
        flags = {name: _flag(name, table.get(name, False), where)
                 for name in ("column_sampling", "sample_weights", "interaction_constraints", "monotone_constraints")}
        return cls(protocols=tuple(dict.fromkeys(protocols)), min_rows_per_node=k, **limits, **flags)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v) for f in fields(self)}

    # -- checks; ``party`` names this party in the refusal

    def check_protocol(self, party: str, protocol: str, role: str = "passive", config: str | None = None) -> None:
        """``role``: whose data the refusal speaks of (the active party checking its own run
        protects its labels, a passive party its features); ``config``: where to allow it."""
        if protocol not in self.protocols:
            reveals = _REVEALS[role].get(protocol)
            reason = f" ({protocol} reveals {reveals})" if reveals else ""
            where = f"[policy] protocols of {config}" if config else "[policy] protocols"
            raise PolicyRefused(party, "protocols", f"protocol {protocol!r} is not allowed{reason}; allowed: "
                                f"{', '.join(self.protocols)}. Its operator may opt in by adding {protocol!r} to "
                                f"{where}")

    def check_passive_features(self, passive: str, n_features: int) -> None:
        """The label owner's cap on one passive party's columns in a run."""
        if self.max_passive_features is not None and n_features > self.max_passive_features:
            raise PolicyRefused("active", "max_passive_features",
                                f"passive party {passive} brings {n_features} columns; at most "
                                f"{self.max_passive_features}: each made-up column is a further probe of the labels")

    def check_params(self, party: str, protocol: str, params, outputs: int = 1, *, serving: bool = True,
                     config: str | None = None) -> None:
        """A run's parameters (``BoostParams``; ``outputs`` trees per round, one per class in
        multiclass runs) before anything of this party's is touched. ``serving`` False: the
        active party checks its own run, whose column sample and weights are its own choice (and
        a refused protocol is told by what it reveals of the labels). ``config``: the file whose
        [policy] would allow it.
        Sample weights are not in the parameters: they are checked in the attested criteria."""
        self.check_protocol(party, protocol, "passive" if serving else "active", config)
        if self.max_outputs is not None and outputs > self.max_outputs:
            raise PolicyRefused(party, "max_outputs", f"the model would have {outputs} outputs (one per class); "
                                f"at most {self.max_outputs}: every output of a prediction is a further answer "
                                "about each row scored")
        if protocol == "strict" and self.max_bits_per_row_per_day is not None \
                and outputs * self.release_bits > self.max_bits_per_row_per_day:
            raise PolicyRefused(party, "max_bits_per_row_per_day", f"one strict score of this model releases "
                                f"{outputs} output(s) x {self.release_bits} bits = {outputs * self.release_bits} "
                                f"bits about a row; at most {self.max_bits_per_row_per_day} bits per row per day")
        trees = params.n_trees * max(1, outputs)
        if self.max_trees is not None and trees > self.max_trees:
            each = f" ({params.n_trees} rounds of {outputs})" if outputs > 1 else ""
            raise PolicyRefused(party, "max_trees", f"the run asks for {trees} trees{each}; "
                                f"at most {self.max_trees}")
        if self.max_depth is not None and params.max_depth > self.max_depth:
            raise PolicyRefused(party, "max_depth", f"the run asks for depth {params.max_depth}; "
                                f"at most {self.max_depth}")
        self.check_leaf_floor(party, params.min_samples_leaf)
        for rule, why in _CONSTRAINT_RISKS.items():  # docs/constraints.md, residuals
            if serving and getattr(params, rule) and protocol in ("ntee", "onetee") and not getattr(self, rule):
                raise PolicyRefused(party, rule, f"the {protocol} run has {rule.replace('_', ' ')} ({why}); allow it "
                                    f"with {rule} = true in [policy], or train strict")
        if serving:
            self.check_column_sampling(party, params.colsample_bytree)
            self.check_weighted(party, params.scale_pos_weight != 1, f"scale_pos_weight = {params.scale_pos_weight}")

    def check_criteria(self, party: str, criteria) -> None:
        """The split criteria (``SplitCriteria``) an enclave of the run is bound to."""
        self.check_leaf_floor(party, criteria.min_samples_leaf)
        self.check_column_sampling(party, criteria.colsample_bytree)
        self.check_weighted(party, criteria.weighted, "the active party weighs rows")

    def check_column_sampling(self, party: str, colsample_bytree: float) -> None:
        if float(colsample_bytree) < 1 and not self.column_sampling:
            raise PolicyRefused(party, "column_sampling", f"the run samples this party's columns "
                                f"(colsample_bytree = {colsample_bytree}), which lets the active party aim every "
                                "split of a tree at one column; its operator may allow it with "
                                "column_sampling = true in [policy]")

    def check_weighted(self, party: str, weighted: bool, how: str) -> None:
        if weighted and not self.sample_weights:
            raise PolicyRefused(party, "sample_weights", f"the run weighs rows ({how}); weights of 0 defeat "
                                "min_rows_per_node, which counts rows, not weight. Its operator may allow it with "
                                "sample_weights = true in [policy]")

    def check_leaf_floor(self, party: str, min_samples_leaf: int) -> None:
        """Split criteria an enclave will enforce must keep every child at least k rows."""
        if int(min_samples_leaf) < self.min_rows_per_node:
            raise PolicyRefused(party, "min_rows_per_node", f"the run allows nodes of {int(min_samples_leaf)} "
                                f"row(s) (min_samples_leaf); this party requires at least {self.min_rows_per_node}")

    def check_partition(self, party: str, node_rows: int, left_rows: int) -> None:
        """A partition about to leave this party: both sides at least k rows."""
        smaller = min(left_rows, node_rows - left_rows)
        if smaller < self.min_rows_per_node:
            raise PolicyRefused(party, "min_rows_per_node", f"a split of a node of {node_rows} rows would put "
                                f"{smaller} row(s) on one side; this party reveals partitions of at least "
                                f"{self.min_rows_per_node} rows only")

    def check_records(self, party: str, records_per_tree: dict[int, int]) -> None:
        """This party's split records, by tree: no tree beyond ``max_trees`` and no more
        records in one tree than a tree of ``max_depth`` has internal nodes."""
        if not records_per_tree:
            return
        last = max(records_per_tree)
        if min(records_per_tree) < 0:
            raise PolicyRefused(party, "max_trees", f"a split in tree {min(records_per_tree)}: trees count from 0")
        if self.max_trees is not None and last >= self.max_trees:
            raise PolicyRefused(party, "max_trees", f"a split in tree {last} (trees count from 0) is beyond "
                                f"{self.max_trees} trees")
        if self.max_depth is not None:
            limit = 2 ** self.max_depth - 1
            tree, count = max(records_per_tree.items(), key=lambda item: item[1])
            if count > limit:
                raise PolicyRefused(party, "max_depth", f"tree {tree} asks this party for {count} splits; a tree "
                                    f"of depth {self.max_depth} has at most {limit}")

    def check_budget(self, party: str, rule: str, used: int, asked: int) -> None:
        limit = getattr(self, rule)
        if limit is not None and used + asked > limit:
            raise PolicyRefused(party, rule, f"{asked} more would exceed {limit} in 24 hours "
                                f"({used} already served)")
