"""Second-order losses: per-sample gradients and hessians of the boosting objective.

Only the active party (the label holder) evaluates these; every protocol then works on the
(g, h) pairs they produce. Hessians are floored at 1e-16 as XGBoost does, so a confident
sample never contributes exactly zero curvature. Sample weights scale (g, h) in the boosting
loop, not here; only the base margin (a weighted label statistic) sees them.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np

from ..config import tweedie_metric
from ..errors import DataError

__all__ = ["Objective", "Logistic", "SquaredError", "Softmax", "Poisson", "Tweedie", "Gamma", "PseudoHuber",
           "make_objective", "infer_objective"]

_HESSIAN_FLOOR = 1e-16


def _sigmoid(margin: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * margin))  # overflow-free logistic


def _mean(y: np.ndarray, weight: np.ndarray | None) -> float:
    """The (weighted) label mean; unweighted exactly as ``np.mean``."""
    if weight is None:
        return float(np.mean(y))
    return float(np.sum(weight * y) / np.sum(weight))


class Objective(ABC):
    """A loss with its link function; ``n_outputs`` margins per sample."""

    name: str
    metric: str  # held-out metric reported for this objective
    n_outputs: int = 1

    @property
    def params(self) -> dict[str, float]:
        """The parameters that define this loss besides its name, as the model file keeps them."""
        return {}

    @abstractmethod
    def base_margin(self, y: np.ndarray, weight: np.ndarray | None = None) -> np.ndarray:
        """Initial margin per output, estimated from the labels (and sample weights) alone."""

    @abstractmethod
    def gradients(self, y: np.ndarray, margin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(g, h), each of shape (n_samples, n_outputs)."""

    @abstractmethod
    def predict(self, margin: np.ndarray) -> np.ndarray:
        """Margins -> user-facing predictions (probabilities or values)."""


class Logistic(Objective):
    name = "binary"
    metric = "auc"

    def base_margin(self, y: np.ndarray, weight: np.ndarray | None = None) -> np.ndarray:
        rate = float(np.clip(_mean(y, weight), 1e-6, 1 - 1e-6))
        return np.array([np.log(rate / (1.0 - rate))])

    def gradients(self, y, margin):
        p = _sigmoid(margin[:, 0])
        g = p - y
        h = np.maximum(p * (1.0 - p), _HESSIAN_FLOOR)
        return g[:, None], h[:, None]

    def predict(self, margin):
        return _sigmoid(margin[:, 0])


class SquaredError(Objective):
    name = "regression"
    metric = "rmse"

    def base_margin(self, y, weight=None):
        return np.array([_mean(y, weight)])

    def gradients(self, y, margin):
        g = margin[:, 0] - y
        return g[:, None], np.ones_like(g)[:, None]

    def predict(self, margin):
        return margin[:, 0].copy()


class Softmax(Objective):
    """Multiclass: one tree per class per round, XGBoost's ``multi:softprob`` hessian."""

    name = "multiclass"
    metric = "accuracy"

    def __init__(self, n_classes: int) -> None:
        if n_classes < 2:
            raise DataError(f"multiclass needs at least 2 classes, got {n_classes}")
        self.n_outputs = n_classes

    def base_margin(self, y, weight=None):
        counts = np.bincount(y.astype(np.int64), weights=weight, minlength=self.n_outputs).astype(np.float64)
        prior = np.clip(counts / counts.sum(), 1e-6, None)
        log_prior = np.log(prior)
        return log_prior - log_prior.mean()

    def _softmax(self, margin):
        shifted = margin - margin.max(axis=1, keepdims=True)
        e = np.exp(shifted)
        return e / e.sum(axis=1, keepdims=True)

    def gradients(self, y, margin):
        p = self._softmax(margin)
        onehot = np.zeros_like(p)
        onehot[np.arange(y.size), y.astype(np.int64)] = 1.0
        g = p - onehot
        h = np.maximum(2.0 * p * (1.0 - p), _HESSIAN_FLOOR)
        return g, h

    def predict(self, margin):
        return self._softmax(margin)


class Poisson(Objective):
    """Counts (XGBoost's ``count:poisson``): log link, predictions ``exp(margin)``.

    The hessian is ``exp(margin + delta_step)`` rather than the true ``exp(margin)``: XGBoost
    inflates it (by e**0.7, about 2) so that early Newton steps from a poor margin do not
    overshoot (XGBoost's ``max_delta_step``, 0.7 for Poisson: ``BoostParams.delta_step``)."""

    name = "poisson"
    metric = "poisson-nloglik"

    def __init__(self, delta_step: float = 0.7) -> None:
        self.delta_step = float(delta_step)

    def base_margin(self, y, weight=None):
        return np.array([np.log(max(_mean(y, weight), 1e-16))])

    def gradients(self, y, margin):
        m = margin[:, 0]
        g = np.exp(m) - y
        h = np.maximum(np.exp(m + self.delta_step), _HESSIAN_FLOOR)
        return g[:, None], h[:, None]

    def predict(self, margin):
        return np.exp(margin[:, 0])


