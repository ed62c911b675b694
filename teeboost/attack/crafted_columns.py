"""Crafted columns: a malicious passive host's attack on the labels through its own splits.

The host cannot change the protocol, only its own data file. It appends columns made to win
splits exactly when a target row's gradient (its label) pulls one way, then reads which of
them won from whatever split records reach it after the run.

* Missing copies (``craft_missing_copies``): copy k of an own numeric column with target row
  k set to missing. A numeric split sends missing rows to the better side however few they
  are, so copy k beats the real column (same cut, one row moved) exactly where row k's
  gradient disagrees with its side. Positive rows (label 1) carry gradients about ten times
  larger, so most winning copies name a positive row. With ``group_size`` > 1 each copy is
  missing at a group of targets instead, regrouped from copy to copy, so that copies differ
  in enough rows to pass strict mode's near-duplicate refusal; a missing group still picks
  its side alone, and the copies a positive row sits in win more often.
* Category groups (``craft_category_columns``): made-up categorical columns where each group
  of ``group_size`` target rows has its own category, regrouped in every column. A
  gradient-sorted subset (``category_subsets``) sends a group holding a positive row left,
  and the split's category mask says so. Groups under ``MIN_CATEGORY_ROWS`` (10) or
  ``min_samples_leaf`` rows are never split off, so ``group_size=1`` learns nothing.

What the attacker is assumed to know and hold (and nothing more):

* its own data file, the crafted columns included, and which row each crafted column marks;
* every file its host stores or receives during and after a run (model directory,
  checkpoint directory, audit log, its own stdout/logs): ``host_view.read_passive_host_view``
  reads them all, structured or not, and counts what it cannot read (sealed or encrypted blobs);
* the labels of about 1% of rows that are NOT targets (say, its own customers known to have
  defaulted and a few known not to), used only to orient and calibrate the baseline;
* never the labels of the target rows, and never anything of the active party's.

``score_targets`` adds up two things per target: the evidence, a log-likelihood ratio from a
two-component mixture fitted by EM over the targets without their labels (wins of the copies
holding a target are Poisson, left-going category groups binomial), and the prior log-odds
from the baseline (the label predictor the party builds from its own unmodified columns,
oriented on the known rows, then re-oriented on the targets the evidence names: ~1% of rows
orient five columns badly). With no record naming a crafted column the score is the
baseline's, unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from ..categories import CategoricalColumn, Vocabulary
from ..core.split import MAX_CATEGORY_BINS
from .host_view import FoundRecord, HostView

__all__ = [
    "Crafted", "TargetScores", "AttackReport", "MISSING",
    "craft_missing_copies", "craft_category_columns", "own_column_baseline",
    "known_label_rows", "score_targets", "target_auc", "attack_report",
]

#: The marker of a missing-copy column: its target row is the one left empty.
MISSING = "<missing>"


# ---------------------------------------------------------------- crafting

@dataclass(frozen=True)
class Crafted:
    """What the attacker remembers about its crafted columns.

    ``columns`` maps each crafted column to its markers and the rows (positions in the
    frame) each marks: ``MISSING`` for a missing copy, a category name for a group.
    ``targets`` are the target rows in the order scores are returned; ``feature_names`` the
    party's feature columns in file order (to name records that carry only an index)."""

    kind: str  # "missing" or "category"
    targets: np.ndarray
    columns: dict[str, dict[str, np.ndarray]]
    feature_names: tuple[str, ...]
    base: str | None = None
    vocabularies: dict[str, Vocabulary] = field(default_factory=dict)  # category: code order as fitted on the file

    @property
    def names(self) -> list[str]:
        return list(self.columns)


def _target_rows(frame: pd.DataFrame, targets: Sequence, id_column: str | None) -> np.ndarray:
    """Targets as row positions: text targets are ids (teeboost compares ids as text) looked
    up in ``id_column``, whole numbers are positions."""
    targets = list(targets.tolist() if isinstance(targets, np.ndarray) else targets)
    if targets and all(isinstance(t, str) for t in targets):
        if id_column is None:
            raise ValueError("targets given as ids: name the id column (id_column=...)")
        where = {str(v).strip(): i for i, v in enumerate(frame[id_column].to_numpy())}
        missing = [t for t in targets if t.strip() not in where]
        if missing:
            raise ValueError(f"target id(s) not in column {id_column!r}: {missing[:5]}")
        rows = np.array([where[t.strip()] for t in targets], dtype=np.int64)
    else:
        rows = np.asarray(targets, dtype=np.int64).reshape(-1)
        if rows.size and (rows.min() < 0 or rows.max() >= len(frame)):
            raise ValueError(f"target positions must lie in 0..{len(frame) - 1}")
    if len(set(rows.tolist())) != rows.size:
        raise ValueError("targets repeat")
    return rows


