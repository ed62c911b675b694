"""A party's feature importances as a horizontal bar chart (PNG)."""

from __future__ import annotations

from pathlib import Path

from .importance import PartyImportance

__all__ = ["plot_importance"]

_TITLES = {"weight": "splits", "gain": "average gain per split", "cover": "average cover per split",
           "total_gain": "total gain", "total_cover": "total cover"}


def plot_importance(importance: PartyImportance, path: str | Path) -> Path:
    """Own features as blue bars, other parties (each one bar, all its features together) as
    grey bars, largest on top."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars = [(name, value, False) for name, value in importance.features.items()]
    bars += [(f"party {name} (all its features)", value, True) for name, value in importance.parties.items()]
    bars.sort(key=lambda bar: bar[1])
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.35 * max(len(bars), 1)))
    ax.barh(range(len(bars)), [b[1] for b in bars], color=["0.6" if b[2] else "tab:blue" for b in bars])
    ax.set_yticks(range(len(bars)), [b[0] for b in bars])
    ax.set_xlabel(_TITLES[importance.importance_type])
    ax.set_title(f"feature importance as party {importance.party} sees it")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
