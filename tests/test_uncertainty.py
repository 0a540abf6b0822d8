"""perseval.metrics.uncertainty, cross-checked against scipy and statsmodels and on hand-computed fixtures."""
import math
import time

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.multitest import multipletests

from perseval.metrics.coverage import coverage
from perseval.metrics.uncertainty import (cluster_mean, cluster_se, holm, mde, naive_mean, paired_difference,
                                          unpaired_difference, users_needed)


def clustered_fixture(seed=3, n_users=12):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 7, size=n_users)
    users = np.repeat([f"u{g}" for g in range(n_users)], sizes)
    effect = rng.normal(0, 15, size=n_users)
    values = 50 + np.repeat(effect, sizes) + rng.normal(0, 10, size=len(users))
    return values, users


def statsmodels_cluster_se(values, users):
    codes = np.unique(users, return_inverse=True)[1]
    fit = sm.OLS(values, np.ones(len(values))).fit(cov_type="cluster", cov_kwds={"groups": codes})
    return float(fit.params[0]), float(fit.bse[0])


def test_cluster_se_matches_statsmodels_ols_on_a_constant():
    values, users = clustered_fixture()
    mean, se = statsmodels_cluster_se(values, users)
    est = cluster_mean(values, users, resamples=200)
    assert est.mean == pytest.approx(mean) and est.se == pytest.approx(se, rel=1e-10)
    assert cluster_se(values, users) == pytest.approx(se, rel=1e-10)
    # and it is larger than the naive SE here (users share a large effect)
    assert est.se > naive_mean(values).se


def test_cluster_se_drops_unscored_before_statsmodels_sees_them():
    values, users = clustered_fixture(seed=5)
    with_gaps = values.astype(object)
    with_gaps[[0, 4, 9]] = None
    kept = np.array([v is not None for v in with_gaps])
    _, se = statsmodels_cluster_se(values[kept], users[kept])
    est = cluster_mean(with_gaps, users)
    assert est.n == kept.sum() and est.se == pytest.approx(se, rel=1e-10)


@pytest.mark.parametrize("skewed", [False, True])
def test_bootstrap_matches_scipy_bca_on_unclustered_data(skewed):
    """One instance per user: the cluster bootstrap is the ordinary bootstrap of the mean, and its BCa
    interval is scipy's default one (two Monte Carlo runs: they agree to a small fraction of the SE)."""
    rng = np.random.default_rng(11)
    x = rng.exponential(20, size=80) if skewed else 100.0 * (rng.random(60) < 0.2)
    est = cluster_mean(x, [f"u{i}" for i in range(len(x))], resamples=20000, seed=1)
    ref = stats.bootstrap((x,), np.mean, n_resamples=20000, method="BCa", confidence_level=0.95,
                          random_state=np.random.default_rng(2)).confidence_interval
    se = est.se
    assert est.ci_low == pytest.approx(ref.low, abs=0.08 * se)
    assert est.ci_high == pytest.approx(ref.high, abs=0.08 * se)
    # the analytic SE with one instance per user: sqrt(n/(n-1) * sum (x - mean)^2) / n = sd / sqrt(n)
    assert se == pytest.approx(x.std(ddof=1) / math.sqrt(len(x)))


def test_bootstrap_is_deterministic_for_a_seed_and_ignores_instance_order():
    values, users = clustered_fixture()
    a = cluster_mean(values, users, seed=7)
    order = np.random.default_rng(0).permutation(len(values))
    b = cluster_mean(values[order], users[order], seed=7)
    c = cluster_mean(values, users, seed=8)
    assert (a.ci_low, a.ci_high) == (cluster_mean(values, users, seed=7).ci_low, a.ci_high)
    assert (a.ci_low, a.ci_high) == pytest.approx((b.ci_low, b.ci_high), rel=1e-12)  # the same users drawn
    assert (a.ci_low, a.ci_high) != (c.ci_low, c.ci_high)
    assert a.ci_low < a.mean < a.ci_high and a.n_users == 12 and a.method == "cluster-bootstrap BCa"


def test_level_widens_the_interval():
    values, users = clustered_fixture()
    narrow, wide = cluster_mean(values, users, level=0.8), cluster_mean(values, users, level=0.99)
    assert wide.ci_low < narrow.ci_low and wide.ci_high > narrow.ci_high
    with pytest.raises(ValueError, match="level"):
        cluster_mean(values, users, level=95)


def test_one_user_or_nothing_scored_has_no_interval():
    one = cluster_mean([10.0, 20.0, None], ["u", "u", "u"])
    assert one.mean == pytest.approx(15.0) and one.n == 2 and one.n_users == 1
    assert one.ci_low is None and one.se is None
    empty = cluster_mean([None, float("nan")], ["u", "v"])
    assert empty.mean is None and empty.n == 0 and empty.n_users == 0


def test_resampling_users_keeps_their_instances_together():
    """Two users: any bootstrap mean is a mixture of the two users' means weighted by instance counts."""
    values = [0.0, 0.0, 0.0, 100.0]
    users = ["a", "a", "a", "b"]
    est = cluster_mean(values, users, resamples=500)
    possible = {0.0, 100.0, 25.0}  # aa, bb, ab / ba (3 zeros + one 100 over 4 instances)
    assert est.ci_low in possible and est.ci_high in possible


# ---- paired ------------------------------------------------------------------------------------