def _fresh_names(frame: pd.DataFrame, stem: str, count: int) -> list[str]:
    taken = {str(c) for c in frame.columns}
    names = [f"{stem}_{k}" for k in range(count)]
    clash = [n for n in names if n in taken]
    if clash:
        raise ValueError(f"column(s) {clash[:3]} already exist; choose another prefix")
    return names


def _features(frame: pd.DataFrame, id_column: str | None, label: str | None) -> tuple[str, ...]:
    return tuple(str(c) for c in frame.columns if str(c) not in (id_column, label))


def craft_missing_copies(frame: pd.DataFrame, column: str, targets: Sequence, *, id_column: str | None = None,
                         prefix: str | None = None, group_size: int = 1, n_copies: int | None = None,
                         min_apart: int = 10, seed: int = 0) -> tuple[pd.DataFrame, Crafted]:
    """The frame with copies of ``column``, each missing only at its target row(s).

    ``group_size`` 1: copy k is missing at target k alone. Larger: each of ``n_copies``
    (default: one per target) is missing at a random group of ``group_size`` targets, drawn
    so that any two copies (and each copy and the column) differ in at least ``min_apart``
    rows: strict mode refuses columns that differ in fewer than max(min_samples_leaf, 10)
    rows, and a group of missing rows still picks its side alone, however few they are.
    Targets are row positions, or ids (text) of ``id_column``; name ``id_column`` either way,
    so that ``Crafted.feature_names`` (which name index-only records) leave it out.

    Targets whose own value is already missing would be no different in the copy, so they
    are refused: pick others."""
    rows = _target_rows(frame, targets, id_column)
    values = pd.to_numeric(frame[column], errors="raise").to_numpy(dtype=np.float64, na_value=np.nan)
    empty = rows[np.isnan(values[rows])]
    if empty.size:
        raise ValueError(f"{empty.size} target(s) already have no {column!r} (e.g. row {int(empty[0])}): pick others")
    groups = [np.array([r]) for r in rows] if group_size == 1 else \
        _spread_groups(rows, group_size, n_copies or rows.size, min_apart, np.random.default_rng(seed))
    names = _fresh_names(frame, prefix or column, len(groups))
    copies = {}
    for name, members in zip(names, groups):
        copy = values.copy()
        copy[members] = np.nan
        copies[name] = copy
    out = pd.concat([frame, pd.DataFrame(copies, index=frame.index)], axis=1)
    crafted = Crafted("missing", rows, {n: {MISSING: np.sort(g)} for n, g in zip(names, groups)},
                      _features(out, id_column, None), base=column)
    return out, crafted


def _spread_groups(rows: np.ndarray, size: int, count: int, min_apart: int, rng) -> list[np.ndarray]:
    """``count`` groups of ``size`` rows, each row in about as many groups, any two groups
    sharing at most ``size - ceil(min_apart / 2)`` rows (so they differ in >= min_apart)."""
    if size > rows.size or size < (min_apart + 1) // 2:
        raise ValueError(f"group_size {size} must lie in {(min_apart + 1) // 2}..{rows.size} targets")
    most = size - (min_apart + 1) // 2
    groups: list[np.ndarray] = []
    pool: list[int] = []
    tries = 0
    while len(groups) < count:
        if len(pool) < size:
            pool += rng.permutation(rows).tolist()
        candidate = np.array(pool[:size])
        if len(set(candidate.tolist())) == size and all(np.intersect1d(candidate, g).size <= most for g in groups):
            groups.append(candidate)
            del pool[:size]
        else:
            pool = rng.permutation(pool).tolist()
            tries += 1
            if tries > 1000 * count:
                raise ValueError("cannot draw that many groups that far apart: fewer copies or larger groups")
    return groups


