"""Means with user-clustered uncertainty, paired comparisons, multiple-comparison correction and power.

The unit of independence is the user: a user contributes several instances, so instances are correlated
and a per-instance standard error is too small. Everything here sums over users, with small-sample
methods that hold from 6 users up (perseval.metrics.small_sample, perseval.metrics.sign_flip;
scripts/coverage_check.py runs the grid, docs/numbers.md holds it).

Two estimands, named by `weighting`:
- "instance" (the default): the mean over the scored instances, each instance one weight, so a user with
  more instances counts more (the mean the score tables show);
- "user": the mean of the users' means, each user one weight, whatever their instance counts.
Each has its own interval: "user" treats each user's mean as one value.

- The standard error is the cluster-robust CR2 one (Bell-McCaffrey), with its Satterthwaite degrees of
  freedom (G - 1 for equal users, fewer when a few users hold most instances).
- `effective_users`: Kish's effective number of users of the weights the estimate gives each user,
  (sum w_g)^2 / sum w_g^2 (w_g = n_g, the user's instances, or 1 per user): G when every user weighs the
  same, near 1 when one user holds nearly every instance. Below MIN_EFFECTIVE_USERS there is no honest
  between-user variation to estimate from, and the interval, SE and p are withheld with the reason (`note`).
- A mean on the 0-100 score scale (every value in [0, 100]) gets the Korn-Graubard interval: a Jeffreys
  interval on the effective sample size p(1-p) / Var, shrunk for the degrees of freedom, Var taken with
  a fraction of a pseudo-user at the far end of the scale (_ends_variance), and for graded scores the side
  towards the users' long tail lengthened by the Edgeworth skewness term (Johnson 1978; Hall 1992). It
  stays inside the scale, is asymmetric near 0 and 100, and is never zero-width: where every user's mean
  is the same value (all 100s, or a constant graded score) the data show no variation, and the interval
  is the one of one draw per user at that value (on the effective users).
- Any other mean gets mean +- t(df) x SE.
- Two cells on the same instances are compared paired: the sign-flip permutation test over users (exact
  up to 12 users) and the interval that inverts it. Where every user's mean difference is the same the
  sign flips cannot tell any difference from another; the test then also takes the one-draw-per-user
  bound (_flat_floor), and the reported p and the interval come from that same combined test, so the
  interval excludes 0 exactly when p < 1 - level, in every case.
- Two cells on different instances: Welch's t on the two CR2 variances, interval and p from one t.
- The minimum detectable difference (80% power, alpha 0.05) uses t quantiles with G - 1 degrees of
  freedom, so a handful of users reads as "only very large differences are detectable".

`small_n` on an Estimate or Difference says the interval is wide because few users were sampled (fewer
than SMALL_N_USERS): a report shows it beside the interval.
Values are finite floats; NaN or None means unscored: dropped, and n counts only what is kept. inf and
strings are refused, naming the value (`label` and the instance).
"""
from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats

from perseval.metrics.sign_flip import sign_flip
from perseval.metrics.small_sample import bm_df, cluster_skewness, cr2_variance, kish_users, korn_graubard

ALPHA = 0.05
POWER = 0.80
SCALE = (0.0, 100.0)  # scores are percentages: a mean whose values all lie here is a mean on this scale
# The pseudo-user added at the far end of the scale for the variance (see _ends_variance), as a share of an
# average user: half of one for 0/100 scores (a user who fails everything is a common 0/100 user), a fifth
# for graded scores (whose instances rarely sit at the very end). Chosen on the coverage grid (docs/numbers.md).
PSEUDO_USER = {"binary": 0.5, "graded": 0.2}
SMALL_N_USERS = 10  # below this the t quantile alone widens the interval by more than 15% over z
MIN_EFFECTIVE_USERS = 2.0  # below: one user's values are the estimate, and no interval is given
METHOD = "CR2 Korn-Graubard Jeffreys"  # a mean on the score scale
T_METHOD = "CR2 t"  # any other mean
PAIRED_METHOD = "paired sign-flip, inverted"
UNPAIRED_METHOD = "unpaired CR2 Welch t"
Weighting = Literal["instance", "user"]
WEIGHTINGS: tuple[str, ...] = ("instance", "user")
Bounds = tuple[float, float] | None


