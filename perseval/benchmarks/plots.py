"""Figures of the benchmarks' analyses (IBA-Bench's Figure 5 style; APeB's bars), as PNG-ready matplotlib Figures.

Figures are built with the object API on an Agg canvas, never through pyplot, so nothing is kept in
pyplot's global registry: a Figure is freed with its last reference and needs no display.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:  # imported where a figure is drawn: `perseval validate` loads this module, never draws
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

SCORE_LABEL = "Score (0-100)"


def _figure(n_groups: int, n_series: int = 1, bars: bool = False) -> tuple[Figure, Axes]:
    # width grows with the bars drawn; the legend sits below the plot, two columns, so it never squeezes it
    per_group = 0.25 * n_series if bars else 0.9
    width = max(6.0, per_group * n_groups + 2.0)
    height = 3.8 + 0.2 * -(-n_series // 2)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)  # savefig -> PNG without any pyplot backend
    return fig, fig.add_subplot()


def _color(i: int, n: int) -> tuple[float, ...]:
    """Distinct colours up to 20 series (the default cycle repeats after 10)."""
    from matplotlib import colormaps

    return colormaps["tab10" if n <= 10 else "tab20"].colors[i % (10 if n <= 10 else 20)]


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
        ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, frameon=False)


def line_figure(table: pd.DataFrame, title: str, xlabel: str, ylabel: str = SCORE_LABEL,
                errors: tuple[pd.DataFrame, pd.DataFrame] | None = None) -> Figure:
    """One line per row of `table` (a system), x = its columns in order; `errors`: (low, high) interval
    bounds shaped like `table`, drawn as error bars (none where a bound is missing)."""
    fig, ax = _figure(len(table.columns), len(table))
    x = np.arange(len(table.columns))
    for i, (name, row) in enumerate(table.iterrows()):  # a handful of systems, not data rows
        values = row.to_numpy(dtype=float)
        ax.plot(x, values, marker="o", label=str(name), color=_color(i, len(table)))
        if errors is not None:
            ax.errorbar(x, values, yerr=_yerr(values, errors, name), fmt="none", ecolor=_color(i, len(table)),
                        capsize=2, elinewidth=0.8)
    _xticks(ax, x, table.columns)
    _finish(ax, title, xlabel, ylabel, len(table))
    return fig


def _yerr(values: np.ndarray, errors: tuple[pd.DataFrame, pd.DataFrame], name: Any) -> np.ndarray:
    """The (below, above) error bar lengths of one row from its interval bounds (0 where a bound is missing)."""
    low, high = (e.loc[name].to_numpy(dtype=float) for e in errors)
    return np.nan_to_num(np.vstack([values - low, high - values]), nan=0.0).clip(min=0)


def grouped_bars(table: pd.DataFrame, title: str, xlabel: str, ylabel: str = SCORE_LABEL,
                 errors: tuple[pd.DataFrame, pd.DataFrame] | None = None) -> Figure:
    """Groups = columns of `table`; one bar series (one bar container) per row; `errors`: (low, high)
    interval bounds shaped like `table`, drawn as error bars (none where a bound is missing)."""
    fig, ax = _figure(len(table.columns), len(table), bars=True)
    x = np.arange(len(table.columns))
    width = 0.8 / max(1, len(table))
    for i, (name, row) in enumerate(table.iterrows()):
        offset = (i - (len(table) - 1) / 2) * width
        values = row.to_numpy(dtype=float)
        yerr = _yerr(values, errors, name) if errors is not None else None
        ax.bar(x + offset, values, width, label=str(name), color=_color(i, len(table)), yerr=yerr,
               capsize=2 if yerr is not None else 0, error_kw={"elinewidth": 0.8})
    _xticks(ax, x, table.columns)
    _finish(ax, title, xlabel, ylabel, len(table))
    return fig