def craft_category_columns(frame: pd.DataFrame, targets: Sequence, group_size: int = 1, n_columns: int = 40, *,
                           id_column: str | None = None, base: str | None = "age", n_common: int = 4,
                           prefix: str = "segment", seed: int = 0, max_bin: int = 32) -> tuple[pd.DataFrame, Crafted]:
    """The frame with ``n_columns`` made-up categorical (text) columns: in each, the targets are
    shuffled into groups of ``group_size`` rows, one category per group ("t000", ...); every
    other row has one of ``n_common`` common categories (quantiles of the own column ``base``,
    so the column is worth splitting on; random without ``base``). A column holds at most as
    many groups as bins remain: the run's ``max_bin`` (the passive party learns it with the
    run's parameters; 62 at most) minus ``n_common``, since rarer codes share the last bin;
    targets beyond that get a common category in that column (each column a new random draw).
    """
    if group_size < 1 or n_columns < 1 or not 1 <= n_common < MAX_CATEGORY_BINS:
        raise ValueError("group_size and n_columns must be >= 1, n_common 1..61")
    rows = _target_rows(frame, targets, id_column)
    rng = np.random.default_rng(seed)
    n = len(frame)
    if base is not None:
        ranked = pd.to_numeric(frame[base], errors="coerce").rank(method="first")
        common = pd.qcut(ranked, n_common, labels=False).to_numpy()
        common = np.where(np.isnan(common), rng.integers(0, n_common, n), common).astype(int)
    else:
        common = rng.integers(0, n_common, n)
    capacity = min(max_bin, MAX_CATEGORY_BINS) - n_common  # bins left for groups
    if capacity < 1:
        raise ValueError(f"max_bin {max_bin} leaves no bin for a group beside {n_common} common categories")
    names = _fresh_names(frame, prefix, n_columns)
    columns, marks = {}, {}
    for name in names:
        column = np.array([f"c{k}" for k in common], dtype=object)
        shuffled = rng.permutation(rows)
        groups = [shuffled[i:i + group_size] for i in range(0, shuffled.size, group_size)][:capacity]
        marks[name] = {}
        for g, members in enumerate(groups):
            column[members] = f"t{g:03d}"
            marks[name][f"t{g:03d}"] = np.sort(members)
        columns[name] = column
    out = pd.concat([frame, pd.DataFrame(columns, index=frame.index)], axis=1)
    vocabularies = {name: Vocabulary.fit(CategoricalColumn.from_series(out[name])) for name in names}
    return out, Crafted("category", rows, marks, _features(out, id_column, None), base=base,
                        vocabularies=vocabularies)


# ---------------------------------------------------------------- what the host holds