@dataclass(frozen=True)
class Estimate:
    """A mean with its user-clustered uncertainty (None where it cannot be computed: `note` says why)."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    se: float | None
    n: int
    n_users: int
    level: float
    method: str
    df: float | None = None  # the degrees of freedom the interval rests on
    small_n: bool = False  # fewer than SMALL_N_USERS users: wide because few users were sampled
    effective_users: float | None = None  # Kish's, of the weights the estimate gives each user
    weighting: str = "instance"  # the estimand: mean over instances, or mean of users' means
    note: str | None = None  # why the interval is withheld

    @property
    def half_width(self) -> float | None:
        if self.ci_low is None or self.ci_high is None:
            return None
        return (self.ci_high - self.ci_low) / 2

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Difference:
    """a - b, with its interval, p-value and the smallest difference this n could detect."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    se: float | None
    p_value: float | None
    n: int
    n_users: int
    paired: bool
    mde: float | None  # minimum detectable difference at 80% power, alpha 0.05, for this n
    level: float
    method: str
    small_n: bool = False
    effective_users: float | None = None  # paired: of the pairs; unpaired: the smaller cell's
    weighting: str = "instance"
    note: str | None = None  # why the interval and p are withheld

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---- users as clusters ----------------------------------------------------------------------------

@dataclass(frozen=True)
class _Clusters:
    """Per-user sums and counts of the kept values (users sorted, so instance order never matters)."""

    sums: np.ndarray
    counts: np.ndarray
    low: float = -math.inf  # the smallest and largest value averaged
    high: float = math.inf
    binary: bool = False  # every value at one end of the score scale (0/100 scores)

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    @property
    def n_users(self) -> int:
        return len(self.counts)

    @property
    def mean(self) -> float:
        return float(self.sums.sum() / self.counts.sum())

    @property
    def effective_users(self) -> float | None:
        return kish_users(self.counts) if self.n_users else None

    @property
    def flat(self) -> bool:
        """Every user's mean the same value (up to rounding): no variation between users to estimate."""
        means = self.sums / self.counts
        return bool(np.ptp(means) <= 1e-9 * max(1.0, float(np.max(np.abs(means)))))


def _per_user(g: _Clusters) -> _Clusters:
    """Each user as one value, its mean: the clusters of the mean of users' means (weighting "user")."""
    if not g.n_users:
        return g
    means = g.sums / g.counts
    binary = bool(np.all((means == SCALE[0]) | (means == SCALE[1])))
    return _Clusters(means, np.ones(len(means)), float(means.min()), float(means.max()), binary)


def _weighted(g: _Clusters, weighting: str) -> _Clusters:
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}, got {weighting!r}")
    return _per_user(g) if weighting == "user" else g


def _where(values: Any, i: int) -> str:
    """Value i named by its instance where the caller gave them (a Series indexed by instance id)."""
    return f"instance {values.index[i]!r}" if isinstance(values, pd.Series) else f"value {i}"


def numbers(values: Sequence[float | None], label: str = "values") -> np.ndarray:
    """`values` as floats, NaN for unscored (None / NaN). A string or an infinite value is refused with
    `label` (the caller's name for the cell) and the instance (a Series' index) in the message: it is
    neither a score nor unscored."""
    if isinstance(values, (np.ndarray, pd.Series)) and values.dtype.kind in "fiu":  # numbers: skip the parse
        x = np.asarray(values, dtype=float)
    else:
        raw = pd.Series(list(values), dtype=object)
        x = np.asarray(pd.to_numeric(raw, errors="coerce"), dtype=float)
        bad = np.flatnonzero(np.isnan(x) & raw.notna().to_numpy())
        if len(bad):
            raise ValueError(f"{label}: {_where(values, int(bad[0]))} is {raw.iloc[bad[0]]!r}, not a number "
                             "(a score is a finite number; an unscored instance is None or NaN)")
    bad = np.flatnonzero(np.isinf(x))
    if len(bad):
        raise ValueError(f"{label}: {_where(values, int(bad[0]))} is {x[bad[0]]}: a score must be finite "
                         "(an unscored instance is None or NaN)")
    return x


def _kept(values: Sequence[float | None], clusters: Sequence[Hashable],
          label: str = "values") -> tuple[np.ndarray, np.ndarray]:
    x = numbers(values, label)
    c = clusters if isinstance(clusters, np.ndarray) else np.asarray(list(clusters), dtype=object)
    if len(x) != len(c):
        raise ValueError(f"{label}: {len(x)} values but {len(c)} cluster labels: one user id per value is needed")
    keep = ~np.isnan(x)
    return x[keep], c[keep]


