"""What a row the model could not score gets: an error saying why, or a named active-only
model's score, flagged. Never silent: every row says how it was scored.

Each served model has a policy, ``on_unmatched``:

- ``"error"``: the row's status is ``"error"``, with the reason (e.g. a passive party holds no
  such id). The other rows of the request are answered as usual (HTTP 200). When a passive
  party is down no row can be scored, and the request as a whole fails: ``PeerDown`` (HTTP 503
  naming the party).
- ``"fallback"``: the fallback model (trained on the active party's columns only, served under
  its own name) scores the row; its status is ``"fallback"``, ``scored_by`` names the fallback
  model and version and ``reason`` says why the federated model did not. A peer that is down
  sends every row there.

Both scorers get the same request values, each coded by its own vocabulary.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from starlette.concurrency import run_in_threadpool

from ..errors import ConfigError
from .rows import encode
from .scorer import PeerUnavailable, ScoredRows, Scorer

__all__ = ["ON_UNMATCHED", "PeerDown", "RowOutcome", "Outcome", "score_rows", "score_rows_async", "check_fallback",
           "active_columns"]

ON_UNMATCHED = ("error", "fallback")
INLINE_ROWS = 64  # requests up to this many rows are checked and coded on the event loop


class PeerDown(Exception):
    """No row was scored because a passive party is down, and no fallback is configured."""

    def __init__(self, model: str, cause: PeerUnavailable) -> None:
        super().__init__(f"{cause}; no row of this request was scored by model {model!r}, which has no fallback "
                         "model (serve one with --fallback NAME=DIR, or [serving] fallback_model)")
        self.party = cause.party


@dataclass
class RowOutcome:
    status: str  # "scored", "fallback" or "error"
    values: np.ndarray | None  # the scorer's outputs for the row (probabilities or value)
    scored_by: str | None  # "name@version"
    reason: str | None
    notes: list[str] = field(default_factory=list)


@dataclass
class Outcome:
    rows: list[RowOutcome]
    seconds: float  # in the model's scorer (the fallback's excluded)
    traffic: dict = field(default_factory=dict)
    peer_down: str | None = None  # the party that was down, when every row fell back for it


def label(scorer: Scorer) -> str:
    return f"{scorer.name}@{scorer.version}"


def active_columns(scorer: Scorer) -> list[str]:
    """The columns of a request row that are the active party's own."""
    parties = getattr(scorer, "party_columns", None)
    return list(parties[0][1]) if parties else list(scorer.feature_names)


def check_fallback(main: Scorer, fallback: Scorer) -> None:
    """A fallback answers for the model: the same objective and classes, and columns every
    request row for the model carries as the active party's own."""
    where = f"model {main.name!r} cannot fall back to {fallback.name!r}"
    if fallback.name == main.name:
        raise ConfigError(f"{where}: a model cannot be its own fallback")
    if getattr(fallback, "kind", "federated") != "local" or len(getattr(fallback, "party_columns", None) or [()]) > 1:
        raise ConfigError(f"{where}: a fallback model is trained on the active party's columns only, and "
                          f"{fallback.name!r} has passive parties")
    if (fallback.objective, list(fallback.classes)) != (main.objective, list(main.classes)):
        raise ConfigError(f"{where}: it predicts {fallback.objective} {list(fallback.classes)}, the model "
                          f"{main.objective} {list(main.classes)}")
    missing = [c for c in fallback.feature_names if c not in active_columns(main)]
    if missing:
        raise ConfigError(f"{where}: it needs column(s) {', '.join(map(repr, missing))}, which are not the active "
                          f"party's columns of {main.name!r} ({', '.join(active_columns(main))})")


def _fallback_rows(outcomes: list[RowOutcome], which: list[int], ids: list[str], rows: list[dict],
                   fallback: Scorer) -> None:
    encoded = encode([ids[i] for i in which], [rows[i] for i in which], fallback, model=f"model {fallback.name!r}",
                     extra_ok=True)
    scored = fallback.score([ids[i] for i in which], encoded.features)
    for k, i in enumerate(which):
        reason = scored.reasons[k]
        if reason is None:
            outcomes[i] = RowOutcome("fallback", scored.values[k], label(fallback), outcomes[i].reason,
                                     encoded.notes[k])
        else:
            outcomes[i] = RowOutcome("error", None, None, f"{outcomes[i].reason}; the fallback model "
                                                           f"{label(fallback)} could not score it either: {reason}")