def known_label_rows(labels: np.ndarray, targets: np.ndarray, fraction: float = 0.01, seed: int = 0,
                     min_each: int = 3) -> np.ndarray:
    """The rows whose labels the attacker knows (simulated): a random ``fraction`` of the
    non-target rows, topped up to ``min_each`` rows of each label (its own customers known to
    have defaulted, and some known not to). Never a target."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    candidates = np.setdiff1d(np.arange(labels.size), targets)
    chosen = set(rng.choice(candidates, max(2, int(round(fraction * labels.size))), replace=False).tolist())
    for value in (0, 1):
        have = sum(1 for r in chosen if labels[r] == value)
        pool = np.setdiff1d(candidates[labels[candidates] == value], list(chosen))
        if have < min_each and pool.size:
            chosen.update(rng.choice(pool, min(min_each - have, pool.size), replace=False).tolist())
    return np.array(sorted(chosen), dtype=np.int64)


def _own_matrix(own: pd.DataFrame | np.ndarray) -> np.ndarray:
    if isinstance(own, pd.Series):
        own = own.to_frame()
    if isinstance(own, pd.DataFrame):
        return np.column_stack([pd.to_numeric(own[c], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
                                for c in own.columns])
    own = np.asarray(own, dtype=np.float64)
    return own.reshape(-1, 1) if own.ndim == 1 else own


def own_column_baseline(own: pd.DataFrame | np.ndarray, known_rows: np.ndarray, known_labels: np.ndarray) -> np.ndarray:
    """The party's label predictor from its own unmodified columns and the known rows alone:
    each column's rank (missing: the middle), weighted by how well it orders the known rows
    (its AUC there minus 0.5, so an inverse column counts inversely). With ~1% labelled rows a
    weighted rank sum is steadier than a fitted model."""
    matrix = _own_matrix(own)
    known_rows = np.asarray(known_rows, dtype=np.int64)
    known_labels = np.asarray(known_labels, dtype=np.float64)
    if not (known_labels == 1).any() or not (known_labels == 0).any():
        raise ValueError("the known rows need at least one label 1 and one label 0 to orient the baseline")
    ranks = np.column_stack([pd.Series(matrix[:, j]).rank(pct=True).fillna(0.5).to_numpy()
                             for j in range(matrix.shape[1])])
    weights = np.array([target_auc(ranks[known_rows, j], known_labels) - 0.5 for j in range(matrix.shape[1])])
    return (ranks - 0.5) @ np.nan_to_num(weights)


@dataclass
class TargetScores:
    """Per target (in ``Crafted.targets`` order): the attack's score, the baseline's, and the
    evidence found (won records; for category groups, how often the group went left)."""

    scores: np.ndarray
    baseline: np.ndarray
    wins: np.ndarray  # records on the target's crafted column(s)
    left: np.ndarray  # category: records whose mask sent the target's group left
    seen: np.ndarray  # category: records on a column holding the target's group
    records_on_crafted: int = 0
    method: str = "baseline"
    # log-likelihood the two-rate mixture gains over one rate (nats); no test of a closed channel:
    # overdispersed noise gains as much (trials with category_subsets off), so it is only reported
    gain: float = 0.0


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-4, 1 - 1e-4)
    return np.log(p / (1 - p))


def _prior_log_odds(baseline: np.ndarray, known_rows: np.ndarray | None, known_labels: np.ndarray | None) -> np.ndarray:
    """Baseline scores -> log-odds, calibrated on the known rows (a one-feature logistic fit,
    shrunk; without known rows, the standardised score around log-odds of 10%)."""
    z = (baseline - baseline.mean()) / (baseline.std() or 1.0)
    if known_rows is None or known_labels is None or len(known_rows) < 2:
        return z + math.log(0.1 / 0.9)
    from sklearn.linear_model import LogisticRegression

    y = np.asarray(known_labels, dtype=int)
    if y.min() == y.max():
        return z + float(_logit(np.array([y.mean()]))[0])
    fit = LogisticRegression(C=1.0).fit(z[known_rows].reshape(-1, 1), y)
    return fit.intercept_[0] + fit.coef_[0, 0] * z


def _mixture(prior: float, log_density, update, pooled: float, start: tuple[float, float],
             rounds: int = 300) -> tuple[np.ndarray, float]:
    """EM over the targets without their labels: two rates, one per label, under a flat prior
    (the base rate of the known rows; the own-column baseline joins only afterwards, since a
    baseline oriented on a handful of rows can be inverted and would drag EM to one rate).
    Returns each target's log-likelihood ratio (label 1 : label 0) and the log-likelihood the
    mixture gains over a single rate (``pooled``: that single rate's log-likelihood)."""
    rates = start
    for _ in range(rounds):
        f0, f1 = log_density(rates)
        post = 1 / (1 + np.exp(-(prior + f1 - f0)))
        new = update(post)
        if np.allclose(new, rates, rtol=1e-9, atol=1e-12):
            break
        rates = new
    f0, f1 = log_density(rates)
    p = 1 / (1 + math.exp(-prior))
    mixed = np.logaddexp(math.log(p) + f1, math.log1p(-p) + f0).sum()
    return f1 - f0, float(mixed - pooled)


def _poisson_evidence(prior: float, wins: np.ndarray) -> tuple[np.ndarray, float]:
    """Wins of label-1 targets ~ Poisson(l1), of label-0 ones ~ Poisson(l0 <= l1)."""
    def log_density(rates):
        l0, l1 = rates
        return wins * math.log(l0) - l0, wins * math.log(l1) - l1

    def update(post):
        l1 = float((post * wins).sum() / max(post.sum(), 1e-9))
        l0 = max(float(((1 - post) * wins).sum() / max((1 - post).sum(), 1e-9)), 1e-3)
        return (l0, max(l1, l0))

    mean = max(float(wins.mean()), 1e-3)
    low, high = np.quantile(wins, [0.8, 0.95])
    l0 = max(float(wins[wins <= low].mean()), 1e-2)
    return _mixture(prior, log_density, update, float((wins * math.log(mean) - mean).sum()),
                    (l0, max(float(wins[wins >= high].mean()), 2 * l0 + 0.5)))


def _binomial_evidence(prior: float, left: np.ndarray, seen: np.ndarray) -> tuple[np.ndarray, float]:
    """A label-1 target's group goes left with rate q1, a label-0 target's with q0 <= q1."""
    def log_density(rates):
        q0, q1 = rates
        return (left * math.log(q0) + (seen - left) * math.log1p(-q0),
                left * math.log(q1) + (seen - left) * math.log1p(-q1))

    def update(post):
        q1 = float((post * left).sum() / max((post * seen).sum(), 1e-9))
        q0 = min(max(float(((1 - post) * left).sum() / max(((1 - post) * seen).sum(), 1e-9)), 1e-3), 1 - 1e-3)
        return (q0, min(max(q1, q0), 1 - 1e-3))

    pooled_rate = min(max(float(left.sum() / max(seen.sum(), 1)), 1e-3), 1 - 1e-3)
    rate = left / np.maximum(seen, 1)
    q0 = min(max(float(np.median(rate)), 1e-2), 0.9)
    return _mixture(prior, log_density, update,
                    float((left * math.log(pooled_rate) + (seen - left) * math.log1p(-pooled_rate)).sum()),
                    (q0, min(max(float(np.quantile(rate, 0.95)), q0 + 0.05), 0.99)))


def score_targets(records: Iterable[FoundRecord], crafted: Crafted, own_column_values: pd.DataFrame | np.ndarray,
                  *, known_rows: np.ndarray | None = None, known_labels: np.ndarray | None = None,
                  baseline: np.ndarray | None = None) -> TargetScores:
    """Score each target (higher: more likely label 1) from the records on its crafted
    columns, combined with the baseline from the party's own unmodified columns
    (``own_column_values``, one row per frame row; or ``baseline`` given per row).

    Missing copies: the number of splits won by copies missing at the target. Category
    groups: on each record of a crafted column, whether the target's group went left (a group
    of fewer rows than the floor never goes left, so "seen" over-counts; both classes alike).
    The evidence enters as a mixture likelihood ratio added to the baseline's calibrated
    prior. With no record on any crafted column the scores are the baseline's own, exactly."""
    targets = crafted.targets
    if known_rows is not None and np.intersect1d(known_rows, targets).size:
        raise ValueError("the attacker never knows a target's label: known_rows must exclude the targets")
    given = baseline is not None
    if baseline is None:
        if known_rows is None or known_labels is None:
            raise ValueError("give known_rows and known_labels (or a baseline) to build the own-column baseline")
        baseline = own_column_baseline(own_column_values, known_rows, known_labels)
    baseline = np.asarray(baseline, dtype=np.float64)
    position = {int(r): k for k, r in enumerate(targets)}
    n = targets.size
    wins, left, seen = np.zeros(n), np.zeros(n), np.zeros(n)
    on_crafted = 0
    for record in records:
        if record.active:  # the label owner's own splits, should its files be in reach: not on our columns
            continue
        name = record.feature
        if name is None and record.index is not None and 0 <= record.index < len(crafted.feature_names):
            name = crafted.feature_names[record.index]
        if name not in crafted.columns:
            continue
        on_crafted += 1
        marks = crafted.columns[name]
        if crafted.kind == "missing":
            for rows in marks.values():
                for row in rows:
                    wins[position[int(row)]] += 1
            continue
        vocabulary = record.vocabulary or (crafted.vocabularies[name].names if name in crafted.vocabularies else ())
        codes = {c: i for i, c in enumerate(vocabulary)}
        for category, rows in marks.items():
            code = codes.get(category)
            if code is None:
                continue
            went_left = bool(((record.categories or 0) >> code) & 1)
            members = np.array([position[int(row)] for row in rows])
            wins[members] += 1
            seen[members] += 1
            left[members] += went_left
    base = baseline[targets]
    if on_crafted == 0:
        return TargetScores(base.copy(), base, wins, left, seen, 0, "baseline")

    share = float(np.mean(known_labels)) if known_labels is not None and len(known_labels) else 0.07
    flat = float(_logit(np.array([share]))[0])
    if crafted.kind == "missing":
        evidence, gain = _poisson_evidence(flat, wins)
    else:  # explaining a group's move away by its co-members' odds scored worse in trials
        evidence, gain = _binomial_evidence(flat, left, seen)
    scores = _prior_log_odds(baseline, known_rows, known_labels)[targets] + evidence
    method, how = "poisson" if crafted.kind == "missing" else "binomial", ""
    named, cleared = flat + evidence > 0, evidence < 0
    if not given and named.any() and cleared.any():
        # self-training: the targets the evidence alone names (and those it speaks against)
        # orient the own columns far better than ~1% known rows; the prior is rebuilt from them
        rows = np.concatenate([known_rows, targets[named], targets[cleared]])
        labels = np.concatenate([known_labels, np.ones(named.sum()), np.zeros(cleared.sum())])
        reoriented = own_column_baseline(own_column_values, rows, labels)
        scores = _prior_log_odds(reoriented, known_rows, known_labels)[targets] + evidence
        how = ", own columns re-oriented on the targets the evidence names"
    return TargetScores(scores, base, wins, left, seen, on_crafted,
                        f"{method} mixture (gain {gain:.1f} nats) + own-column prior{how}", gain)


def target_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """ROC AUC of ``scores`` for ``labels`` (ties count half); rows labelled neither 0 nor 1
    (unknown) are left out; NaN with one class only."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels).astype(float)
    graded = (labels == 0) | (labels == 1)
    scores, labels = scores[graded], labels[graded]
    positive = labels == 1
    n1, n0 = int(positive.sum()), int((~positive).sum())
    if not n1 or not n0:
        return float("nan")
    ranks = pd.Series(scores).rank(method="average").to_numpy()
    return float((ranks[positive].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


@dataclass
class AttackReport:
    targets: int
    positives: int
    auc_attack: float
    auc_baseline: float  # own columns, oriented on the known rows: what the attacker has without the attack
    auc_ceiling: float  # own columns, oriented on every non-target label: no attacker has this
    records_found: int
    records_on_crafted: int
    targets_named: int
    files_read: list[str]
    files_unreadable: list[str]
    method: str

    def lines(self) -> list[str]:
        return [
            f"targets {self.targets} ({self.positives} with label 1)",
            f"label AUC on the targets: attack {self.auc_attack:.3f}, own-column baseline {self.auc_baseline:.3f} "
            f"(ceiling with every non-target label {self.auc_ceiling:.3f})",
            f"records found {self.records_found} ({self.records_on_crafted} on crafted columns, naming "
            f"{self.targets_named} target(s)); scoring: {self.method}",
            f"files read {len(self.files_read)}, of which opaque {len(self.files_unreadable)}",
        ]


def attack_report(view: HostView, crafted: Crafted, own_column_values: pd.DataFrame | np.ndarray,
                  labels: np.ndarray, known_rows: np.ndarray) -> AttackReport:
    """Score the targets from ``view`` and grade them against the truth ``labels`` (every
    row; the attack itself sees only ``labels[known_rows]``). The ceiling is the same
    own-column predictor oriented on every non-target label: an attack that does not beat it
    learned nothing from the records that the party's own columns could not tell."""
    labels = np.asarray(labels)
    result = score_targets(view.records, crafted, own_column_values, known_rows=known_rows,
                           known_labels=labels[known_rows])
    truth = labels[crafted.targets]
    others = np.setdiff1d(np.arange(labels.size), crafted.targets)
    others = others[(labels[others] == 0) | (labels[others] == 1)]
    ceiling = own_column_baseline(own_column_values, others, labels[others])[crafted.targets]
    return AttackReport(int(crafted.targets.size), int((truth == 1).sum()), target_auc(result.scores, truth),
                        target_auc(result.baseline, truth), target_auc(ceiling, truth), len(view.records),
                        result.records_on_crafted, int((result.wins > 0).sum()), view.files_read, view.unreadable,
                        result.method)
