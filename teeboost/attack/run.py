"""``teeboost attack``: train (or read a transcript), infer orders, guess values, score.

Rows are split in half: the federation trains on one half, which the attack targets; the
other half, held out of training, stands in for the public sample the attack assumes (its
deciles, min/max, missing share; ``aux`` replaces it). Stage 1 (``infer``) gets the
transcript's view and that public knowledge only. Ground truth (raw values, true bins,
labels) enters afterwards, to score, as an auditor would.

Every attacked row is scored: a row the attack wrongly flags as missing counts as a miss,
and rows that truly have no value are reported apart (how many the attack flagged).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..config import BoostParams, ProtocolOptions
from ..core.binning import fit_bins
from ..data import PartyData
from ..errors import DataError
from ..federation import train_local
from ..metrics import spearman
from ..row_matching import align_parties
from .attribution import PublicFeature, public_signatures
from .guessing import METHODS, accuracy_by_tolerance, guess
from .infer import InferredOrder, infer_held_orders, infer_orders
from .labels import label_attack, read_passive_view
from .view import read_view

__all__ = ["AttackTarget", "ModelSize", "run_attack", "run_sweep", "ASSUMPTIONS", "UPPER_BOUND"]

#: Order name of the rows scored on the true bin order (``--upper-bound``).
UPPER_BOUND = "true bin order (upper bound)"
ASSUMPTIONS = (
    "The active party knows each passive column's name, bin count (handshake) and the binning rule.",
    "It knows a rough public distribution of each passive column: min, max and deciles, whether values are "
    "whole numbers, and the share of missing values (here: the half of the rows held out of training, "
    "or --aux).",
    "A passive party attacking labels knows the labels of a small share of its rows (--known-labels) and "
    "the public positive rate.",
)
KNOWN_VALUES = ("The active party knows the true values of a small share of rows of each attacked column "
                "(--known-values, e.g. customers whose age it knows); they only serve to name groups of anonymous "
                "cuts (--known-values 0: blind).")


@dataclass(frozen=True)
class AttackTarget:
    feature: str
    tolerances: tuple[float, ...]

    @classmethod
    def parse(cls, text: str) -> "AttackTarget":
        name, _, tolerances = text.partition(":")
        try:
            values = tuple(float(t) for t in tolerances.split(",") if t.strip())
        except ValueError:
            raise DataError(f"--target {text!r}: tolerances must be numbers, e.g. age:1,2,3") from None
        if not name or not values or any(t < 0 for t in values):
            raise DataError(f"--target {text!r} must look like FEATURE:TOL,TOL,... with tolerances >= 0")
        return cls(name, values)


@dataclass(frozen=True)
class ModelSize:
    n_trees: int
    max_depth: int

    @classmethod
    def parse_list(cls, text: str) -> list["ModelSize"]:
        sizes = []
        for item in text.split(","):
            trees, sep, depth = item.strip().lower().partition("x")
            try:
                size = cls(int(trees), int(depth))
            except ValueError:
                raise DataError(f"--sweep {text!r}: each model size must look like TREESxDEPTH, e.g. 5x3,50x6") \
                    from None
            if not sep or size.n_trees < 1 or size.max_depth < 1:
                raise DataError(f"--sweep {text!r}: {item.strip()!r} must be TREESxDEPTH with both >= 1")
            sizes.append(size)
        return sizes

    def __str__(self) -> str:
        return f"{self.n_trees}x{self.max_depth}"


def _owners(passives: list[PartyData], targets: list[AttackTarget]) -> dict[str, tuple[int, int]]:
    owners = {}
    for index, party in enumerate(passives, start=1):
        for j, name in enumerate(party.feature_names):
            owners[name] = (index, j)
    for target in targets:
        if target.feature not in owners:
            raise DataError(f"--target {target.feature!r} is not a passive party's column "
                            f"(passive columns: {', '.join(owners)})")
    return owners


def _score_values(order: InferredOrder, target: AttackTarget, raw: np.ndarray, true_bins: np.ndarray,
                  public: PublicFeature, rng: np.random.Generator, upper_bound: bool) -> list[dict[str, Any]]:
    truly_present = ~np.isnan(raw)
    guessed = ~order.missing  # rows the attack ranks and guesses a value for
    low, high = float(public.deciles[0]), float(public.deciles[-1])
    orders = {"inferred": (order.scores, guessed)}
    if upper_bound:
        orders[UPPER_BOUND] = (true_bins.astype(float), truly_present)
    rows = []
    for order_name, (scores, ranked) in orders.items():
        for method in METHODS:
            if order_name == UPPER_BOUND and method != "attack_approx":
                continue  # random guesses ignore the order; min-max is miscalibrated, so a wrong
                # order can beat the true one there: only method (iv) gives a bound
            values = np.full(raw.size, np.nan)
            values[ranked] = guess(method, scores[ranked], low=low, high=high, deciles=public.deciles, rng=rng,
                                   integer=public.integer)
            scored = truly_present
            error_free = np.where(np.isnan(values[scored]), np.inf, values[scored])
            for tolerance, accuracy in zip(target.tolerances,
                                           accuracy_by_tolerance(error_free, raw[scored], list(target.tolerances))):
                rows.append({"feature": target.feature, "order": order_name, "method": method,
                             "tolerance": tolerance, "accuracy": accuracy, "scored_rows": int(scored.sum())})
    return rows


def _recovery(order: InferredOrder, raw: np.ndarray, true_bins: np.ndarray) -> dict[str, Any]:
    present = ~np.isnan(raw)
    ranked = present & ~order.missing
    return {
        "source": order.source,
        "exact_share": float((order.bins[present] == true_bins[present]).mean()) if present.any() else 0.0,
        "pinned_rows": int((order.bins[present] >= 0).sum()),
        "wrongly_pinned_rows": int(((order.bins >= 0) & (order.bins != true_bins)).sum()),
        "spearman": spearman(order.scores[ranked], raw[ranked]),
        "rows": int(raw.size),
        "missing_rows": int((~present).sum()),
        "missing_flagged": int((order.missing & ~present).sum()),
        "present_flagged_missing": int((order.missing & present).sum()),
        **order.detail,
    }


def run_attack(active: PartyData, passives: list[PartyData], targets: list[AttackTarget], params: BoostParams,
               protocol: str, *, options: ProtocolOptions | None = None, transcript: Path | None = None,
               aux: dict[str, np.ndarray] | None = None, aux_noise: float = 0.0, out_dir: Path,
               seed: int = 0, upper_bound: bool = False, known_labels: float = 0.01,
               known_values: float = 0.01, reuse_transcripts: bool = False,
               aux_ids: np.ndarray | None = None, validation_size: float = 0.2) -> dict[str, Any]:
    started = time.perf_counter()
    passives = align_parties(active, passives)
    owners = _owners(passives, targets)
    rng = np.random.default_rng(seed)
    order = rng.permutation(active.n_rows)
    attacked = order[: active.n_rows // 2]
    held_rows = np.sort(order[active.n_rows // 2:])  # public sample
    # with early stopping, part of the attacked half is the validation set: never trained on,
    # but routed through every tree (the active party asks passive parties about each row)
    n_valid = int(round(validation_size * attacked.size)) if params.early_stopping_rounds is not None else 0
    train_rows = np.sort(attacked[n_valid:])
    valid_rows = np.sort(attacked[:n_valid])
    if aux_ids is not None and active.ids is not None:
        shared = np.intersect1d(np.asarray(aux_ids).astype(str), np.asarray(active.ids)[attacked].astype(str))
        if shared.size:
            raise DataError(f"--aux shares {shared.size} row ids with the attacked training rows (e.g. "
                            f"{shared[0]!r}): a public sample must not contain the rows under attack")
    train_active = active.take(train_rows)
    train_passives = [p.take(train_rows) for p in passives]
    validation = (active.take(valid_rows), [p.take(valid_rows) for p in passives]) if n_valid else None
    out_dir.mkdir(parents=True, exist_ok=True)
    given = transcript is not None
    trained = False
    if not given:
        suffix = f"-seed{seed}" if seed else ""
        transcript = out_dir / f"transcript-{protocol}-{params.n_trees}x{params.max_depth}{suffix}.tbt"
        if not (reuse_transcripts and transcript.is_file()):
            train_local(train_active, train_passives, params, protocol, options=options, transcript=transcript,
                        validation=validation)
            trained = True
    train_seconds = time.perf_counter() - started
    view = read_view(transcript)
    if view.n_rows != train_rows.size:
        raise DataError(f"{transcript}: recorded {view.n_rows} training rows; this data and split give "
                        f"{train_rows.size} (use the same data, split and random state)")
    if not given and view.params and (view.protocol != protocol or view.params != params.to_dict()):
        raise DataError(f"{transcript}: recorded a {view.protocol} run with other parameters than this audit's; "
                        f"remove it or run without --reuse-transcripts")

    # public knowledge, per passive party: every column (attribution compares them all)
    public: dict[int, list[PublicFeature]] = {}
    for index, party in enumerate(passives, start=1):
        n_bins = view.n_value_bins.get(index)
        if n_bins is None:
            raise DataError(f"{transcript}: no handshake with passive party {index}")
        public[index] = []
        signatures = public_signatures(view.params, list(party.feature_names))
        for j, name in enumerate(party.feature_names):
            sample = aux[name] if aux and name in aux else party.features[held_rows, j]
            public[index].append(replace(PublicFeature.from_sample(name, sample, int(n_bins[j]), noise=aux_noise,
                                                                   rng=rng), signature=signatures[j]))

    # side knowledge the attack may be granted (--known-values): a few rows' true values
    known: dict[int, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
    if known_values > 0:
        count = max(5, int(round(known_values * train_rows.size)))
        known_rng = np.random.default_rng(seed + 2)
        for target in targets:
            party, feature = owners[target.feature]
            rows = np.sort(known_rng.choice(train_rows.size, size=min(count, train_rows.size), replace=False))
            known.setdefault(party, {})[feature] = (rows, train_passives[party - 1].features[rows, feature].copy())

    stage1_started = time.perf_counter()
    inferred: dict[str, InferredOrder] = {}
    for index in sorted({owners[t.feature][0] for t in targets}):
        wanted = [owners[t.feature][1] for t in targets if owners[t.feature][0] == index]
        found = infer_orders(view, index, public[index], wanted, known.get(index))
        for target in targets:
            if owners[target.feature][0] == index:
                inferred[target.feature] = found[owners[target.feature][1]]

    held: dict[str, InferredOrder] = {}
    if view.n_held:
        for index in sorted({owners[t.feature][0] for t in targets}):
            mine = {owners[t.feature][1]: inferred[t.feature] for t in targets if owners[t.feature][0] == index}
            found = infer_held_orders(view, mine, public[index])
            for target in targets:
                if owners[target.feature][0] == index:
                    held[target.feature] = found[owners[target.feature][1]]
    stage1_seconds = time.perf_counter() - stage1_started

    results, recoveries, held_recoveries = [], {}, {}
    for target in targets:  # ground truth from here on: scoring only
        party, feature = owners[target.feature]
        columns = train_passives[party - 1].features
        bins = fit_bins(columns, params.max_bin)  # the passive party's own binning
        raw = columns[:, feature]
        true_bins = bins.transform(columns)[:, feature].astype(np.int64)
        recoveries[target.feature] = _recovery(inferred[target.feature], raw, true_bins)
        results += [{**row, "rows": "training"} for row in _score_values(
            inferred[target.feature], target, raw, true_bins, public[party][feature], rng, upper_bound)]
        if target.feature in held and view.n_held == valid_rows.size:
            held_columns = validation[1][party - 1].features
            held_raw = held_columns[:, feature]
            held_bins = bins.transform(held_columns)[:, feature].astype(np.int64)
            held_recoveries[target.feature] = _recovery(held[target.feature], held_raw, held_bins)
            results += [{**row, "rows": "held-out"} for row in _score_values(
                held[target.feature], target, held_raw, held_bins, public[party][feature], rng, upper_bound)]

    labels_started = time.perf_counter()
    labels = [{"party": 0, "role": "active", "note": "holds the labels"}]
    label_rng = np.random.default_rng(seed + 1)
    for index, party in enumerate(train_passives, start=1):
        passive_view = read_passive_view(transcript, index)
        labels.append({"party": index, "role": "passive",
                       **label_attack(passive_view, party.features, train_active.labels, known_share=known_labels,
                                      rng=label_rng)})
    return {"protocol": protocol, "n_trees": params.n_trees, "max_depth": params.max_depth, "seed": seed,
            "n_attacked_rows": int(train_rows.size), "n_held_out_rows": int(view.n_held),
            "held_out_recovery": held_recoveries, "max_bin": params.max_bin, "transcript": str(transcript),
            "transcript_written": trained, "transcript_reused": not given and not trained, "known_values": known_values,
            "assumptions": list(ASSUMPTIONS) + ([KNOWN_VALUES] if known_values > 0 else []), "results": results,
            "recovery": recoveries, "labels": labels,
            "seconds": {"train": round(train_seconds, 2), "stage1": round(stage1_seconds, 2),
                        "labels": round(time.perf_counter() - labels_started, 2),
                        "total": round(time.perf_counter() - started, 2)}}


def run_sweep(active: PartyData, passives: list[PartyData], targets: list[AttackTarget], params: BoostParams,
              protocols: list[str], sizes: list[ModelSize], *, seeds: list[int] | None = None, on_report=None,
              **kwargs) -> list[dict[str, Any]]:
    """One attack per (protocol, model size, seed), each on its own freshly trained transcript.
    A seed sets both the split into attacked and public rows and the training's random state,
    so repeats show how much a figure owes to one draw."""
    from dataclasses import replace

    base = kwargs.pop("seed", 0)
    reports = []
    for protocol in protocols:
        for size in sizes:
            for seed in seeds or [base]:
                report = run_attack(active, passives, targets,
                                    replace(params, n_trees=size.n_trees, max_depth=size.max_depth, random_state=seed),
                                    protocol, seed=seed, **kwargs)
                reports.append(report)
                if on_report is not None:
                    on_report(report)
    return reports
