"""Simulated experiments with a known mean and user-level correlation: how often does an interval cover
the truth, and how often does the paired test reject a true null? (scripts/coverage_check.py prints the
grid; tests/test_uncertainty.py runs a slice.)

Each experiment: `n_users` users with 2..8 instances each, the shape of a personalization benchmark, in
one of three designs (`design`):
- uniform: each user's instance count drawn from 2..8, whatever the user's quality;
- quality: a better user gets more instances, 2 + Binomial(6, mu_g) (mu_g the user's mean, below), so the
  mean over instances and the mean of users' means are different quantities;
- dominant: one user holds a third of the instances (half as many as all the others together), the
  others 2..8 each: few effective users.
The truth an interval should cover depends on the estimand (`weighting`, perseval.metrics.uncertainty):
the mean of users' means is `true_mean` in every design; the mean over instances is E[n_g mu_g] / E[n_g],
which is `true_mean` where counts do not depend on quality and higher in the quality design (_truth).
- binary: user g succeeds with p_g ~ Beta(a, b) (mean `true_mean`, intra-user correlation
  1 / (a + b + 1) = icc) and each instance scores 0 or 100 (slot or hit scores);
- continuous: user g has a mean mu_g ~ Beta(m c, (1 - m) c) and each instance scores
  100 x Beta(mu_g k, (1 - mu_g) k), k = 4; the intra-user correlation is (k + 1) / (k + 1 + c) = icc
  (checkpoint shares, graded ratings).
The paired check draws a second cell on the same instances from the same user distributions, so there is
no true difference: its rejections are type-I errors, and the interval should exclude 0 exactly then.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from perseval.metrics.uncertainty import Estimate, cluster_mean, naive_mean, paired_difference

Kind = Literal["binary", "continuous"]
Design = Literal["uniform", "quality", "dominant"]
DESIGNS: tuple[str, ...] = ("uniform", "quality", "dominant")
WITHIN = 4.0  # k: the precision of an instance's score around its user's mean (continuous)


@dataclass(frozen=True)
class Coverage:
    simulations: int
    clustered: float  # share of user-clustered intervals that covered the true mean
    naive: float      # share of per-instance intervals that did
    level: float
    miss_low: float = 0.0   # truth below the interval
    miss_high: float = 0.0  # truth above it
    zero_width: float = 0.0  # share of intervals of width 0
    type1: float | None = None  # paired test: share of p < 1 - level with no true difference
    agree: float | None = None  # share of paired results whose interval excludes 0 exactly when p < 1 - level
    half_width: float | None = None  # mean half-width of the user-clustered intervals (score points)
    withheld: float = 0.0  # share of estimates with no interval (below 2 effective users); not in the shares above
    effective_users: float | None = None  # their mean effective users (Kish's, of the weighting's weights)


def _concentration(icc: float, kind: Kind) -> float:
    """c of the users' Beta(m c, (1 - m) c) means that gives intra-user correlation `icc`."""
    return 1 / icc - 1 if kind == "binary" else (WITHIN + 1) * (1 - icc) / icc


def _user_means(rng: np.random.Generator, n: int, true_mean: float, icc: float, kind: Kind) -> np.ndarray:
    c = _concentration(icc, kind)
    return rng.beta(true_mean * c, (1 - true_mean) * c, size=n)


def _sizes(rng: np.random.Generator, mu: np.ndarray, design: Design) -> np.ndarray:
    if design == "quality":
        return 2 + rng.binomial(6, mu)
    sizes = rng.integers(2, 9, size=len(mu))
    if design == "dominant":
        sizes[0] = max(2, round(sizes[1:].sum() / 2))
    return sizes


def _truth(true_mean: float, icc: float, kind: Kind, design: Design, weighting: str) -> float:
    """The estimand's true value (0-1): see the module's docstring. Quality design, over instances:
    E[(2 + 6 mu) mu] / E[2 + 6 mu] with E[mu^2] = var + m^2, var = m (1 - m) / (c + 1)."""
    if weighting == "user" or design != "quality":
        return true_mean
    m = true_mean
    second = m * (1 - m) / (_concentration(icc, kind) + 1) + m * m
    return (2 * m + 6 * second) / (2 + 6 * m)