def _by_user(x: np.ndarray, c: np.ndarray) -> _Clusters:
    if c.dtype.kind in "iu":  # integer user ids (simulations): numpy's unique, no string conversion
        codes = np.unique(c, return_inverse=True)[1]
    else:
        codes, _ = pd.factorize(pd.Series(c, dtype=object).astype(str), sort=True)
    if not len(x):
        return _Clusters(np.zeros(0), np.zeros(0))
    binary = bool(np.all((x == SCALE[0]) | (x == SCALE[1])))
    return _Clusters(np.bincount(codes, weights=x), np.bincount(codes).astype(float), float(x.min()),
                     float(x.max()), binary)


def _scale(g: _Clusters, bounds: Bounds | str) -> Bounds:
    """The scale the mean lies on: the score scale when every value is on it ("auto"), else as given."""
    if bounds == "auto":
        return SCALE if SCALE[0] <= g.low and g.high <= SCALE[1] else None
    return bounds  # type: ignore[return-value]


def cluster_se(values: Sequence[float | None], clusters: Sequence[Hashable]) -> float | None:
    """Cluster-robust standard error of the mean (CR1): sqrt(G/(G-1) * sum_g (sum_i (x_gi - mean))^2) / n.

    This is statsmodels' OLS-on-a-constant `cov_type="cluster"` with its default small-sample correction
    (G/(G-1) * (n-1)/(n-k), and k = 1). None with fewer than two users. (The intervals use CR2, equal to
    this when every user has as many instances; the variance decomposition keeps CR1.)"""
    g = _by_user(*_kept(values, clusters))
    if g.n_users < 2:
        return None
    resid = g.sums - g.counts * g.mean  # each user's summed residual
    return float(math.sqrt(g.n_users / (g.n_users - 1) * float(np.sum(resid ** 2))) / g.n)


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1 (e.g. 0.95), got {level}")


def _t(level: float, df: float) -> float:
    return float(stats.t.ppf(1 - (1 - level) / 2, df))


def withheld(g: _Clusters) -> str | None:
    """Why no interval can be given for these users (None: one can)."""
    if g.n_users < 2:
        return "one user: no variation between users to estimate an interval from"
    eff = g.effective_users or 0.0
    if eff < MIN_EFFECTIVE_USERS:
        return (f"{eff:.2f} effective users of {g.n_users} (one user holds nearly every instance): below "
                f"{MIN_EFFECTIVE_USERS:g}, that user's values are the estimate and no interval is given")
    return None


def _estimate(g: _Clusters, level: float, bounds: Bounds | str, weighting: str = "instance",
              n: int | None = None) -> Estimate:
    """The estimate of clusters `g` (already weighted); `n`: the instances it rests on, where g's counts
    are not instances (weighting "user")."""
    if g.n == 0:
        return Estimate(None, None, None, None, 0, 0, level, METHOD, weighting=weighting)
    n = g.n if n is None else n
    small, eff = g.n_users < SMALL_N_USERS, g.effective_users
    if (why := withheld(g)) is not None:
        return Estimate(g.mean, None, None, None, n, g.n_users, level, METHOD, None, small, eff, weighting, why)
    flat = g.flat
    var, df = 0.0 if flat else cr2_variance(g.sums, g.counts), bm_df(g.counts)
    se, scale = math.sqrt(var), _scale(g, bounds)
    if scale is None:
        if flat:  # no variation and no scale to bound the mean by: no honest interval
            return Estimate(g.mean, None, None, se, n, g.n_users, level, T_METHOD, df, small, eff, weighting,
                            "every user's mean is the same and the values lie off the 0-100 scale")
        half = _t(level, df) * se
        return Estimate(g.mean, g.mean - half, g.mean + half, se, n, g.n_users, level, T_METHOD, df, small, eff,
                        weighting)
    lo, width = scale[0], scale[1] - scale[0]
    # graded scores: the side towards the users' long tail lengthened by the Edgeworth skewness term
    # (small_sample.korn_graubard; 50 users at mean 95, ICC 0.5 covered 93.6% without it, 95.8% with it).
    # 0/100 scores: none, their Clopper-Pearson interval carries a binomial's skew and covers >= 95.8%
    # without it (docs/numbers.md). Every user's mean equal: variance 0, so korn_graubard gives the
    # interval of one draw per user at that value.
    skew = 0.0 if g.binary else cluster_skewness(g.sums, g.counts)
    interval_var = 0.0 if flat else _ends_variance(g, scale)
    (p_low, p_high), _ = korn_graubard((g.mean - lo) / width, interval_var / width ** 2, df, eff, level,
                                       counts=g.binary, skewness=skew)
    return Estimate(g.mean, float(lo + width * p_low), float(lo + width * p_high), se, n, g.n_users, level, METHOD,
                    df, small, eff, weighting)