PAIRED = {  # three users; cell b leaves the last instance unscored
    "users": ["u1", "u1", "u2", "u3", "u3", "u3"],
    "a": [60.0, 40.0, 30.0, 80.0, 70.0, 10.0],
    "b": [50.0, 20.0, 40.0, 70.0, 70.0, None],
}


def test_paired_difference_hand_computed():
    d = paired_difference(PAIRED["a"], PAIRED["b"], PAIRED["users"], resamples=1000)
    # differences: u1 (10, 20) sum 30; u2 (-10); u3 (10, 0) sum 10 (its 10 - None is not a pair)
    assert d.n == 5 and d.n_users == 3 and d.paired
    assert d.mean == pytest.approx(30 / 5)
    # cluster-robust SE: residual sums 30 - 2*6, -10 - 6, 10 - 2*6 -> 18, -16, -2
    se = math.sqrt(3 / 2 * (18 ** 2 + 16 ** 2 + 2 ** 2)) / 5
    assert d.se == pytest.approx(se)
    # sign flips of the user sums (30, -10, 10): |sum| >= 30 in 6 of the 8 patterns
    assert d.p_value == pytest.approx(6 / 8)
    assert d.mde == pytest.approx((stats.t.ppf(0.975, 2) + stats.t.ppf(0.8, 2)) * se)
    # resampled means lie between "all u2" (-10) and "all u1" (15)
    assert -10 <= d.ci_low < d.mean < d.ci_high <= 15


def test_paired_difference_of_a_clear_effect_is_significant():
    rng = np.random.default_rng(4)
    users = np.repeat([f"u{g}" for g in range(40)], 3)
    b = rng.normal(50, 10, size=len(users))
    a = b + 8 + rng.normal(0, 2, size=len(users))
    d = paired_difference(a, b, users)
    assert d.p_value < 0.001 and d.ci_low > 0
    assert 1 / 2001 <= d.p_value  # random flips: the observed pattern counts, p is never 0
    same = paired_difference(b, b, users)
    assert same.mean == 0 and same.p_value == 1.0


def test_paired_differs_from_unpaired_when_users_share_effects():
    rng = np.random.default_rng(9)
    users = np.repeat([f"u{g}" for g in range(30)], 4)
    base = np.repeat(rng.normal(50, 20, size=30), 4)  # a strong user effect shared by both cells
    a, b = base + 3 + rng.normal(0, 3, size=len(users)), base + rng.normal(0, 3, size=len(users))
    paired = paired_difference(a, b, users)
    unpaired = unpaired_difference(a, users, b, users)
    assert paired.mean == pytest.approx(unpaired.mean)
    assert paired.se < unpaired.se / 3 and paired.mde < unpaired.mde and not unpaired.paired


def test_unpaired_se_combines_two_statsmodels_cluster_ses():
    va, ua = clustered_fixture(seed=1)
    vb, ub = clustered_fixture(seed=2, n_users=9)
    ub = np.array([f"w{u}" for u in ub])
    d = unpaired_difference(va, ua, vb, ub)
    (ma, sa), (mb, sb) = statsmodels_cluster_se(va, ua), statsmodels_cluster_se(vb, ub)
    assert d.mean == pytest.approx(ma - mb) and d.se == pytest.approx(math.hypot(sa, sb))
    assert d.p_value == pytest.approx(2 * stats.t.sf(abs(ma - mb) / math.hypot(sa, sb), 8))
    assert d.n == len(va) + len(vb) and d.n_users == 21 and d.ci_low < d.mean < d.ci_high


# ---- Holm and power ----------------------------------------------------------------------------

def test_holm_matches_statsmodels_and_keeps_missing_tests_missing():
    p = [0.01, 0.04, 0.03, 0.20, 0.005]
    ref = multipletests(p, method="holm")[1]
    assert holm(p) == pytest.approx(list(ref))
    mixed = holm([0.01, None, 0.04, float("nan"), 0.03])
    ref3 = multipletests([0.01, 0.04, 0.03], method="holm")[1]
    assert mixed[1] is None and mixed[3] is None
    assert [mixed[0], mixed[2], mixed[4]] == pytest.approx(list(ref3))


def test_mde_of_four_users_is_tens_of_points():
    rng = np.random.default_rng(0)
    users = np.repeat(["u1", "u2", "u3", "u4"], 5)
    a, b = 100.0 * (rng.random(20) < 0.5), 100.0 * (rng.random(20) < 0.5)
    d = paired_difference(a, b, users)
    assert d.mde == pytest.approx(mde(d.se, 4)) and d.mde > 20


def test_users_needed_is_the_smallest_n_whose_mde_reaches_the_difference():
    se, n_users, delta = 6.0, 10, 5.0
    g = users_needed(se, n_users, delta)
    at = lambda k: mde(se * math.sqrt(n_users / k), k)  # noqa: E731 (the SE of a mean over k users)
    assert at(g) <= delta < at(g - 1)
    assert users_needed(se, n_users, 2 * delta) < g  # a larger difference needs fewer users
    with pytest.raises(ValueError, match="difference of 0"):
        users_needed(se, n_users, 0)


# ---- coverage (bounded: scripts/coverage_check.py runs the 1,000 experiments) --------------------

def test_clustered_interval_covers_and_naive_one_does_not():
    t0 = time.monotonic()
    c = coverage(simulations=300, n_users=50, resamples=1000, seed=1)
    assert 0.91 <= c.clustered <= 0.985
    assert c.naive < c.clustered - 0.08  # instances of one user are correlated: the naive SE is too small
    assert time.monotonic() - t0 < 60
