"""What an audit writes: CSVs (one row per measurement), the assumptions, and plots.

Plots are meant to be read by the people whose columns were attacked, so a column name the
installed fonts cannot draw (e.g. Chinese without a CJK font) is drawn with a font that can,
or replaced by its position with the real name kept in the CSVs.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

from ..errors import DataError
from .guessing import METHODS

__all__ = ["write_outputs", "file_slug"]

_METHOD_LABELS = {
    "random_minmax": "(i) random, min-max", "attack_minmax": "(ii) attack, min-max",
    "random_approx": "(iii) random, approx. distribution", "attack_approx": "(iv) attack, approx. distribution",
}
#: Protocols often leak the same (plain and SecureBoost; N-TEE and 1-TEE): distinct dashes and
#: shrinking markers keep every line visible where they overlap.
_STYLES = [
    {"linestyle": "-", "marker": "o", "markersize": 9, "linewidth": 2.5},
    {"linestyle": "--", "marker": "s", "markersize": 6, "linewidth": 2.0},
    {"linestyle": "-.", "marker": "^", "markersize": 7, "linewidth": 2.5},
    {"linestyle": ":", "marker": "D", "markersize": 4, "linewidth": 2.0},
]
_RESULT_FIELDS = ["protocol", "n_trees", "max_depth", "seed", "rows", "feature", "order", "method", "tolerance", "accuracy",
                  "scored_rows"]
_RECOVERY_FIELDS = ["protocol", "n_trees", "max_depth", "seed", "feature", "source", "exact_share", "pinned_rows",
                    "wrongly_pinned_rows", "spearman", "rows", "missing_rows", "missing_flagged",
                    "present_flagged_missing", "cuts", "cut_groups", "levels"]


def file_slug(name: str, position: int) -> str:
    """A file-name part for a column name: letters of any script kept, separators replaced."""
    slug = re.sub(r"[^\w.-]+", "_", name, flags=re.UNICODE).strip("._")
    return slug or f"column{position}"


def _drawable(text: str):
    """(text to draw, font properties or None): a font that has every glyph, else a fallback."""
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    def covers(path: str) -> bool:
        try:
            font = FT2Font(path)
        except (OSError, RuntimeError):
            return False
        return all(font.get_char_index(ord(ch)) != 0 for ch in text if not ch.isspace())

    default = font_manager.findfont(font_manager.FontProperties())
    if covers(default):
        return text, None
    for entry in font_manager.fontManager.ttflist:
        if covers(entry.fname):
            return text, font_manager.FontProperties(fname=entry.fname)
    return None, None


def _feature_label(name: str, position: int):
    text, font = _drawable(name)
    return (text, font) if text is not None else (f"column {position} (name needs a font not installed; "
                                                  f"see CSV)", None)


def _key(report: dict[str, Any]) -> dict[str, Any]:
    return {"protocol": report["protocol"], "n_trees": report["n_trees"], "max_depth": report["max_depth"],
            "seed": report.get("seed", 0)}


def _write_csv(path: Path, fields: list[str], rows: list[dict[str, Any]]) -> Path:
    """Rows of the runs just audited replace the same runs' rows in an existing file; rows of
    other runs (another protocol or model size audited into the same directory) are kept,
    whatever columns that file had (an audit from before seeds were recorded counts as seed 0)."""
    runs = {(str(r["protocol"]), str(r["n_trees"]), str(r["max_depth"]), str(r["seed"])) for r in rows}
    kept = []
    if path.is_file():
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            if not reader.fieldnames or not {"protocol", "n_trees", "max_depth"} <= set(reader.fieldnames):
                raise DataError(f"{path} is not an audit table (no protocol, n_trees, max_depth columns); "
                                "audit into another --out directory")
            for row in reader:
                row = {**row, "seed": row.get("seed") or "0"}
                if (row["protocol"], row["n_trees"], row["max_depth"], row["seed"]) not in runs:
                    kept.append(row)
            fields = fields + [f for f in reader.fieldnames if f not in fields]
    rows = kept + rows
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, extrasaction="ignore", restval="")
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_outputs(reports: list[dict[str, Any]], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    results = [{**_key(r), **row} for r in reports for row in r["results"]]
    written.append(_write_csv(out_dir / "results.csv", _RESULT_FIELDS, results))
    recovery = [{**_key(r), "feature": f, **row} for r in reports for f, row in r["recovery"].items()]
    written.append(_write_csv(out_dir / "recovery.csv", _RECOVERY_FIELDS, recovery))
    labels = [{**_key(r), **row} for r in reports for row in r["labels"]]
    label_fields = list(_key(reports[0])) + sorted({k for row in labels for k in row} - set(_key(reports[0])),
                                                   key=lambda k: (k not in ("party", "role"), k))
    written.append(_write_csv(out_dir / "labels.csv", label_fields, labels))
    path = out_dir / "assumptions.txt"
    path.write_text("\n".join(f"- {a}" for a in reports[0]["assumptions"]) + "\n", encoding="utf-8")
    written.append(path)

    features = list(dict.fromkeys(row["feature"] for row in results))
    # plots show the training rows; held-out rows (early stopping) are in the CSV
    reports = [{**r, "results": [row for row in r["results"] if row.get("rows", "training") == "training"]}
               for r in reports]
    for report in reports:
        for position, feature in enumerate(features):
            label, font = _feature_label(feature, position)
            fig, ax = plt.subplots(figsize=(6.5, 5.2))
            for order in ("inferred", "true bin order (upper bound)"):
                for method in METHODS:
                    rows = [r for r in report["results"] if r["feature"] == feature and r["order"] == order
                            and r["method"] == method]
                    if not rows:
                        continue
                    style = "--" if order != "inferred" else (":" if method.startswith("random") else "-")
                    suffix = " [true bin order: upper bound]" if order != "inferred" else ""
                    ax.plot([r["tolerance"] for r in rows], [100 * r["accuracy"] for r in rows], style, marker="o",
                            label=_METHOD_LABELS[method] + suffix)
            ax.set_xlabel("tolerance (+-)")
            ax.set_ylabel("rows guessed within tolerance (%)")
            ax.set_ylim(0, 100)
            ax.set_title(f"{label}: {report['protocol']}, {report['n_trees']} trees x depth {report['max_depth']}"
                         + (f", seed {report['seed']}" if report.get("seed") else ""), fontproperties=font)
            ax.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
            ax.grid(alpha=0.3)
            fig.tight_layout()
            seed = f"-seed{report['seed']}" if report.get("seed") else ""
            path = out_dir / (f"attack-{report['protocol']}-{report['n_trees']}x{report['max_depth']}{seed}-"
                              f"{file_slug(feature, position)}.png")
            fig.savefig(path, dpi=120)
            plt.close(fig)
            written.append(path)

    merged = _tables_as_reports(out_dir)  # every audit in this directory, not only this one
    sizes = sorted(dict.fromkeys((r["n_trees"], r["max_depth"]) for r in merged))
    if len(sizes) > 1:
        written += _sweep_plots(plt, merged, sizes, features, out_dir)
    return written


def _number(text: str) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _tables_as_reports(out_dir: Path) -> list[dict[str, Any]]:
    """The merged CSVs of a directory, read back into the shape the sweep plots draw from."""
    reports: dict[tuple, dict[str, Any]] = {}

    def report(row):
        key = (row["protocol"], int(row["n_trees"]), int(row["max_depth"]), row.get("seed") or "0")
        return reports.setdefault(key, {"protocol": key[0], "n_trees": key[1], "max_depth": key[2],
                                        "results": [], "recovery": {}, "labels": []})

    def read(name):
        path = out_dir / name
        if not path.is_file():
            return []
        with open(path, newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle))

    for row in read("results.csv"):
        if (row.get("rows") or "training") != "training":
            continue
        report(row)["results"].append({"feature": row["feature"], "order": row["order"], "method": row["method"],
                                       "tolerance": float(row["tolerance"]), "accuracy": float(row["accuracy"])})
    for row in read("recovery.csv"):
        report(row)["recovery"][row["feature"]] = {"spearman": _number(row.get("spearman"))}
    for row in read("labels.csv"):
        report(row)["labels"].append({"party": int(row["party"]), "role": row["role"],
                                      "auc_transcript": _number(row.get("auc_transcript")),
                                      "auc_own_features": _number(row.get("auc_own_features"))})
    return [r for r in reports.values() if r["results"]]


def _sweep_plots(plt, reports, sizes, features, out_dir: Path) -> list[Path]:
    written = []
    protocols = list(dict.fromkeys(r["protocol"] for r in reports))
    ticks = [f"{t}x{d}" for t, d in sizes]
    x = list(range(len(sizes)))

    def find(protocol, size):
        """Every seed's report of one (protocol, size); the plots show their mean, bars their range."""
        return [r for r in reports if r["protocol"] == protocol and (r["n_trees"], r["max_depth"]) == size]

    def spread(values):
        values = [v for v in values if v == v]
        if not values:
            return float("nan"), 0.0, 0.0
        mean = sum(values) / len(values)
        return mean, mean - min(values), max(values) - mean

    for position, feature in enumerate(features):
        label, font = _feature_label(feature, position)
        tolerances = sorted({row["tolerance"] for r in reports for row in r["results"] if row["feature"] == feature})
        fig, axes = plt.subplots(1, len(tolerances) + 1, figsize=(3.2 * (len(tolerances) + 1), 3.8), squeeze=False)
        axes = axes[0]
        for index, protocol in enumerate(protocols):
            style = _STYLES[index % len(_STYLES)]
            found = [find(protocol, size) for size in sizes]
            for ax, tolerance in zip(axes, tolerances):
                points = [spread([100 * row["accuracy"] for r in runs for row in r["results"]
                                  if row["feature"] == feature and row["order"] == "inferred"
                                  and row["tolerance"] == tolerance and row["method"] == "attack_approx"])
                          for runs in found]
                ax.errorbar(x, [p[0] for p in points], yerr=[[p[1] for p in points], [p[2] for p in points]],
                            label=protocol, capsize=3, **style)
            points = [spread([r["recovery"].get(feature, {}).get("spearman") for r in runs
                              if r["recovery"].get(feature, {}).get("spearman") is not None]) for runs in found]
            axes[-1].errorbar(x, [p[0] for p in points], yerr=[[p[1] for p in points], [p[2] for p in points]],
                              label=protocol, capsize=3, **style)
        for ax, tolerance in zip(axes, tolerances):
            baseline = [100 * row["accuracy"] for r in reports for row in r["results"] if row["feature"] == feature
                        and row["tolerance"] == tolerance and row["method"] == "random_approx"]
            if baseline:
                ax.axhline(sum(baseline) / len(baseline), color="grey", linestyle=":", label="(iii) random draw")
            ax.set_title(f"+-{tolerance:g}: rows guessed (iv), %", fontsize=9)
            ax.set_ylim(0, 100)
        axes[-1].set_title("Spearman of inferred order", fontsize=9)
        axes[-1].set_ylim(-0.05, 1.02)
        for ax in axes:
            ax.set_xticks(x, ticks, fontsize=8)
            ax.set_xlabel("trees x depth", fontsize=8)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=7)
        fig.suptitle(label, fontproperties=font)
        fig.tight_layout()
        path = out_dir / f"leakage-vs-size-{file_slug(feature, position)}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    fig, ax = plt.subplots(figsize=(6.5, 4.4))
    passive_parties = sorted({row["party"] for r in reports for row in r["labels"] if row["role"] == "passive"})
    for protocol in protocols:
        for party in passive_parties:
            values, own = [], []
            for size in sizes:
                rows = [x for r in find(protocol, size) for x in r["labels"] if x["party"] == party]
                values.append(spread([x["auc_transcript"] for x in rows if x.get("auc_transcript") is not None])[0])
                own.append(spread([x["auc_own_features"] for x in rows if x.get("auc_own_features") is not None])[0])
            ax.plot(x, values, label=f"{protocol}: passive party {party}, from what it saw",
                    **_STYLES[protocols.index(protocol) % len(_STYLES)])
    if passive_parties and own:
        ax.plot(x, own, ":", color="grey", label="its own features only")
    ax.set_xticks(x, ticks)
    ax.set_xlabel("model size (trees x depth)")
    ax.set_ylabel("label AUC")
    ax.set_ylim(0.4, 1.0)
    ax.set_title("labels inferred by a passive party")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = out_dir / "leakage-vs-size-labels.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    written.append(path)
    return written
