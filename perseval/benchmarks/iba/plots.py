"""Figures of the IBA-Bench analyses (Figure 5 style), as PNG-ready matplotlib Figures.

Figures are built with the object API on an Agg canvas, never through pyplot, so nothing is kept in
pyplot's global registry: a Figure is freed with its last reference and needs no display.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

SCORE_LABEL = "Score (0-100)"


def _figure(n_groups: int) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(max(5.0, 0.9 * n_groups + 3.0), 3.8), layout="constrained")
    FigureCanvasAgg(fig)  # savefig -> PNG without any pyplot backend
    return fig, fig.add_subplot()


def _xticks(ax: Axes, x: np.ndarray, labels: pd.Index) -> None:
    names = [str(c) for c in labels]
    long = max((len(n) for n in names), default=0) > 8  # system labels: slant them so they do not overlap
    ax.set_xticks(x, names, rotation=30 if long else 0, ha="right" if long else "center")


def _finish(ax: Axes, title: str, xlabel: str, ylabel: str, n_series: int) -> None:
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    if n_series:
        ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)


def line_figure(table: pd.DataFrame, title: str, xlabel: str, ylabel: str = SCORE_LABEL) -> Figure:
    """One line per row of `table` (a system), x = its columns in order."""
    fig, ax = _figure(len(table.columns))
    x = np.arange(len(table.columns))
    for name, row in table.iterrows():  # a handful of systems, not data rows
        ax.plot(x, row.to_numpy(dtype=float), marker="o", label=str(name))
    _xticks(ax, x, table.columns)
    _finish(ax, title, xlabel, ylabel, len(table))
    return fig


def grouped_bars(table: pd.DataFrame, title: str, xlabel: str, ylabel: str = SCORE_LABEL) -> Figure:
    """Groups = columns of `table`; one bar series (one bar container) per row."""
    fig, ax = _figure(len(table.columns))
    x = np.arange(len(table.columns))
    width = 0.8 / max(1, len(table))
    for i, (name, row) in enumerate(table.iterrows()):
        offset = (i - (len(table) - 1) / 2) * width
        ax.bar(x + offset, row.to_numpy(dtype=float), width, label=str(name))
    _xticks(ax, x, table.columns)
    _finish(ax, title, xlabel, ylabel, len(table))
    return fig