def _ends_variance(g: _Clusters, scale: tuple[float, float]) -> float:
    """The CR2 variance with a pseudo-user added at the far end of the scale, around the observed mean:
    Agresti & Coull's "add failures and successes", at the level of users. Why: near 0 or 100 the users
    that pull the mean inwards are rare, a few users often include none of them, and the variance of the
    users seen is then too small on exactly the side that misses (84% coverage at mean 95, 6 users,
    intra-user correlation 0.5 without it). Its weight: PSEUDO_USER of an average user."""
    m = g.counts.mean() * PSEUDO_USER["binary" if g.binary else "graded"]
    far = scale[0] if g.mean - scale[0] > scale[1] - g.mean else scale[1]
    sums, counts = np.append(g.sums, far * m), np.append(g.counts, m)
    resid = sums - counts * g.mean
    return float(np.sum(resid ** 2 / (1 - counts / counts.sum())) / g.n ** 2)


def cluster_mean(values: Sequence[float | None], clusters: Sequence[Hashable], *, level: float = 0.95,
                 bounds: Bounds | str = "auto", weighting: Weighting | str = "instance",
                 label: str = "values") -> Estimate:
    """The mean of `values` with its user-clustered interval (`clusters[i]`: the user of value i) and the
    CR2 SE. `weighting`: "instance" (the mean over the values) or "user" (the mean of the users' means).
    Unscored (NaN/None) values are dropped; inf or a string raises, naming `label` and the value (a Series
    indexed by instance id names the instance). `bounds`: the scale of the values ("auto": 0-100 when every
    value lies there; None: unbounded)."""
    _check_level(level)
    g = _by_user(*_kept(values, clusters, label))
    return _estimate(_weighted(g, weighting), level, bounds, weighting, g.n)


def naive_mean(values: Sequence[float | None], *, level: float = 0.95) -> Estimate:
    """The per-instance interval (mean +- t * sd / sqrt(n)), as if every instance were independent: what
    a harness without clustering reports. Kept for comparison (scripts/coverage_check.py)."""
    x = numbers(values)
    x = x[~np.isnan(x)]
    if len(x) < 2:
        return Estimate(float(x.mean()) if len(x) else None, None, None, None, len(x), len(x), level, "naive-t")
    se = float(x.std(ddof=1) / math.sqrt(len(x)))
    t = float(stats.t.ppf(1 - (1 - level) / 2, len(x) - 1))
    m = float(x.mean())
    return Estimate(m, m - t * se, m + t * se, se, len(x), len(x), level, "naive-t")


# ---- power -------------------------------------------------------------------------------------

def _power_factor(n_users: int, alpha: float, power: float) -> float:
    df = n_users - 1
    return float(stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df))


def mde(se: float | None, n_users: int, *, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """Minimum detectable difference: (t_{1-alpha/2} + t_power) * SE, with G - 1 degrees of freedom."""
    if se is None or n_users < 2:
        return None
    return _power_factor(n_users, alpha, power) * se


def users_needed(se: float, n_users: int, delta: float, *, alpha: float = ALPHA, power: float = POWER,
                 max_users: int = 10_000_000) -> int:
    """Users needed to detect a difference `delta` from a pilot with paired SE `se` on `n_users` users.

    The SE of a mean over users shrinks as 1 / sqrt(G): at G users it is se * sqrt(n_users / G). Returns
    the smallest G >= 2 with mde(G) <= |delta|."""
    if n_users < 2 or se < 0:
        raise ValueError(f"a pilot needs >= 2 users and a non-negative SE, got n_users={n_users}, se={se}")
    if delta == 0:
        raise ValueError("a difference of 0 cannot be detected: name the smallest difference that matters")
    if se == 0:
        return 2
    target = abs(delta)
    unit = se * math.sqrt(n_users)  # the SE at one user

    def detectable(g: int) -> bool:
        return _power_factor(g, alpha, power) * unit / math.sqrt(g) <= target

    low = 2
    if detectable(low):
        return low
    high = max(4, math.ceil((stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)) ** 2 * (unit / target) ** 2))
    while not detectable(high):
        high *= 2
        if high > max_users:
            raise ValueError(f"more than {max_users} users would be needed to detect {delta}")
    while high - low > 1:  # detectable is monotone in g: bisect
        mid = (low + high) // 2
        low, high = (low, mid) if detectable(mid) else (mid, high)
    return high


