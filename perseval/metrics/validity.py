"""A judge as a measuring instrument: its agreement with human labels, per criterion.

Per criterion: Pearson and Spearman correlations (scipy), quadratic-weighted Cohen's kappa and
Krippendorff's alpha (ordinal for graded scales, nominal for binary ones), each with a percentile
bootstrap interval that resamples users when the labels name them (the unit of independence), else
items; and the confusion matrix of judge against human categories. Kappa and alpha are computed here
(small, and alpha must take several raters with missing values for inter-judge agreement); the tests
cross-check them against scikit-learn's `cohen_kappa_score(weights="quadratic")` and the
`krippendorff` package.

A statistic that is undefined (fewer than 3 pairs, a constant side, one category in all) is None, never 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

BOOTSTRAP_RESAMPLES = 1000
LEVEL = 0.95


# --- the statistics ------------------------------------------------------------------------------------------

def _categories(*sides: Sequence[float]) -> list[float]:
    return sorted({float(v) for side in sides for v in side})


def weighted_kappa(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Cohen's kappa with quadratic weights over the categories either rater used (by rank, as
    scikit-learn weighs them). None when undefined (no pair, or expected disagreement 0)."""
    cats = _categories(a, b)
    if not len(a) or len(cats) < 2:
        return None
    index = {c: i for i, c in enumerate(cats)}
    k = len(cats)
    observed = np.zeros((k, k))
    for x, y in zip(a, b):
        observed[index[float(x)], index[float(y)]] += 1
    expected = np.outer(observed.sum(1), observed.sum(0)) / observed.sum()
    weights = (np.arange(k)[:, None] - np.arange(k)[None, :]) ** 2
    denom = float((weights * expected).sum())
    return None if denom == 0 else 1.0 - float((weights * observed).sum()) / denom


def _delta2(cats: list[float], totals: np.ndarray, level: str) -> np.ndarray:
    c = np.array(cats)
    if level == "interval":
        return (c[:, None] - c[None, :]) ** 2
    if level == "nominal":
        return (c[:, None] != c[None, :]).astype(float)
    if level == "ordinal":  # Krippendorff: (sum of n_g from c to k, minus half of the two ends)^2
        cum = np.cumsum(totals)
        i, j = np.meshgrid(range(len(c)), range(len(c)), indexing="ij")
        lo, hi = np.minimum(i, j), np.maximum(i, j)
        between = cum[hi] - np.where(lo > 0, cum[lo - 1], 0)
        return (between - (totals[i] + totals[j]) / 2) ** 2
    raise ValueError(f"unknown level {level!r}; known: nominal, ordinal, interval")


def krippendorff_alpha(ratings: Sequence[Sequence[float | None]], level: str = "ordinal") -> float | None:
    """Alpha of a raters x units table (None or NaN: missing). Units with fewer than two values are
    not pairable and are left out. None when undefined (no pairable unit, or one value in all)."""
    table = np.array([[np.nan if v is None else float(v) for v in row] for row in ratings], dtype=float)
    values = table[~np.isnan(table)]
    cats = sorted(set(values.tolist()))
    if len(cats) < 2:
        return None
    o = np.zeros((len(cats), len(cats)))
    codes = np.searchsorted(np.asarray(cats), np.nan_to_num(table, nan=np.inf))
    present = ~np.isnan(table)
    m = present.sum(0)
    weight = np.where(m > 1, 1.0 / np.maximum(m - 1, 1), 0.0)
    # the coincidence matrix: every ordered pair of values within a unit, weight 1/(m-1); by pairs of raters
    for r in range(len(table)):
        for q in range(len(table)):
            both = present[r] & present[q] & (m > 1)
            if r != q and both.any():
                np.add.at(o, (codes[r, both], codes[q, both]), weight[both])
    totals = o.sum(1)
    n = totals.sum()
    if n <= 1:
        return None
    d2 = _delta2(cats, totals, level)
    expected = float((np.outer(totals, totals) * d2).sum())
    return None if expected == 0 else float(1.0 - (n - 1) * float((o * d2).sum()) / expected)


