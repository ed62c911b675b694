"""Stage 2: from an order of samples to guessed raw values (the seed paper's four methods).

(i) random guess knowing min and max; (ii) attack with min-max: value by rank, linearly
between min and max; (iii) random guess from an approximate distribution; (iv) attack with the
approximate distribution: the value at the sample's rank quantile. The approximate
distribution is the deciles of an auxiliary sample (disjoint from the training rows), with
optional multiplicative noise, interpolated linearly.
"""

from __future__ import annotations

import numpy as np

__all__ = ["METHODS", "approximate_deciles", "guess", "accuracy_by_tolerance"]

METHODS = ("random_minmax", "attack_minmax", "random_approx", "attack_approx")


def approximate_deciles(aux: np.ndarray, *, noise: float = 0.0, rng: np.random.Generator) -> np.ndarray:
    values = aux[~np.isnan(aux)]
    deciles = np.quantile(values, np.linspace(0, 1, 11))
    if noise:
        deciles = deciles * (1 + noise * rng.normal(size=11))
    return np.maximum.accumulate(deciles)


def _inverse_cdf(deciles: np.ndarray, q: np.ndarray) -> np.ndarray:
    return np.interp(q, np.linspace(0, 1, deciles.size), deciles)


def _ranks(scores: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    order = np.lexsort((rng.random(scores.size), scores))  # ties broken at random
    ranks = np.empty(scores.size)
    ranks[order] = np.arange(scores.size)
    return ranks


def guess(method: str, scores: np.ndarray, *, low: float, high: float, deciles: np.ndarray,
          rng: np.random.Generator, integer: bool) -> np.ndarray:
    n = scores.size
    if method == "random_minmax":
        values = rng.uniform(low, high, n)
    elif method == "attack_minmax":
        values = low + _ranks(scores, rng) / max(n - 1, 1) * (high - low)
    elif method == "random_approx":
        values = _inverse_cdf(deciles, rng.random(n))
    elif method == "attack_approx":
        values = _inverse_cdf(deciles, (_ranks(scores, rng) + 0.5) / n)
    else:
        raise ValueError(f"unknown method {method!r}")
    return np.round(values) if integer else values


def accuracy_by_tolerance(guesses: np.ndarray, truth: np.ndarray, tolerances: list[float]) -> list[float]:
    error = np.abs(guesses - truth)
    return [float((error <= t).mean()) for t in tolerances]
