"""What the scoring service asks of a model: score rows now, say which rows it could not.

Two kinds implement it: ``LocalScorer`` (a model directory holding every party's files, one
operator, rows carry every column) and ``FederatedScorer`` (the active party's model with its
passive parties online over gRPC; rows carry the active party's columns and an id). The
service decides what happens to a row a scorer could not score (an error, or a named
active-only model, ``teeboost.serving.fallback``), so that decision is the same for both.

Beyond the protocol, a scorer may offer what the service then reports (looked up with
``getattr``, so a scorer without them is still a scorer):

- ``health() -> dict``: its peers' reachability, shown per model by ``GET /healthz``;
- ``budget() -> dict[str, float]``: privacy or quota budget used, exported as a gauge;
- ``enclaves: str``: "simulated" or "hardware" for an enclave protocol (unsaid: "simulated",
  the only backend this build has, so an enclave model is never reported as protected);
- ``party_columns: list[tuple[str, list[str]]]``: rows carry several parties' columns
  (``LocalScorer``); a row giving none of a passive party's columns is one that party does
  not hold, and is left unscored as the federated scorer leaves an id a party lacks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..errors import PeerUnavailable as _TransportUnavailable
from ..policy import TEE_PROTOCOLS

__all__ = ["ScoredRows", "Scorer", "PeerUnavailable", "enclaves_of", "plain_label"]


class PeerUnavailable(_TransportUnavailable):
    """A passive party did not answer in time (down, restarting, or unreachable): no row of the
    request was scored by the federated model."""

    def __init__(self, party: str, detail: str) -> None:
        super().__init__(f"passive party {party!r} is unavailable: {detail}")
        self.party = party


@dataclass(frozen=True)
class ScoredRows:
    """``values``: (n, width) float64 model outputs (probabilities of each class for a
    classifier, width 1 for binary = probability of ``classes[1]``; values for a regressor),
    NaN where a row was not scored. ``reasons[i]`` says why row i was not scored (None: scored)."""

    values: np.ndarray
    reasons: list[str | None]
    traffic: dict = field(default_factory=dict)  # bytes and messages between the parties, if any

    @property
    def scored(self) -> np.ndarray:
        return np.array([r is None for r in self.reasons], dtype=bool)


class Scorer(Protocol):
    name: str  # the name the service knows the model by
    version: str  # the model digest's first 16 hex digits
    protocol: str  # the protocol it was trained with ("strict", "ntee", ...)
    objective: str  # "binary", "multiclass", "regression", ...
    classes: list  # class labels (classifiers), [] for regressors
    feature_names: list[str]  # columns a request row carries, in order
    vocabularies: dict  # categorical columns: name -> Vocabulary (teeboost.categories)

    def score(self, ids: list[str], features: np.ndarray) -> ScoredRows:
        """``features``: (n, len(feature_names)) float64 as ``PartyData.conform`` makes them
        (categories as codes, missing as NaN). Thread-safe; may batch with concurrent callers.
        Raises ``PeerUnavailable`` when no row could be scored because a party is down."""

    def close(self) -> None: ...


def enclaves_of(scorer: Scorer) -> str | None:
    """What the enclaves of a scorer's protocol are ("simulated" unless it says otherwise);
    None for protocols without enclaves."""
    if scorer.protocol not in TEE_PROTOCOLS:
        return None
    return getattr(scorer, "enclaves", None) or "simulated"


def plain_label(label):
    """A class label as JSON writes it (numpy scalars become Python numbers)."""
    return label.item() if isinstance(label, np.generic) else label
