"""How a request's outcome is written in the answer: per row its id, status, score, predicted
class or value, who scored it and why not; per answer the model, version and protocol, and
for enclave protocols what the enclaves were ("simulated": no hardware isolation).

Scores are the model's outputs as ``teeboost predict`` writes them: the probability of the
positive class (``classes[1]``) for a binary model, of every class for a multiclass one, the
value for a regressor; the prediction is the class ``predict`` would name (binary: the
positive one when its probability is at least 0.5).
"""

from __future__ import annotations

import numpy as np

from .fallback import Outcome, RowOutcome
from .scorer import Scorer, enclaves_of, plain_label

__all__ = ["score_is", "answer", "count"]


def score_is(scorer: Scorer) -> str:
    if scorer.objective == "binary":
        return f"probability of class {plain_label(scorer.classes[1])!r} (the positive class)"
    if scorer.objective == "multiclass":
        return "probability of each class"
    if scorer.objective == "poisson":
        return "expected count"
    if scorer.objective in ("tweedie", "gamma"):
        return "expected amount"
    return "predicted value"


def _row(row_id: str, row: RowOutcome, scorer: Scorer, classes: list) -> dict:
    score = prediction = None
    if row.values is not None:
        values = np.asarray(row.values, dtype=np.float64).ravel()
        if scorer.objective == "binary":
            score = float(values[0])
            prediction = classes[1] if score >= 0.5 else classes[0]
        elif scorer.objective == "multiclass":
            score = {str(c): float(p) for c, p in zip(classes, values)}
            prediction = classes[int(np.argmax(values))]
        else:
            score = prediction = float(values[0])
    return {"id": row_id, "status": row.status, "score": score, "prediction": prediction,
            "scored_by": row.scored_by, "reason": row.reason, "notes": row.notes}


def count(outcome: Outcome) -> dict[str, int]:
    counts = {"scored": 0, "fallback": 0, "error": 0}
    for row in outcome.rows:
        counts[row.status] += 1
    return counts


def answer(scorer: Scorer, ids: list[str], outcome: Outcome) -> dict:
    """The 200 body of ``POST /v1/score``."""
    classes = [plain_label(c) for c in scorer.classes]
    return {
        "model": scorer.name,
        "version": scorer.version,
        "protocol": scorer.protocol,
        "enclaves": enclaves_of(scorer),
        "objective": scorer.objective,
        "score_is": score_is(scorer),
        "classes": classes,
        "positive_class": classes[1] if scorer.objective == "binary" else None,
        "counts": count(outcome),
        "rows": [_row(i, row, scorer, classes) for i, row in zip(ids, outcome.rows)],
    }
