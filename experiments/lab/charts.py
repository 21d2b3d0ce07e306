"""One chart style for every experiment, saved deterministically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

# One palette for every chart: ours in blue, the chapter's in grey, limits in red.
OURS, CHAPTER, LIMIT, ACCENT = "#1f77b4", "#8c8c8c", "#d62728", "#2ca02c"
STYLE = {
    "figure.figsize": (7.0, 4.2),
    "figure.dpi": 100,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "font.size": 10,
    "axes.titlesize": 11,
    "legend.frameon": False,
    "svg.hashsalt": "harness-lab",
}


def figure(title: str, xlabel: str, ylabel: str) -> tuple[Figure, Any]:
    plt.rcParams.update(STYLE)
    fig, ax = plt.subplots()
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return fig, ax


def cost_bars(title: str, xlabel: str, bars: list[tuple[str, float, str, str]]) -> Figure:
    """One bar per run: (label, cost in USD, colour, the text above the bar)."""
    fig, ax = figure(title, xlabel, "cost (USD)")
    drawn = ax.bar([b[0] for b in bars], [b[1] for b in bars], color=[b[2] for b in bars])
    ax.bar_label(drawn, [b[3] for b in bars], fontsize=8)
    ax.margins(y=0.25)
    return fig


def save_png(fig: Figure, path: Path) -> None:
    # No Software/date metadata, so an unchanged chart is an unchanged file.
    fig.tight_layout()
    fig.savefig(path, format="png", metadata={"Software": None})
    plt.close(fig)