def correlations(a: Sequence[float], b: Sequence[float]) -> tuple[float | None, float | None]:
    """(Pearson r, Spearman rho); None when undefined (fewer than 3 pairs or a constant side). numpy's
    product-moment on values and on average ranks: the same numbers as scipy (tested), fast enough for a
    bootstrap of a thousand draws."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None, None
    return _pearson(x, y), _pearson(_ranks(x), _ranks(y))


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.corrcoef(x, y)[0, 1])


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean of their positions), as Spearman's rho uses them."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return ((ends - counts + 1 + ends) / 2.0)[inverse]


# --- one criterion ---------------------------------------------------------------------------------------------

STATISTICS: dict[str, Callable[[np.ndarray, np.ndarray, str], float | None]] = {
    "pearson": lambda j, h, _: correlations(j, h)[0],
    "spearman": lambda j, h, _: correlations(j, h)[1],
    "kappa": lambda j, h, _: weighted_kappa(j, h),
    "alpha": lambda j, h, level: krippendorff_alpha([j, h], level),
}


def _bootstrap(judge: np.ndarray, human: np.ndarray, clusters: np.ndarray, level: str, seed: int,
               resamples: int) -> dict[str, tuple[float | None, float | None]]:
    """Percentile intervals of every statistic, resampling whole clusters (users or items)."""
    rng = np.random.default_rng(seed)
    ids = np.unique(clusters)
    members = {c: np.flatnonzero(clusters == c) for c in ids}
    draws: dict[str, list[float]] = {k: [] for k in STATISTICS}
    for _ in range(resamples):
        rows = np.concatenate([members[c] for c in rng.choice(ids, size=len(ids), replace=True)])
        for name, stat in STATISTICS.items():
            v = stat(judge[rows], human[rows], level)
            if v is not None and not math.isnan(v):
                draws[name].append(v)
    tail = (1 - LEVEL) / 2
    return {k: (float(np.quantile(v, tail)), float(np.quantile(v, 1 - tail))) if len(v) >= resamples // 2
            else (None, None) for k, v in draws.items()}


def scale_level(judge: Sequence[float], human: Sequence[float]) -> str:
    """nominal for a binary scale, ordinal for a graded one (categories are ordered, not evenly spaced)."""
    return "nominal" if len(_categories(judge, human)) <= 2 else "ordinal"


def criterion_row(judge: Sequence[float], human: Sequence[float], clusters: Sequence[str] | None = None, *,
                  seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES) -> dict[str, Any]:
    """n, the four statistics and their intervals for one criterion. Judge scores are rounded to the
    nearest category for kappa, alpha and the confusion matrix (`snap`: a mean over repeats is not one)."""
    h = np.asarray(human, dtype=float)
    j = snap(np.asarray(judge, dtype=float), _categories(human))
    cl = np.asarray(clusters if clusters is not None else [str(i) for i in range(len(h))])
    level = scale_level(j, h)
    row: dict[str, Any] = {"n": len(h), "clusters": len(set(cl.tolist())), "alpha_level": level}
    for name, stat in STATISTICS.items():
        raw = np.asarray(judge, dtype=float) if name in ("pearson", "spearman") else j
        row[name] = stat(raw, h, level) if len(h) else None
    if len(h) >= 3:
        for name, (lo, hi) in _bootstrap(j, h, cl, level, seed, resamples).items():
            row[f"{name}_ci_low"], row[f"{name}_ci_high"] = lo, hi
    return row


def snap(values: np.ndarray, categories: list[float]) -> np.ndarray:
    """Judge scores as categories: on a whole-number human scale each is rounded half up to a whole
    number (a judge may use a grade no human used); else moved to the nearest human category."""
    if not categories:
        return values
    if all(float(c).is_integer() for c in categories):
        return np.floor(values + 0.5)
    cats = np.asarray(categories)
    return cats[np.abs(values[:, None] - cats[None, :]).argmin(1)]


def confusion(judge: Sequence[float], human: Sequence[float]) -> pd.DataFrame:
    """Rows and columns: every category either side used (judge scores snapped as `snap` does); counts."""
    j = snap(np.asarray(judge, dtype=float), _categories(human))
    cats = _categories(human, j)
    frame = pd.crosstab(pd.Series(np.asarray(human, dtype=float), name="human"), pd.Series(j, name="judge"))
    return frame.reindex(index=cats, columns=cats, fill_value=0)


@dataclass
class Pairs:
    """Judge and human scores of one judge on one criterion, aligned, with who each item belongs to."""

    judge_name: str
    criterion: str
    judge: list[float]
    human: list[float]
    clusters: list[str]


def validity_table(pairs: Sequence[Pairs], *, seed: int = 0,
                   resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """One row per (judge, criterion) and the confusion matrix of each (keyed "judge/criterion")."""
    rows, matrices = [], {}
    for p in pairs:
        rows.append({"judge": p.judge_name, "criterion": p.criterion,
                     **criterion_row(p.judge, p.human, p.clusters, seed=seed, resamples=resamples)})
        matrices[f"{p.judge_name}/{p.criterion}"] = confusion(p.judge, p.human)
    return pd.DataFrame(rows), matrices
