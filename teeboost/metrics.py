"""Held-out metrics by XGBoost's names, dependency-free so the core install stays small.

Each takes optional sample weights (a weighted mean of per-row losses, as XGBoost's
evaluation does) and matches scikit-learn's and XGBoost's value on the same predictions.
Probabilities are clipped to [1e-16, 1 - 1e-16] where a logarithm needs it (XGBoost's eps).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["roc_auc", "logloss", "error", "mlogloss", "merror", "accuracy", "rmse", "mae", "poisson_nloglik",
           "tweedie_nloglik", "gamma_nloglik", "gamma_deviance", "mphe", "evaluate", "HIGHER_IS_BETTER",
           "higher_is_better", "spearman", "average_ranks"]

_EPS = 1e-16


def _weights(weight: np.ndarray | None, n: int) -> np.ndarray:
    if weight is None:
        return np.ones(n, dtype=np.float64)
    weight = np.asarray(weight, dtype=np.float64)
    if weight.shape != (n,):
        raise ValueError(f"{weight.size} sample weights for {n} rows")
    return weight


def _mean(values: np.ndarray, weight: np.ndarray | None) -> float:
    if weight is None:
        return float(np.mean(values))
    w = _weights(weight, values.size)
    return float(np.sum(w * values) / np.sum(w))


def roc_auc(y_true: np.ndarray, score: np.ndarray, weight: np.ndarray | None = None) -> float:
    """Area under the ROC curve: the (weighted) share of positive-negative pairs ordered
    right, ties counting half (Mann-Whitney U; scikit-learn's trapezoids). NaN with one class."""
    y_true = np.asarray(y_true).astype(bool)
    score = np.asarray(score, dtype=np.float64)
    w = _weights(weight, score.size)
    pos_w = np.where(y_true, w, 0.0)
    neg_w = np.where(y_true, 0.0, w)
    total_pos, total_neg = pos_w.sum(), neg_w.sum()
    if total_pos == 0 or total_neg == 0:
        return float("nan")
    order = np.argsort(score, kind="mergesort")
    sorted_scores = score[order]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(sorted_scores)) + 1))  # runs of tied scores
    pos_in = np.add.reduceat(pos_w[order], starts)
    neg_in = np.add.reduceat(neg_w[order], starts)
    neg_below = np.cumsum(neg_in) - neg_in
    return float(np.sum(pos_in * (neg_below + 0.5 * neg_in)) / (total_pos * total_neg))


def logloss(y_true: np.ndarray, probability: np.ndarray, weight: np.ndarray | None = None) -> float:
    """Binary cross-entropy of the probability of class 1."""
    y = np.asarray(y_true, dtype=np.float64)
    p = np.clip(np.asarray(probability, dtype=np.float64), _EPS, 1 - _EPS)
    return _mean(-(y * np.log(p) + (1 - y) * np.log(1 - p)), weight)


def error(y_true: np.ndarray, probability: np.ndarray, weight: np.ndarray | None = None) -> float:
    """Share of rows misclassified at threshold 0.5 (probability > 0.5 predicts class 1)."""
    predicted = np.asarray(probability, dtype=np.float64) > 0.5
    return _mean((predicted != np.asarray(y_true).astype(bool)).astype(np.float64), weight)


def mlogloss(y_true: np.ndarray, probabilities: np.ndarray, weight: np.ndarray | None = None) -> float:
    """Multiclass cross-entropy; ``probabilities`` is (rows, classes), labels are class codes."""
    p = np.asarray(probabilities, dtype=np.float64)
    picked = p[np.arange(p.shape[0]), np.asarray(y_true).astype(np.int64)]
    return _mean(-np.log(np.clip(picked, _EPS, 1 - _EPS)), weight)


def merror(y_true: np.ndarray, probabilities: np.ndarray, weight: np.ndarray | None = None) -> float:
    """Share of rows whose most probable class is not their label."""
    predicted = np.argmax(np.asarray(probabilities), axis=1)
    return _mean((predicted != np.asarray(y_true).astype(np.int64)).astype(np.float64), weight)


def accuracy(y_true: np.ndarray, predicted_class: np.ndarray, weight: np.ndarray | None = None) -> float:
    """Share of rows whose predicted class code is their label (1 - ``merror``)."""
    return _mean((np.asarray(y_true) == np.asarray(predicted_class)).astype(np.float64), weight)


def rmse(y_true: np.ndarray, predicted: np.ndarray, weight: np.ndarray | None = None) -> float:
    diff = np.asarray(y_true, dtype=np.float64) - np.asarray(predicted, dtype=np.float64)
    return math.sqrt(_mean(diff * diff, weight))


def mae(y_true: np.ndarray, predicted: np.ndarray, weight: np.ndarray | None = None) -> float:
    diff = np.asarray(y_true, dtype=np.float64) - np.asarray(predicted, dtype=np.float64)
    return _mean(np.abs(diff), weight)


def poisson_nloglik(y_true: np.ndarray, mean: np.ndarray, weight: np.ndarray | None = None) -> float:
    """Negative Poisson log-likelihood of counts ``y`` under means ``mean`` (XGBoost's formula:
    ``lgamma(y + 1) + mean - y * log(mean)``, the mean floored at 1e-16)."""
    y = np.asarray(y_true, dtype=np.float64)
    mu = np.maximum(np.asarray(mean, dtype=np.float64), _EPS)
    lgamma = np.vectorize(math.lgamma, otypes=[np.float64])(y + 1.0) if y.size else y
    return _mean(lgamma + mu - y * np.log(mu), weight)


