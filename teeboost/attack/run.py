"""``teeboost attack``: train (or read a transcript), infer orders, guess values, report.

Rows are split in half: the federation trains on one half, which the attack targets; the
other half, held out of training, supplies the approximate public distribution (unless
``aux`` is given). Only stage 1 reads the transcript; the ground truth (raw values and the
passive party's true bins) is used only to score the attack, as an auditor would.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import BoostParams, ProtocolOptions
from ..core.binning import fit_bins
from ..data import PartyData, align_parties
from ..errors import DataError
from ..federation import train_local
from .guessing import METHODS, accuracy_by_tolerance, approximate_deciles, guess
from .order import infer_bins, recovery
from .view import read_view

__all__ = ["AttackTarget", "run_attack", "write_outputs"]


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


def run_attack(active: PartyData, passives: list[PartyData], targets: list[AttackTarget], params: BoostParams,
               protocol: str, *, options: ProtocolOptions | None = None, transcript: Path | None = None,
               aux: dict[str, np.ndarray] | None = None, aux_noise: float = 0.0, out_dir: Path,
               seed: int = 0) -> dict[str, Any]:
    passives = align_parties(active, passives)
    owners = {}
    for index, party in enumerate(passives, start=1):
        for j, name in enumerate(party.feature_names):
            owners[name] = (index, j)
    for target in targets:
        if target.feature not in owners:
            raise DataError(f"--target {target.feature!r} is not a passive party's column "
                            f"(passive columns: {', '.join(owners)})")
    rng = np.random.default_rng(seed)
    order = rng.permutation(active.n_rows)
    train_rows = np.sort(order[: active.n_rows // 2])
    held_rows = np.sort(order[active.n_rows // 2:])
    train_active = active.take(train_rows)
    train_passives = [p.take(train_rows) for p in passives]
    out_dir.mkdir(parents=True, exist_ok=True)
    if transcript is None:
        transcript = out_dir / f"transcript-{protocol}.tbt"
        train_local(train_active, train_passives, params, protocol, options=options, transcript=transcript)
    view = read_view(transcript)
    if view.n_rows != train_rows.size:
        raise DataError(f"{transcript}: recorded {view.n_rows} training rows; this data and split give "
                        f"{train_rows.size} (use the same data, split and random state)")
    results, recoveries = [], {}
    for target in targets:
        party, feature = owners[target.feature]
        raw = train_passives[party - 1].features[:, feature]
        bins = fit_bins(train_passives[party - 1].features, params.max_bin)
        true_bins = bins.transform(train_passives[party - 1].features)[:, feature].astype(np.int64)
        posterior = infer_bins(view, party, feature)
        recoveries[target.feature] = {**recovery(posterior, true_bins, raw), "constraints": posterior.constraints,
                                      "split_constraints": posterior.split_constraints}
        present = ~np.isnan(raw) & ~posterior.likely_missing()
        truth = raw[present]
        source = aux[target.feature] if aux and target.feature in aux else \
            passives[party - 1].features[held_rows, feature]
        deciles = approximate_deciles(source, noise=aux_noise, rng=rng)
        integer = bool(np.all(np.mod(source[~np.isnan(source)], 1) == 0))
        low, high = float(np.nanmin(truth)), float(np.nanmax(truth))
        scores = {"inferred": posterior.expected_value_bin()[present], "true": true_bins[present].astype(float)}
        for order_name, score in scores.items():
            for method in METHODS:
                if order_name == "true" and method.startswith("random"):
                    continue  # random guesses ignore the order
                guesses = guess(method, score, low=low, high=high, deciles=deciles, rng=rng, integer=integer)
                for tolerance, accuracy in zip(target.tolerances, accuracy_by_tolerance(guesses, truth,
                                                                                      list(target.tolerances))):
                    results.append({"feature": target.feature, "order": order_name, "method": method,
                                    "tolerance": tolerance, "accuracy": accuracy})
    return {"protocol": protocol, "n_attacked_rows": int(train_rows.size), "max_bin": params.max_bin,
            "transcript": str(transcript), "results": results, "recovery": recoveries}


def write_outputs(report: dict[str, Any], out_dir: Path) -> list[Path]:
    """results.csv, recovery.csv and one accuracy-vs-tolerance plot per feature."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    path = out_dir / "results.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["feature", "order", "method", "tolerance", "accuracy"])
        writer.writeheader()
        writer.writerows(report["results"])
    written.append(path)
    path = out_dir / "recovery.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["feature", "exact_share", "mean_abs_bin_error", "spearman"])
        for feature, r in report["recovery"].items():
            writer.writerow([feature, r["exact_share"], r["mean_abs_bin_error"], r["spearman"]])
    written.append(path)
    labels = {"random_minmax": "(i) random, min-max", "attack_minmax": "(ii) attack, min-max",
              "random_approx": "(iii) random, approx. distribution", "attack_approx": "(iv) attack, approx. distribution"}
    for feature in sorted({r["feature"] for r in report["results"]}):
        fig, ax = plt.subplots(figsize=(6.5, 5.2))
        for (order, method), style in (
            (("inferred", "random_minmax"), ":"), (("inferred", "random_approx"), ":"),
            (("inferred", "attack_minmax"), "-"), (("inferred", "attack_approx"), "-"),
            (("true", "attack_minmax"), "--"), (("true", "attack_approx"), "--"),
        ):
            rows = [r for r in report["results"] if r["feature"] == feature and r["order"] == order
                    and r["method"] == method]
            if not rows:
                continue
            suffix = " [true bin order: leakage-profile upper bound]" if order == "true" else ""
            ax.plot([r["tolerance"] for r in rows], [100 * r["accuracy"] for r in rows], style, marker="o",
                    label=labels[method] + suffix)
        ax.set_xlabel(f"tolerance (+- {feature})")
        ax.set_ylabel("samples guessed within tolerance (%)")
        ax.set_ylim(0, 100)
        ax.set_title(f"{feature}: attack on {report['protocol']} ({report['max_bin']} bins)")
        ax.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = out_dir / f"attack-{report['protocol']}-{feature}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written
