"""Held-out metrics, dependency-free so the core install stays small."""

from __future__ import annotations

import numpy as np

__all__ = ["roc_auc", "accuracy", "rmse", "evaluate", "spearman", "average_ranks"]


def roc_auc(y_true: np.ndarray, score: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney U with average ranks for ties)."""
    y_true = np.asarray(y_true).astype(bool)
    score = np.asarray(score, dtype=np.float64)
    n_pos = int(y_true.sum())
    n_neg = y_true.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(score, kind="mergesort")
    sorted_scores = score[order]
    ranks = np.empty(score.size, dtype=np.float64)
    # average rank within each run of tied scores
    boundaries = np.flatnonzero(np.diff(sorted_scores)) + 1
    starts = np.concatenate(([0], boundaries))
    ends = np.concatenate((boundaries, [score.size]))
    avg = (starts + ends + 1) / 2.0  # 1-based ranks
    ranks[order] = np.repeat(avg, ends - starts)
    u = ranks[y_true].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def accuracy(y_true: np.ndarray, predicted_class: np.ndarray) -> float:
    return float(np.mean(np.asarray(y_true) == np.asarray(predicted_class)))


def rmse(y_true: np.ndarray, predicted: np.ndarray) -> float:
    diff = np.asarray(y_true, dtype=np.float64) - np.asarray(predicted, dtype=np.float64)
    return float(np.sqrt(np.mean(diff * diff)))


def evaluate(metric: str, y_true: np.ndarray, prediction: np.ndarray) -> float:
    """``prediction``: probability of class 1 (auc), class probabilities (accuracy) or values."""
    if metric == "auc":
        return roc_auc(y_true, prediction)
    if metric == "accuracy":
        return accuracy(y_true, np.argmax(prediction, axis=1))
    if metric == "rmse":
        return rmse(y_true, prediction)
    raise ValueError(f"unknown metric {metric!r}")


#: Whether a larger value of the metric is better (for early stopping).
HIGHER_IS_BETTER = {"auc": True, "accuracy": True, "rmse": False}


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
