"""Training parameters, validated once on construction so no protocol ever sees a bad value.

Errors name the field and the value (``max_depth=0 must be >= 1``) because parameters arrive
from command lines and config files written by people at other organisations.
"""

from __future__ import annotations

import dataclasses
import math
import struct
import sys
from dataclasses import dataclass
from typing import Any

from .core.constraints import RunConstraints, parse_interactions, parse_monotone
from .errors import ConfigError

__all__ = ["BoostParams", "ProtocolOptions", "OBJECTIVES", "OBJECTIVE_ALIASES", "PARAM_ALIASES", "METRICS",
           "MAX_BIN_LIMIT", "ALIGN_MODES", "IMPORTANCE_TYPES", "DataWarning", "user_stacklevel", "tweedie_metric",
           "metric_family"]

OBJECTIVES = ("binary", "multiclass", "regression", "poisson", "tweedie", "gamma", "pseudohuber")

#: XGBoost's objective names, accepted wherever an objective is given.
OBJECTIVE_ALIASES = {
    "binary:logistic": "binary",
    "multi:softprob": "multiclass",
    "multi:softmax": "multiclass",
    "reg:squarederror": "regression",
    "count:poisson": "poisson",
    "reg:tweedie": "tweedie",
    "reg:gamma": "gamma",
    "reg:pseudohubererror": "pseudohuber",
}

#: XGBoost's parameter names (and their own aliases) -> ours.
PARAM_ALIASES = {
    "n_estimators": "n_trees",
    "eta": "learning_rate",
    "gamma": "min_split_gain",
    "min_split_loss": "min_split_gain",
    "alpha": "reg_alpha",
    "lambda": "reg_lambda",
}

#: Held-out metrics by XGBoost's names (``accuracy`` is 1 - ``merror``). ``tweedie-nloglik`` is a
#: family: ``tweedie-nloglik@1.3`` names its variance power (bare: ``tweedie_variance_power``'s).
METRICS = ("auc", "logloss", "error", "mlogloss", "merror", "accuracy", "rmse", "mae", "poisson-nloglik",
           "tweedie-nloglik", "gamma-deviance", "gamma-nloglik", "mphe")

#: Metrics each objective's predictions can be scored by.
_METRICS_FOR = {
    "binary": ("auc", "logloss", "error"),
    "multiclass": ("mlogloss", "merror", "accuracy"),
    "regression": ("rmse", "mae", "mphe"),
    "poisson": ("poisson-nloglik", "rmse", "mae"),
    "tweedie": ("tweedie-nloglik", "rmse", "mae"),
    "gamma": ("gamma-deviance", "gamma-nloglik", "rmse", "mae"),
    "pseudohuber": ("mphe", "rmse", "mae"),
}

#: Bins are stored as uint16 with one index kept for "missing", so 65,535 value bins at most.
MAX_BIN_LIMIT = 65_535

# The vocabularies below live here, in a module that imports neither numpy nor pandas, so the
# command line can build its parser and show data warnings without loading them; teeboost.data,
# teeboost.row_matching, teeboost.training_columns and teeboost.explain import them from here.

#: How the rows of the parties' files are matched (``--align``; ``teeboost.row_matching.match_rows``).
ALIGN_MODES = ("auto", "id", "intersect", "position")

#: Feature importance types, as XGBoost's ``get_score`` (``teeboost.explain``).
IMPORTANCE_TYPES = ("weight", "gain", "cover", "total_gain", "total_cover")


class DataWarning(UserWarning):
    """Something in the data was adjusted (columns dropped, rows left out); training goes on."""