def _scores(rng: np.random.Generator, mu: np.ndarray, kind: Kind) -> np.ndarray:
    if kind == "binary":
        return 100.0 * (rng.random(len(mu)) < mu)
    eps = 1e-9  # Beta parameters must be positive; a user mean of exactly 0 or 1 is drawn with probability 0
    m = np.clip(mu, eps, 1 - eps)
    return 100.0 * rng.beta(m * WITHIN, (1 - m) * WITHIN)


def simulate(rng: np.random.Generator, n_users: int, true_mean: float, icc: float,
             kind: Kind = "binary", cells: int = 1, design: Design = "uniform") -> tuple[list[np.ndarray], np.ndarray]:
    """One experiment's instance scores (one array per cell, on the same instances) and their user ids."""
    mu = _user_means(rng, n_users, true_mean, icc, kind)
    sizes = _sizes(rng, mu, design)
    users = np.repeat(np.arange(n_users), sizes)
    return [_scores(rng, mu[users], kind) for _ in range(cells)], users


def _covers(e: Estimate, truth: float) -> bool:
    return e.ci_low is not None and e.ci_high is not None and e.ci_low <= truth <= e.ci_high


def coverage(simulations: int = 1000, n_users: int = 50, true_mean: float = 0.3, icc: float = 0.3,
             level: float = 0.95, resamples: int = 2000, seed: int = 0, kind: Kind = "binary",
             paired: bool = False, design: Design = "uniform", weighting: str = "instance") -> Coverage:
    """Coverage (two-sided and each side's misses) of `simulations` experiments, of the estimand
    `weighting` names, over the intervals given (`withheld`: the share with none); with `paired`, also the
    paired test's type-I error and its agreement with the paired interval."""
    rng = np.random.default_rng(seed)
    truth = 100 * _truth(true_mean, icc, kind, design, weighting)
    hits_c = hits_n = low = high = zero = rejects = agree = none = 0
    widths, effective = [], []
    for k in range(simulations):
        (values, *other), users = simulate(rng, n_users, true_mean, icc, kind, 2 if paired else 1, design)
        e = cluster_mean(values, users, level=level, weighting=weighting)
        effective.append(e.effective_users)
        none += e.ci_low is None
        hits_c += _covers(e, truth)
        low += e.ci_low is not None and truth < e.ci_low
        high += e.ci_high is not None and truth > e.ci_high
        zero += e.ci_low is not None and e.ci_low == e.ci_high
        if e.half_width is not None:
            widths.append(e.half_width)
        hits_n += _covers(naive_mean(values, level=level), truth)
        if paired:
            d = paired_difference(values, other[0], users, level=level, resamples=resamples, seed=seed + k,
                                  weighting=weighting)
            rejected = d.p_value is not None and d.p_value < 1 - level
            rejects += rejected
            agree += rejected == (d.ci_low is not None and not d.ci_low <= 0 <= d.ci_high)
    s, given = simulations, max(1, simulations - none)
    return Coverage(s, hits_c / given, hits_n / s, level, low / given, high / given, zero / given,
                    rejects / s if paired else None, agree / s if paired else None,
                    float(np.mean(widths)) if widths else None, none / s, float(np.mean(effective)))


def power(simulations: int = 1000, n_users: int = 12, true_mean: float = 0.5, icc: float = 0.3,
          delta: float = 0.05, level: float = 0.95, resamples: int = 2000, seed: int = 0,
          kind: Kind = "binary") -> float:
    """Share of paired tests rejecting at 1 - level when cell a's users are each `delta` (0-1) above cell
    b's on the same instances (user means shifted, kept inside 0-1): the paired test's power."""
    rng = np.random.default_rng(seed)
    rejected = 0
    for k in range(simulations):
        mu = _user_means(rng, n_users, true_mean, icc, kind)
        users = np.repeat(np.arange(n_users), _sizes(rng, mu, "uniform"))
        b, a = _scores(rng, mu[users], kind), _scores(rng, np.clip(mu + delta, 0, 1)[users], kind)
        d = paired_difference(a, b, users, level=level, resamples=resamples, seed=seed + k)
        rejected += d.p_value is not None and d.p_value < 1 - level
    return rejected / simulations
