"""The AUC of a judge's scores for known-good (1) against known-bad (0) items, with DeLong's interval.

DeLong, DeLong & Clarke-Pearson (1988): the AUC is the Mann-Whitney statistic (ties count one half), and
its variance comes from each item's placement among the items of the other class, so the interval takes
the items as the unit and needs no resampling (deterministic, and defined on the few items a probe has).
With perfectly separated classes the variance is 0 and the interval a point: read it with the counts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.stats import norm


@dataclass(frozen=True)
class Auc:
    auc: float
    ci_low: float
    ci_high: float
    n_pos: int
    n_neg: int


def _placements(pos: np.ndarray, neg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each positive, the share of negatives it outranks (ties 1/2); for each negative, the share of
    positives that outrank it."""
    psi = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    return psi.mean(axis=1), psi.mean(axis=0)


def auc_interval(labels: Sequence[int], scores: Sequence[float], level: float = 0.95) -> Auc | None:
    """The AUC and its DeLong interval (clipped to [0, 1]); None unless both classes are present."""
    y, s = np.asarray(labels), np.asarray(scores, dtype=float)
    pos, neg = s[y == 1], s[y == 0]
    if not len(pos) or not len(neg):
        return None
    v10, v01 = _placements(pos, neg)
    auc = float(v10.mean())
    var = (v10.var(ddof=1) / len(pos) if len(pos) > 1 else 0.0) + \
        (v01.var(ddof=1) / len(neg) if len(neg) > 1 else 0.0)
    half = float(norm.ppf(0.5 + level / 2)) * math.sqrt(var)
    return Auc(auc, max(0.0, auc - half), min(1.0, auc + half), len(pos), len(neg))


def youden_threshold(labels: Sequence[int], scores: Sequence[float]) -> float | None:
    """The cut t that maximizes Youden's J = TPR - FPR of `score >= t` (scikit-learn's roc_curve convention),
    over the observed scores; a tie goes to the highest such cut, which passes the fewest known-bad items.
    None unless both classes are present."""
    y, s = np.asarray(labels), np.asarray(scores, dtype=float)
    pos, neg = s[y == 1], s[y == 0]
    if not len(pos) or not len(neg):
        return None
    cuts = np.unique(s)
    j = (pos[None, :] >= cuts[:, None]).mean(axis=1) - (neg[None, :] >= cuts[:, None]).mean(axis=1)
    return float(cuts[np.flatnonzero(np.isclose(j, j.max(), rtol=0.0, atol=1e-12))[-1]])