def user_stacklevel() -> int:
    """``warnings.warn``'s stacklevel that names the first frame outside teeboost, for the
    function that calls this: a warning points at the user's line (``fit``, ``predict``),
    whatever path through the library led to it, never at teeboost's own code. Frames are
    told apart by module name (enclaves load this module without a ``__file__``)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == "teeboost":
        frame, level = frame.f_back, level + 1
    return level


def tweedie_metric(variance_power: float) -> str:
    """XGBoost's name of the Tweedie metric, ``tweedie-nloglik@1.5``: the power as the float32
    XGBoost keeps, printed with 6 significant digits as C++ streams print it."""
    as_float32 = struct.unpack("f", struct.pack("f", float(variance_power)))[0]
    return f"tweedie-nloglik@{as_float32:g}"


def metric_family(name: str) -> str:
    """``tweedie-nloglik@1.3`` -> ``tweedie-nloglik``; other names are their own family."""
    return name.partition("@")[0]


def _tweedie_power_of(metric: str) -> float:
    """The variance power a ``tweedie-nloglik@<power>`` metric names, checked like the parameter."""
    text = metric.partition("@")[2]
    try:
        power = float(text)
    except ValueError:
        raise ConfigError(f"eval_metric={metric!r}: {text!r} after '@' must be a variance power in [1, 2)") from None
    if not 1.0 <= power < 2.0:
        raise ConfigError(f"eval_metric={metric!r}: variance power {power} must be in [1, 2)")
    return power


def _check_int(name: str, value: Any, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name}={value!r} must be an integer")
    if value < low:
        raise ConfigError(f"{name}={value} must be >= {low}")
    if high is not None and value > high:
        raise ConfigError(f"{name}={value} must be <= {high}")


def _check_float(
    name: str,
    value: Any,
    low: float,
    high: float = math.inf,
    *,
    low_open: bool = False,
) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name}={value!r} must be a number")
    if not math.isfinite(value) and high != math.inf:
        raise ConfigError(f"{name}={value} must be finite")
    if math.isnan(value):
        raise ConfigError(f"{name}=nan must be a number")
    if low_open and value <= low:
        raise ConfigError(f"{name}={value} must be > {low}")
    if not low_open and value < low:
        raise ConfigError(f"{name}={value} must be >= {low}")
    if value > high:
        raise ConfigError(f"{name}={value} must be <= {high}")


@dataclass(frozen=True)
class BoostParams:
    """Hyper-parameters of XGBoost-style second-order boosting.

    Defaults are XGBoost's (100 trees, depth 6, learning rate 0.3, subsample 1, 256 bins,
    lambda 1, min_child_weight 1, gamma 0), so a model moved from XGBoost keeps its meaning;
    the demo, benchmarks and tests pass smaller settings explicitly.
    """

    objective: str | None = None  # None: inferred from the label; XGBoost's names are accepted
    n_trees: int = 100  # XGBoost: n_estimators
    max_depth: int = 6
    learning_rate: float = 0.3
    subsample: float = 1.0
    reg_lambda: float = 1.0
    min_child_weight: float = 1.0
    min_split_gain: float = 0.0  # XGBoost: gamma
    min_samples_leaf: int = 1
    max_bin: int = 256
    random_state: int = 0
    early_stopping_rounds: int | None = None
    # categorical features split into gradient-sorted category subsets (as XGBoost, LightGBM);
    # False: only "the first k categories in the owner's code order vs the rest"
    category_subsets: bool = True
    reg_alpha: float = 0.0  # L1 regularisation of leaf weights
    # cap on a leaf weight's magnitude (0: none); None: 0.7 for poisson, as XGBoost, else 0
    max_delta_step: float | None = None
    colsample_bytree: float = 1.0  # fraction of each party's columns a tree may split on
    scale_pos_weight: float = 1.0  # weight of positive rows (binary), on top of sample weights
    # held-out metrics reported per round (XGBoost's names); early stopping watches the last
    eval_metric: tuple[str, ...] | None = None
    # binary: the label value that is class 1, whose probability the model gives (None: the
    # larger of the two values, e.g. 1 of 0/1, or "yes" of "no"/"yes")
    positive_class: str | None = None
    # reg:tweedie's variance power rho in [1, 2): 1 is Poisson-like, near 2 gamma-like (XGBoost's default)
    tweedie_variance_power: float = 1.5
    # reg:pseudohubererror's (and the mphe metric's) delta: errors beyond it count about linearly
    huber_slope: float = 1.0
    # XGBoost's monotone_constraints by column name ({"age": 1, "MonthlyIncome": -1}; any
    # party's columns) and interaction_constraints (sets of column names); see core/constraints.py
    monotone_constraints: dict[str, int] | None = None
    interaction_constraints: tuple[tuple[str, ...], ...] | None = None

    def __post_init__(self) -> None:
        objective = OBJECTIVE_ALIASES.get(self.objective, self.objective)
        if objective is not None and objective not in OBJECTIVES:
            raise ConfigError(
                f"objective={self.objective!r} must be one of {', '.join(OBJECTIVES)} "
                f"(or XGBoost's {', '.join(OBJECTIVE_ALIASES)})"
            )
        object.__setattr__(self, "objective", objective)
        _check_int("n_trees", self.n_trees, 1, 100_000)
        _check_int("max_depth", self.max_depth, 1, 30)
        _check_float("learning_rate", self.learning_rate, 0.0, 10.0, low_open=True)
        _check_float("subsample", self.subsample, 0.0, 1.0, low_open=True)
        _check_float("reg_lambda", self.reg_lambda, 0.0)
        _check_float("min_child_weight", self.min_child_weight, 0.0)
        _check_float("min_split_gain", self.min_split_gain, 0.0)
        _check_int("min_samples_leaf", self.min_samples_leaf, 1)
        _check_int("max_bin", self.max_bin, 2, MAX_BIN_LIMIT)
        _check_int("random_state", self.random_state, 0, 2**63 - 1)
        if self.early_stopping_rounds is not None:
            _check_int("early_stopping_rounds", self.early_stopping_rounds, 1)
        if not isinstance(self.category_subsets, bool):
            raise ConfigError(f"category_subsets={self.category_subsets!r} must be true or false")
        _check_float("reg_alpha", self.reg_alpha, 0.0)
        if self.max_delta_step is not None:
            _check_float("max_delta_step", self.max_delta_step, 0.0)
        _check_float("colsample_bytree", self.colsample_bytree, 0.0, 1.0, low_open=True)
        _check_float("scale_pos_weight", self.scale_pos_weight, 0.0, low_open=True)
        if not math.isfinite(self.scale_pos_weight):
            raise ConfigError(f"scale_pos_weight={self.scale_pos_weight} must be finite")
        if self.scale_pos_weight != 1.0 and objective not in (None, "binary"):
            raise ConfigError(f"scale_pos_weight={self.scale_pos_weight} applies to binary classification only, "
                              f"not objective={objective!r}")
        _check_float("tweedie_variance_power", self.tweedie_variance_power, 1.0)
        if self.tweedie_variance_power >= 2.0:
            raise ConfigError(f"tweedie_variance_power={self.tweedie_variance_power} must be < 2 "
                              "(reg:tweedie's power is in [1, 2); objective 'gamma' is power 2)")
        if self.tweedie_variance_power != 1.5 and objective != "tweedie":
            raise ConfigError(f"tweedie_variance_power={self.tweedie_variance_power} applies to objective "
                              f"'tweedie' (reg:tweedie) only, not objective={objective!r}")
        _check_float("huber_slope", self.huber_slope, 0.0, low_open=True)
        if not math.isfinite(self.huber_slope):
            raise ConfigError(f"huber_slope={self.huber_slope} must be finite")
        object.__setattr__(self, "eval_metric", self._metrics(self.eval_metric))
        if self.huber_slope != 1.0 and objective != "pseudohuber" and "mphe" not in (self.eval_metric or ()):
            raise ConfigError(f"huber_slope={self.huber_slope} applies to objective 'pseudohuber' "
                              f"(reg:pseudohubererror) or the mphe metric only, not objective={objective!r}")
        if self.positive_class is not None:
            if isinstance(self.positive_class, bool) or not isinstance(self.positive_class, (str, int, float)):
                raise ConfigError(f"positive_class={self.positive_class!r} must be a label value")
            if objective not in (None, "binary"):
                raise ConfigError(f"positive_class applies to binary classification only, not objective={objective!r}")
            object.__setattr__(self, "positive_class", str(self.positive_class))
        try:
            monotone = parse_monotone(self.monotone_constraints)
            interaction = parse_interactions(self.interaction_constraints)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        object.__setattr__(self, "monotone_constraints", monotone or None)
        object.__setattr__(self, "interaction_constraints", interaction or None)
        if self.reg_lambda == 0 and self.min_child_weight == 0:
            raise ConfigError(
                "reg_lambda=0 together with min_child_weight=0 allows leaves with zero "
                "hessian (division by zero); set one of them > 0"
            )

    def _metrics(self, value: Any) -> tuple[str, ...] | None:
        if value is None:
            return None
        names = (value,) if isinstance(value, str) else tuple(value)
        if not names or not all(isinstance(n, str) for n in names):
            raise ConfigError(f"eval_metric={value!r} must be a metric name or a list of them")
        checked = []
        for name in names:
            family = metric_family(name)
            if family not in METRICS or (family != name and family != "tweedie-nloglik"):
                raise ConfigError(f"eval_metric={name!r} must be one of {', '.join(METRICS)}")
            if self.objective is not None and family not in _METRICS_FOR[self.objective]:
                raise ConfigError(f"eval_metric={name!r} does not score objective={self.objective!r} "
                                  f"(use {', '.join(_METRICS_FOR[self.objective])})")
            if family == "tweedie-nloglik":  # XGBoost's spelling of the power it evaluates at
                name = tweedie_metric(self.tweedie_variance_power if family == name else _tweedie_power_of(name))
            checked.append(name)
        return tuple(checked)

    @property
    def constraints(self) -> RunConstraints:
        """The run's monotone and interaction constraints (public: every party binds them)."""
        return RunConstraints(dict(self.monotone_constraints or {}), tuple(self.interaction_constraints or ()))

    @property
    def delta_step(self) -> float:
        """The leaf-weight cap in force (0: none)."""
        if self.max_delta_step is not None:
            return float(self.max_delta_step)
        return 0.7 if self.objective == "poisson" else 0.0  # XGBoost 3.2: none for tweedie, gamma, pseudohuber

    def objective_options(self) -> dict[str, float]:
        """What ``make_objective`` needs besides the name (each loss takes its own)."""
        return {"delta_step": self.delta_step, "tweedie_variance_power": float(self.tweedie_variance_power),
                "huber_slope": float(self.huber_slope)}

    def metrics_for(self, objective: str) -> tuple[str, ...]:
        """The metrics a run with this objective reports: ``eval_metric``, or the default."""
        if self.eval_metric is None:
            if objective == "tweedie":
                return (tweedie_metric(self.tweedie_variance_power),)
            return (_DEFAULT_METRIC[objective],)
        wrong = [m for m in self.eval_metric if metric_family(m) not in _METRICS_FOR[objective]]
        if wrong:
            raise ConfigError(f"eval_metric={wrong[0]!r} does not score objective={objective!r} "
                              f"(use {', '.join(_METRICS_FOR[objective])})")
        return self.eval_metric

    @classmethod
    def from_user(cls, **values: Any) -> "BoostParams":
        """From user-facing names: XGBoost's (``n_estimators``, ``eta``, ``gamma``, ...) or
        ours, but not both for one parameter. Unknown names are refused by name."""
        merged: dict[str, Any] = {}
        for name, value in values.items():
            ours = PARAM_ALIASES.get(name, name)
            if ours in merged and merged[ours] != value:
                raise ConfigError(f"{name}={value!r} and {ours}={merged[ours]!r} name the same parameter")
            merged[ours] = value
        unknown = set(merged) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError(f"unknown parameter(s): {', '.join(sorted(unknown))}")
        return cls(**merged)

    def replace(self, **changes: Any) -> "BoostParams":
        """A copy with some fields changed, validated again."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ConfigError(f"unknown parameter(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["eval_metric"] = None if self.eval_metric is None else list(self.eval_metric)
        out["monotone_constraints"] = None if self.monotone_constraints is None else dict(self.monotone_constraints)
        out["interaction_constraints"] = (None if self.interaction_constraints is None
                                          else [list(s) for s in self.interaction_constraints])
        return out


#: The metric reported (and watched by early stopping) when ``eval_metric`` is not given.
_DEFAULT_METRIC = {"binary": "auc", "multiclass": "accuracy", "regression": "rmse", "poisson": "poisson-nloglik",
                   "gamma": "gamma-deviance", "pseudohuber": "mphe"}  # tweedie: tweedie_metric(power)


@dataclass(frozen=True)
class ProtocolOptions:
    """Settings of the secure protocols (ignored by ``plain``)."""

    scheme: str = "paillier"  # additively homomorphic scheme: "paillier" or "ou" (Okamoto-Uchiyama)
    key_bits: int = 2048  # modulus bits
    insecure_key_bits: bool = False  # allow key_bits < 2048 (tests only)
    pack_gradients: bool = True  # (g, h) of a sample in one plaintext
    pack_bins: bool = True  # several bin sums per plaintext before decryption
    crypto_workers: int | None = None  # processes for big-integer work (None: one per core)
    # random exponent of 2 x the key's security level (True), n/2 (False), or the scheme's default
    # (None: Okamoto-Uchiyama short, Paillier n/2); see docs/secureboost.md
    short_randomizer: bool | None = None
    precompute_randomizers: bool = True  # compute the next tree's randomisers while passive parties work
    randomizer_reserve_mb: int = 512  # memory bound of randomisers computed ahead
    aes_bits: int = 128  # AES-GCM key size of attested enclave channels (128 as in the paper, or 256)
    # 1-TEE: each passive party seals its bins to the enclave once and the enclave sums its histograms
    # (False: the seed paper's masked sums with index sets per node; slower at every size, docs/tee-protocols.md)
    onetee_bins_once: bool = True
    allow_simulated_tee: bool = False  # accept simulated enclaves and quotes (no hardware protection)

    def __post_init__(self) -> None:
        if self.scheme not in ("paillier", "ou"):
            raise ConfigError(f"scheme={self.scheme!r} must be 'paillier' or 'ou'")
        _check_int("key_bits", self.key_bits, 256, 16384)
        if self.key_bits % 2:
            raise ConfigError(f"key_bits={self.key_bits} must be even")
        if self.key_bits < 2048 and not self.insecure_key_bits:
            raise ConfigError(
                f"key_bits={self.key_bits} is below 2048; smaller keys are for tests only "
                "(set insecure_key_bits to allow them)"
            )
        if self.aes_bits not in (128, 256):
            raise ConfigError(f"aes_bits={self.aes_bits} must be 128 or 256")
        if self.crypto_workers is not None:
            _check_int("crypto_workers", self.crypto_workers, 1, 256)
        if self.short_randomizer not in (None, True, False):
            raise ConfigError(f"short_randomizer={self.short_randomizer!r} must be true, false or unset")
        _check_int("randomizer_reserve_mb", self.randomizer_reserve_mb, 0, 1 << 20)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