# ---- comparisons -------------------------------------------------------------------------------

def _diff_scale(xa: np.ndarray, xb: np.ndarray) -> Bounds:
    """Differences of two scores on the 0-100 scale lie in [-100, 100]; of anything else, anywhere."""
    both = np.concatenate([xa[~np.isnan(xa)], xb[~np.isnan(xb)]])
    on_scale = both.size and SCALE[0] <= both.min() and both.max() <= SCALE[1]
    return (SCALE[0] - SCALE[1], SCALE[1] - SCALE[0]) if on_scale else None


def _bound(value: float, scale: Bounds) -> float | None:
    """An interval end inside the scale; an unbounded end (too few users to bound it) is the scale's."""
    if scale is None:
        return value if math.isfinite(value) else None
    return min(max(value, scale[0]), scale[1])


def _flat_floor(d: float, effective_users: float, scale: tuple[float, float],
                level: float) -> tuple[float, float, float]:
    """(low, high, p of H0: 0) of the one-draw-per-user bound, for a difference d that every user shows.

    The sign flips cannot tell such users apart from any other shift, so alone they would give the point
    [d, d] and reject every other value. The bound asks instead how far the true difference could be from
    d while G* users (G*: effective users) all showed none of it: an instance differs from d with chance q
    at most, and all G* users show no deviation with probability (1 - q)^G*; two-sided, delta is rejected
    when 2 (1 - |delta - d| / R)^G* < alpha (R: half the scale, 100 points), i.e. the Clopper-Pearson bound
    for no event in G* draws. The paired test reports max(p of the flips, p of this bound) and its interval
    is the union of both acceptance sets, so the two agree."""
    half = (scale[1] - scale[0]) / 2
    reach = half * (1 - ((1 - level) / 2) ** (1 / effective_users))
    p0 = min(1.0, 2 * max(0.0, 1 - abs(d) / half) ** effective_users)
    return max(scale[0], d - reach), min(scale[1], d + reach), p0


