"""Simulated experiments with a known mean and user-level correlation: how often does an interval cover
the truth? (scripts/coverage_check.py and a bounded test use this.)

Each experiment: `n_users` users, each with a success probability p_g ~ Beta(a, b) (mean `true_mean`,
intra-user correlation 1 / (a + b + 1)), and 2..8 instances per user scored 0 or 100 — the shape of a
personalization benchmark's slot or hit scores.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perseval.metrics.uncertainty import Estimate, cluster_mean, naive_mean


@dataclass(frozen=True)
class Coverage:
    simulations: int
    clustered: float  # share of user-clustered intervals that covered the true mean
    naive: float      # share of per-instance intervals that did
    level: float


def simulate(rng: np.random.Generator, n_users: int, true_mean: float, icc: float) -> tuple[np.ndarray, np.ndarray]:
    """One experiment's instance scores (0/100) and their user ids."""
    concentration = 1 / icc - 1  # a + b, so that 1 / (a + b + 1) = icc
    p = rng.beta(true_mean * concentration, (1 - true_mean) * concentration, size=n_users)
    sizes = rng.integers(2, 9, size=n_users)
    users = np.repeat(np.arange(n_users), sizes)
    return 100.0 * (rng.random(len(users)) < p[users]), users


def _covers(e: Estimate, truth: float) -> bool:
    return e.ci_low is not None and e.ci_high is not None and e.ci_low <= truth <= e.ci_high


def coverage(simulations: int = 1000, n_users: int = 50, true_mean: float = 0.3, icc: float = 0.3,
             level: float = 0.95, resamples: int = 2000, seed: int = 0) -> Coverage:
    rng = np.random.default_rng(seed)
    truth = 100 * true_mean
    hits_c = hits_n = 0
    for k in range(simulations):
        values, users = simulate(rng, n_users, true_mean, icc)
        hits_c += _covers(cluster_mean(values, users, level=level, resamples=resamples, seed=seed + k), truth)
        hits_n += _covers(naive_mean(values, level=level), truth)
    return Coverage(simulations, hits_c / simulations, hits_n / simulations, level)