def score_rows(main: Scorer, fallback: Scorer | None, on_unmatched: str, ids: list[str], rows: list[dict]) -> Outcome:
    """Every row's outcome. ``rows``: each row's ``{column: value}``, as the request gave them
    (checked against ``main``'s columns here: ``RowsRejected`` names the first bad field)."""
    scoring = _Scoring(main, fallback, on_unmatched, ids, rows)
    start = time.perf_counter()
    try:
        scored = main.score(scoring.held_ids, scoring.held_features) if scoring.held else None
    except PeerUnavailable as exc:
        scored = exc
    scoring.take(scored, time.perf_counter() - start)
    if scoring.unscored:
        _fallback_rows(scoring.outcomes, scoring.unscored, ids, rows, fallback)
    return scoring.outcome()


async def score_rows_async(main: Scorer, fallback: Scorer | None, on_unmatched: str, ids: list[str],
                           rows: list[dict]) -> Outcome:
    """``score_rows`` for a request handler: a scorer with ``score_async`` is awaited on the
    event loop (no worker thread per request); large requests, other scorers and fallback rows
    are scored in a worker thread."""
    if not hasattr(main, "score_async") or len(rows) > INLINE_ROWS:
        return await run_in_threadpool(score_rows, main, fallback, on_unmatched, ids, rows)
    scoring = _Scoring(main, fallback, on_unmatched, ids, rows)
    start = time.perf_counter()
    try:
        scored = await main.score_async(scoring.held_ids, scoring.held_features) if scoring.held else None
    except PeerUnavailable as exc:
        scored = exc
    scoring.take(scored, time.perf_counter() - start)
    if scoring.unscored:
        await run_in_threadpool(_fallback_rows, scoring.outcomes, scoring.unscored, ids, rows, fallback)
    return scoring.outcome()


class _Scoring:
    """One request's rows: coded for ``main``, then the scorer's answer taken, then which rows
    the fallback model scores (``unscored``)."""

    def __init__(self, main: Scorer, fallback: Scorer | None, on_unmatched: str, ids: list[str],
                 rows: list[dict]) -> None:
        self.main = main
        self.encoded = encode(ids, rows, main, model=f"model {main.name!r}")
        self.use_fallback = on_unmatched == "fallback" and fallback is not None
        self.outcomes = [RowOutcome("error", None, None, reason) for reason in self.encoded.unheld]
        self.held = [i for i, reason in enumerate(self.encoded.unheld) if reason is None]
        self.held_ids = [ids[i] for i in self.held]
        self.held_features = self.encoded.features[self.held]
        self.unscored: list[int] = []
        self.seconds, self.traffic, self.peer_down = 0.0, {}, None

    def take(self, scored: "ScoredRows | PeerUnavailable | None", seconds: float) -> None:
        """The scorer's rows, or the peer that was down (``PeerDown`` without a fallback)."""
        self.seconds = seconds
        if isinstance(scored, PeerUnavailable):
            if not self.use_fallback:
                raise PeerDown(self.main.name, scored) from None
            self.peer_down = scored.party
            for i in self.held:
                self.outcomes[i] = RowOutcome("error", None, None, str(scored))
        elif scored is not None:
            self.traffic = scored.traffic
            for k, i in enumerate(self.held):
                if scored.reasons[k] is None:
                    self.outcomes[i] = RowOutcome("scored", scored.values[k], label(self.main), None,
                                                  self.encoded.notes[i])
                else:
                    self.outcomes[i] = RowOutcome("error", None, None, scored.reasons[k])
        if self.use_fallback:
            self.unscored = [i for i, o in enumerate(self.outcomes) if o.status == "error"]

    def outcome(self) -> Outcome:
        return Outcome(self.outcomes, self.seconds, self.traffic, self.peer_down)