class Tweedie(Objective):
    """Compound Poisson-gamma amounts (XGBoost's ``reg:tweedie``): log link, the deviance of
    variance power ``rho`` in [1, 2). Like XGBoost 3.2, the base margin is the log of the
    (weighted) label mean and no leaf-weight cap is set."""

    name = "tweedie"

    def __init__(self, variance_power: float = 1.5) -> None:
        if not 1.0 <= variance_power < 2.0:
            raise DataError(f"tweedie_variance_power={variance_power} must be in [1, 2)")
        self.rho = float(variance_power)
        self.metric = tweedie_metric(self.rho)

    @property
    def params(self):
        return {"tweedie_variance_power": self.rho}

    def base_margin(self, y, weight=None):
        return np.array([np.log(max(_mean(y, weight), 1e-16))])

    def gradients(self, y, margin):
        m, rho = margin[:, 0], self.rho
        low, high = np.exp((1.0 - rho) * m), np.exp((2.0 - rho) * m)
        g = -y * low + high
        h = np.maximum(-y * (1.0 - rho) * low + (2.0 - rho) * high, _HESSIAN_FLOOR)
        return g[:, None], h[:, None]

    def predict(self, margin):
        return np.exp(margin[:, 0])


class Gamma(Objective):
    """Positive amounts (XGBoost's ``reg:gamma``): log link, gamma deviance. XGBoost 3.2
    reports ``gamma-deviance`` by default (``gamma-nloglik`` is there to ask for); the base
    margin is the log of the (weighted) label mean."""

    name = "gamma"
    metric = "gamma-deviance"

    def base_margin(self, y, weight=None):
        return np.array([np.log(max(_mean(y, weight), 1e-16))])

    def gradients(self, y, margin):
        ratio = y * np.exp(-margin[:, 0])
        return (1.0 - ratio)[:, None], np.maximum(ratio, _HESSIAN_FLOOR)[:, None]

    def predict(self, margin):
        return np.exp(margin[:, 0])


class PseudoHuber(Objective):
    """Squared error near the label, absolute error beyond ``huber_slope`` (XGBoost's
    ``reg:pseudohubererror``): identity link. Its base margin is XGBoost's intercept fit, one
    unregularised Newton step from margin 0, ``-sum(w g) / sum(w h)``, not a label mean."""

    name = "pseudohuber"
    metric = "mphe"

    def __init__(self, slope: float = 1.0) -> None:
        if not (math.isfinite(slope) and slope > 0):
            raise DataError(f"huber_slope={slope} must be a finite number > 0")
        self.slope = float(slope)

    @property
    def params(self):
        return {"huber_slope": self.slope}

    def base_margin(self, y, weight=None):
        g, h = self.gradients(y, np.zeros((y.size, 1)))
        w = np.ones(y.size) if weight is None else weight
        return np.array([-float(np.sum(w * g[:, 0])) / float(np.sum(w * h[:, 0]))])

    def gradients(self, y, margin):
        z = margin[:, 0] - y
        slope2 = self.slope * self.slope
        root = np.sqrt(1.0 + z * z / slope2)
        g = z / root
        h = np.maximum(slope2 / (slope2 + z * z) / root, _HESSIAN_FLOOR)
        return g[:, None], h[:, None]

    def predict(self, margin):
        return margin[:, 0].copy()


def make_objective(name: str, n_classes: int = 2, *, delta_step: float = 0.7, tweedie_variance_power: float = 1.5,
                   huber_slope: float = 1.0) -> Objective:
    """``delta_step``: Poisson's hessian inflation (``BoostParams.delta_step``);
    ``tweedie_variance_power`` and ``huber_slope`` parametrise their losses; each loss ignores
    the others' (``BoostParams.objective_options`` gives all three)."""
    if name == "binary":
        return Logistic()
    if name == "regression":
        return SquaredError()
    if name == "multiclass":
        return Softmax(n_classes)
    if name == "poisson":
        return Poisson(delta_step)
    if name == "tweedie":
        return Tweedie(tweedie_variance_power)
    if name == "gamma":
        return Gamma()
    if name == "pseudohuber":
        return PseudoHuber(huber_slope)
    raise DataError(f"unknown objective {name!r}")


def infer_objective(labels: np.ndarray, *, max_classes: int = 50) -> str:
    """Two distinct values: binary; class codes 0, 1, ..., K-1 (as scikit-learn's sample sets
    write them): multiclass; any other numbers, a bucketed amount or a 1-10 rating among
    them, are a regression target (say ``objective`` to train classes, or counts and amounts:
    ``poisson``, ``tweedie``, ``gamma`` and ``pseudohuber`` are never inferred)."""
    distinct = np.unique(labels)
    if distinct.size == 2:
        return "binary"
    if 2 < distinct.size <= max_classes and np.array_equal(distinct, np.arange(distinct.size)):
        return "multiclass"
    return "regression"