def tweedie_nloglik(y_true: np.ndarray, mean: np.ndarray, weight: np.ndarray | None = None,
                    variance_power: float = 1.5) -> float:
    """XGBoost's ``tweedie-nloglik@rho``: ``-y mu^(1-rho)/(1-rho) + mu^(2-rho)/(2-rho)``, the
    Tweedie log-likelihood without its normalising term (infinite at rho = 1, as XGBoost's)."""
    y = np.asarray(y_true, dtype=np.float64)
    log_mu = np.log(np.asarray(mean, dtype=np.float64))
    rho = variance_power
    with np.errstate(divide="ignore", invalid="ignore"):
        row = -y * np.exp((1.0 - rho) * log_mu) / (1.0 - rho) + np.exp((2.0 - rho) * log_mu) / (2.0 - rho)
    return _mean(row, weight)


def gamma_nloglik(y_true: np.ndarray, mean: np.ndarray, weight: np.ndarray | None = None) -> float:
    """XGBoost's ``gamma-nloglik``: the gamma log-likelihood at dispersion 1, ``y/mu + log(mu)``,
    the mean floored at 1e-6."""
    y = np.asarray(y_true, dtype=np.float64)
    mu = np.maximum(np.asarray(mean, dtype=np.float64), 1e-6)
    return _mean(y / mu + np.log(mu), weight)


def gamma_deviance(y_true: np.ndarray, mean: np.ndarray, weight: np.ndarray | None = None) -> float:
    """XGBoost's ``gamma-deviance``: ``2 (log(mu/y) + y/mu - 1)``, both shifted by 1e-6."""
    y = np.asarray(y_true, dtype=np.float64) + 1e-6
    mu = np.asarray(mean, dtype=np.float64) + 1e-6
    return 2.0 * _mean(np.log(mu / y) + y / mu - 1.0, weight)


def mphe(y_true: np.ndarray, predicted: np.ndarray, weight: np.ndarray | None = None, slope: float = 1.0) -> float:
    """XGBoost's mean pseudo-Huber error, ``slope^2 (sqrt(1 + (e/slope)^2) - 1)`` per row."""
    diff = np.asarray(y_true, dtype=np.float64) - np.asarray(predicted, dtype=np.float64)
    return _mean(slope * slope * (np.sqrt(1.0 + (diff / slope) ** 2) - 1.0), weight)


def evaluate(metric: str, y_true: np.ndarray, prediction: np.ndarray, weight: np.ndarray | None = None, *,
             huber_slope: float = 1.0) -> float:
    """``prediction`` as ``Objective.predict`` gives it: probability of class 1 (auc, logloss,
    error), class probabilities (mlogloss, merror, accuracy) or values (rmse, mae, mphe, and the
    mean for poisson-nloglik, tweedie-nloglik@rho, gamma-nloglik, gamma-deviance).
    ``weight``: optional sample weights; ``huber_slope``: mphe's (as XGBoost, the run's)."""
    if metric == "accuracy":
        return accuracy(y_true, np.argmax(prediction, axis=1), weight)
    if metric == "mphe":
        return mphe(y_true, prediction, weight, huber_slope)
    family, _, power = metric.partition("@")
    if family == "tweedie-nloglik" and power:
        try:
            rho = float(power)
        except ValueError:
            raise ValueError(f"unknown metric {metric!r}") from None
        return tweedie_nloglik(y_true, prediction, weight, rho)
    try:
        function = _BY_NAME[metric]
    except KeyError:
        raise ValueError(f"unknown metric {metric!r}") from None
    return function(y_true, prediction, weight)


_BY_NAME = {"auc": roc_auc, "logloss": logloss, "error": error, "mlogloss": mlogloss, "merror": merror,
            "rmse": rmse, "mae": mae, "poisson-nloglik": poisson_nloglik, "gamma-nloglik": gamma_nloglik,
            "gamma-deviance": gamma_deviance}

#: Whether a larger value of the metric is better (for early stopping).
HIGHER_IS_BETTER = {"auc": True, "accuracy": True, "logloss": False, "error": False, "mlogloss": False,
                    "merror": False, "rmse": False, "mae": False, "poisson-nloglik": False, "tweedie-nloglik": False,
                    "gamma-deviance": False, "gamma-nloglik": False, "mphe": False}


def higher_is_better(metric: str) -> bool:
    """Whether a larger value is better; ``tweedie-nloglik@1.3`` as its family."""
    return HIGHER_IS_BETTER[metric.partition("@")[0]]


def average_ranks(x: np.ndarray) -> np.ndarray:
    """0-based ranks, tied values sharing the average of their ranks."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return (starts + (counts - 1) / 2)[inverse]


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Rank correlation with average ranks for ties; 0 when either side is constant."""
    if a.size < 2:
        return float("nan")
    ra, rb = average_ranks(np.asarray(a)), average_ranks(np.asarray(b))
    if ra.std() == 0 or rb.std() == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])