def _paired_values(a: Sequence[float | None], b: Sequence[float | None], clusters: Sequence[Hashable],
                   label: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    if not (len(a) == len(b) == len(clusters)):
        raise ValueError(f"{label}: paired cells need one value each per instance: {len(a)}, {len(b)}, "
                         f"{len(clusters)} given")
    xa, xb = numbers(a, f"{label} (a)"), numbers(b, f"{label} (b)")
    return xa, xb, *_kept(xa - xb, clusters, label)  # NaN in either cell: not a pair, dropped


def paired_difference(a: Sequence[float | None], b: Sequence[float | None], clusters: Sequence[Hashable], *,
                      level: float = 0.95, resamples: int = 2000, seed: int = 0,
                      weighting: Weighting | str = "instance", label: str = "paired cells") -> Difference:
    """a - b over the instances scored in both cells (`a[i]`, `b[i]`: instance i; `clusters[i]`: its user);
    `weighting` "user": the mean of the users' mean differences.

    p: the sign-flip permutation test over users (exact up to 12 users, else `resamples` random patterns
    drawn with `seed`), joined by the one-draw-per-user bound where every user's difference is the same
    (_flat_floor); interval: every difference that same test does not reject at 1 - level, so it excludes
    0 exactly when p < 1 - level; SE: CR2; mde: the detectable difference at this many users. Below 2
    effective users the interval, SE and p are withheld (`note` says why)."""
    _check_level(level)
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    xa, xb, x, c = _paired_values(a, b, clusters, label)
    raw = _by_user(x, c)
    g = _weighted(raw, weighting)
    small, eff = g.n_users < SMALL_N_USERS, g.effective_users
    if g.n == 0:
        return Difference(None, None, None, None, None, 0, 0, True, None, level, PAIRED_METHOD, small, None,
                          weighting)
    if (why := withheld(g)) is not None:
        return Difference(g.mean, None, None, None, None, raw.n, g.n_users, True, None, level, PAIRED_METHOD,
                          small, eff, weighting, why)
    scale = _diff_scale(xa, xb)
    flip = sign_flip(g.sums, g.counts, alpha=1 - level, resamples=resamples, rng=np.random.default_rng(seed + 1))
    low, high, p = _bound(flip.low, scale), _bound(flip.high, scale), flip.p_value
    if g.flat and scale is not None:  # the floor enters the test before it is inverted, never after
        f_low, f_high, f_p = _flat_floor(g.mean, eff or 1.0, scale, level)
        low, high, p = min(low, f_low), max(high, f_high), max(p, f_p)  # type: ignore[type-var]
    se = math.sqrt(cr2_variance(g.sums, g.counts))
    return Difference(g.mean, low, high, se, p, raw.n, g.n_users, True, mde(se, g.n_users), level, PAIRED_METHOD,
                      small, eff, weighting)


def _welch_var(g: _Clusters, level: float) -> tuple[float, float]:
    """(CR2 variance, its df) of one cell's mean; a cell on the score scale with no variation gets the
    variance its own (non-zero-width) interval implies, so a difference of two such cells has a width."""
    var, df = (0.0 if g.flat else cr2_variance(g.sums, g.counts)), bm_df(g.counts)
    if var == 0:
        e = _estimate(g, level, "auto")
        if e.ci_low is not None and e.ci_high is not None:
            var = ((e.ci_high - e.ci_low) / (2 * _t(level, df))) ** 2
    return var, df


def unpaired_difference(a: Sequence[float | None], clusters_a: Sequence[Hashable], b: Sequence[float | None],
                        clusters_b: Sequence[Hashable], *, level: float = 0.95,
                        weighting: Weighting | str = "instance", label: str = "unpaired cells") -> Difference:
    """a - b for cells on different instances: never paired. Welch's t on the two cells' CR2 variances
    with Satterthwaite's degrees of freedom (each cell's Bell-McCaffrey df); interval and p from that one
    t, so they agree. n and n_users count both cells (users once each); effective_users is the smaller
    cell's, and below 2 the interval and p are withheld."""
    _check_level(level)
    ka, kb = _kept(a, clusters_a, f"{label} (a)"), _kept(b, clusters_b, f"{label} (b)")
    ra, rb = _by_user(*ka), _by_user(*kb)
    ga, gb = _weighted(ra, weighting), _weighted(rb, weighting)
    n, n_users = ra.n + rb.n, len(set(map(str, ka[1])) | set(map(str, kb[1])))
    small = min(ga.n_users, gb.n_users) < SMALL_N_USERS
    if ga.n == 0 or gb.n == 0:
        return Difference(None, None, None, None, None, n, n_users, False, None, level, UNPAIRED_METHOD, small,
                          None, weighting)
    diff, eff = ga.mean - gb.mean, min(ga.effective_users or 0.0, gb.effective_users or 0.0)
    why = withheld(ga) or withheld(gb)
    if why is not None:
        return Difference(diff, None, None, None, None, n, n_users, False, None, level, UNPAIRED_METHOD, small,
                          eff, weighting, why)
    (va, dfa), (vb, dfb) = _welch_var(ga, level), _welch_var(gb, level)
    se = math.sqrt(va + vb)
    if se == 0:
        p = 1.0 if diff == 0 else 0.0
        return Difference(diff, None, None, se, p, n, n_users, False, None, level, UNPAIRED_METHOD, small, eff,
                          weighting, "no variation in either cell and no scale to bound them by")
    df = (va + vb) ** 2 / (va ** 2 / dfa + vb ** 2 / dfb)
    half = _t(level, df) * se
    p = float(2 * stats.t.sf(abs(diff) / se, df))
    return Difference(diff, diff - half, diff + half, se, p, n, n_users, False,
                      mde(se, min(ga.n_users, gb.n_users)), level, UNPAIRED_METHOD, small, eff, weighting)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of the p-values one table shows; None (no test) stays None and does not
    count as a comparison."""
    present = [(i, p) for i, p in enumerate(p_values) if p is not None and not math.isnan(p)]
    out: list[float | None] = [None] * len(p_values)
    m, running = len(present), 0.0
    for rank, (i, p) in enumerate(sorted(present, key=lambda t: t[1])):
        running = max(running, min(1.0, (m - rank) * p))  # adjusted p never decreases along the order
        out[i] = running
    return out
