"""What each number estimates (issue 43): the paired interval inverts the very test it reports (constant
differences included), effective users on every estimate and no interval below 2 of them, the mean of users'
means on request with its own interval, the one-draw-per-user interval of a constant score, and values that
are not scores refused by name. Cross-checked against scipy and statsmodels."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from perseval.core.instances import InstanceScore
from perseval.metrics.aggregate import OVERALL, group_table
from perseval.metrics.settings import StatisticsSettings
from perseval.metrics.uncertainty import cluster_mean, paired_difference, unpaired_difference
from perseval.pipeline.plan import entry_statistics, make_plan, score_key
from perseval.experiment.load import load_experiment

from .conftest import CONFIGS


def _excludes_0(d) -> bool:
    return d.ci_low is not None and not d.ci_low <= 0 <= d.ci_high


# ---- the paired interval and its test -----------------------------------------------------------------

@pytest.mark.parametrize("n_users", [8, 12, 50])
def test_a_constant_difference_gets_an_interval_that_agrees_with_its_p(n_users):
    """The audit's case: every instance differs by 33.3 points. The sign flips alone give p = 2/2^G and the
    point [d, d]; the one-draw-per-user bound widens it. Both enter the one test that is reported, so p <
    0.05 exactly when the interval excludes 0 (at 8 users it holds 0 and p is the bound's, 0.078)."""
    users = np.repeat(np.arange(n_users), 3)
    d = paired_difference([200 / 3] * (3 * n_users), [100 / 3] * (3 * n_users), users)
    assert d.mean == pytest.approx(100 / 3) and d.effective_users == pytest.approx(n_users)
    assert (d.p_value < 0.05) == _excludes_0(d)
    # the bound: Clopper-Pearson's upper limit for no event in G draws, times the 100-point half scale
    reach = 100 * proportion_confint(0, n_users, alpha=0.05, method="beta")[1]
    assert (d.ci_low, d.ci_high) == (pytest.approx(100 / 3 - reach), pytest.approx(100 / 3 + reach))
    bound_p = 2 * (1 - (100 / 3) / 100) ** n_users
    assert d.p_value == pytest.approx(max(bound_p, 2 / 2 ** n_users if n_users <= 12 else 0), abs=1e-3)
    assert _excludes_0(d) == (n_users > 8)  # 36.9 points of reach at 8 users, 26.5 at 12, 7.1 at 50


def _random_design(rng: np.random.Generator):
    n_users = int(rng.choice([2, 3, 5, 6, 7, 8, 10, 12, 13, 20, 40]))
    sizes = rng.integers(1, 9, size=n_users)
    if rng.random() < 0.2:
        sizes[0] = int(rng.integers(20, 300))  # one user holds most instances
    users = np.repeat(np.arange(n_users), sizes)
    n, kind = len(users), rng.choice(["binary", "graded", "constant", "user-constant", "off-scale"])
    b = 100.0 * (rng.random(n) < rng.random()) if kind == "binary" else rng.uniform(0, 100, n)
    if kind == "binary":
        a = 100.0 * (rng.random(n) < rng.random())
    elif kind == "constant":
        b = np.full(n, rng.uniform(0, 50))
        a = b + rng.choice([0.0, rng.uniform(0, 50)])
    elif kind == "user-constant":  # every user the same mean difference, instances around it
        b = np.full(n, 50.0)
        a = b + rng.uniform(-40, 40) + np.tile([-5.0, 5.0], n)[:n] * (np.bincount(users)[users] % 2 == 0)
    elif kind == "off-scale":
        a = b * 3 + rng.normal(0, 30, n)
    else:
        a = np.clip(b + rng.normal(rng.uniform(-20, 20), 20, n), 0, 100)
    return a, b, users


def test_the_paired_interval_excludes_0_exactly_when_p_is_below_alpha_over_random_designs():
    rng = np.random.default_rng(43)
    seen = set()
    for k in range(400):
        a, b, users = _random_design(rng)
        level = float(rng.choice([0.9, 0.95, 0.99]))
        weighting = "user" if k % 3 == 0 else "instance"
        d = paired_difference(a, b, users, level=level, resamples=300, seed=k, weighting=weighting)
        if d.p_value is None:  # withheld: no interval either, and the reason
            assert d.ci_low is None and d.ci_high is None and d.note
            seen.add("withheld")
            continue
        assert (d.p_value < 1 - level) == _excludes_0(d), (k, d)
        if d.ci_low is not None:
            assert d.ci_low <= d.mean <= d.ci_high, (k, d)
        seen.add(_excludes_0(d))
    assert seen == {True, False, "withheld"}


def test_the_paired_user_weighted_p_is_scipys_sign_flip_on_users_mean_differences():
    rng = np.random.default_rng(8)
    sizes = rng.integers(1, 7, size=9)
    users = np.repeat(np.arange(9), sizes)
    a, b = rng.uniform(0, 100, len(users)), rng.uniform(0, 80, len(users))
    d = paired_difference(a, b, users, weighting="user")
    means = np.array([(a - b)[users == u].mean() for u in range(9)])
    ref = stats.permutation_test((means,), np.sum, permutation_type="samples", n_resamples=np.inf)
    assert d.mean == pytest.approx(means.mean()) and d.p_value == pytest.approx(ref.pvalue)
    assert d.se == pytest.approx(stats.sem(means)) and d.n == len(users) and d.weighting == "user"


# ---- effective users -----------------------------------------------------------------------------------

def test_effective_users_are_kishs_and_below_2_the_interval_is_withheld_with_the_reason():
    sizes = [1000, 1, 1, 1, 1, 1, 1, 1]  # the audit's design: one user holds nearly every instance
    users = np.repeat(np.arange(8), sizes)
    values = np.random.default_rng(1).uniform(40, 100, len(users))
    e = cluster_mean(values, users)
    assert e.effective_users == pytest.approx(sum(sizes) ** 2 / sum(s * s for s in sizes)) and e.effective_users < 1.02
    assert (e.ci_low, e.ci_high, e.se) == (None, None, None) and "1.01 effective users of 8" in e.note
    assert e.mean == pytest.approx(values.mean())  # the estimate stays
    d = paired_difference(values, values[::-1], users)
    assert (d.ci_low, d.p_value, d.mde) == (None, None, None) and "effective users" in d.note
    u = unpaired_difference(values, users, values, users + 10)
    assert u.p_value is None and u.note and u.effective_users == pytest.approx(e.effective_users)
    # the same users, each its own weight: 8 effective users and an interval
    per_user = cluster_mean(values, users, weighting="user")
    assert per_user.effective_users == 8 and per_user.ci_low is not None and per_user.note is None
    # one user dominating at 50 users: an interval, and effective users far below 50 say why it is wide
    big = np.repeat(np.arange(50), [300] + [5] * 49)
    wide = cluster_mean(np.random.default_rng(2).uniform(0, 100, len(big)), big)
    assert 3 < wide.effective_users < 4 and wide.ci_low is not None


# ---- the mean of users' means ----------------------------------------------------------------------------

def test_user_weighting_is_the_mean_of_users_means_with_its_own_interval():
    """Equal weight per user: the CR2 SE of the users' means is scipy's standard error of the mean, the
    df G - 1, and the unpaired difference Welch's t on the users' means whatever their sizes."""
    rng = np.random.default_rng(5)
    sizes = rng.integers(1, 12, size=10)
    users = np.repeat(np.arange(10), sizes)
    values = np.clip(rng.normal(60, 20, len(users)) + np.repeat(rng.normal(0, 10, 10), sizes), 0, 100)
    means = np.array([values[users == u].mean() for u in range(10)])
    e, inst = cluster_mean(values, users, weighting="user"), cluster_mean(values, users)
    assert e.mean == pytest.approx(means.mean()) and inst.mean == pytest.approx(values.mean())
    assert e.se == pytest.approx(stats.sem(means)) and e.df == pytest.approx(9) and e.n == len(values)
    assert e.ci_low < e.mean < e.ci_high and e.weighting == "user" and e.effective_users == 10
    other = np.repeat(np.arange(20, 27), rng.integers(1, 9, size=7))
    vb = rng.uniform(20, 90, len(other))
    d = unpaired_difference(values, users, vb, other, weighting="user")
    mb = np.array([vb[other == u].mean() for u in range(20, 27)])
    ref = stats.ttest_ind(means, mb, equal_var=False)
    assert d.p_value == pytest.approx(ref.pvalue, rel=1e-9)
    ci = ref.confidence_interval(0.95)
    assert (d.ci_low, d.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-9)
    with pytest.raises(ValueError, match="weighting must be one of instance, user"):
        cluster_mean(values, users, weighting="users")


def _score(iid, user, group, value):
    return InstanceScore(iid, "a", 0, "j", 0, group, "score", value, 1, int(value is None), user_id=user)


def test_the_score_table_takes_the_weighting_and_the_default_stays_the_instance_mean():
    scores = [_score("i1", "u1", "G", 100.0), _score("i2", "u1", "G", 100.0), _score("i3", "u1", "H", 100.0),
              _score("i4", "u2", "G", 0.0), _score("i5", "u3", "H", 50.0), _score("i6", "u3", "H", None)]
    plain = group_table(scores, ["score"], statistics=StatisticsSettings())
    users = group_table(scores, ["score"], statistics=StatisticsSettings(weighting="user"))
    assert plain.loc[OVERALL, "score"] == pytest.approx(350 / 5) and users.loc[OVERALL, "score"] == pytest.approx(50)
    assert users.loc["G", "score"] == pytest.approx(50) and users.loc["H", "score"] == pytest.approx(75)
    assert plain.loc[OVERALL, "effective_users"] == pytest.approx(25 / 11) and users.loc[OVERALL, "effective_users"] == 3
    direct = cluster_mean([100.0, 100, 100, 0, 50, None], ["u1", "u1", "u1", "u2", "u3", "u3"], weighting="user")
    assert (users.loc[OVERALL, "ci_low"], users.loc[OVERALL, "ci_high"]) == (direct.ci_low, direct.ci_high)


def test_the_weighting_enters_the_score_key_only_when_it_is_not_the_default(tmp_path):
    exp = load_experiment(CONFIGS / "experiments" / "quickstart.yaml")
    default = StatisticsSettings()
    # the key an instance-weighted cell always had: the settings as they were dumped before the field existed
    old = {k: v for k, v in default.model_dump().items() if k != "weighting"}
    from perseval.core.hashing import content_key
    from perseval.pipeline import stages
    assert score_key("j", default) == content_key(*stages.SCORE.key_head, "j", old)
    assert score_key("j", StatisticsSettings(weighting="user")) != score_key("j", default)
    # per benchmark entry: the fields the entry sets over the experiment's
    exp.experiment.statistics = StatisticsSettings(level=0.9)
    entry = exp.experiment.benchmarks[0]
    entry.statistics = StatisticsSettings.model_validate({"weighting": "user"})
    merged = entry_statistics(exp, entry)
    assert (merged.level, merged.weighting) == (0.9, "user")
    assert entry_statistics(exp, exp.experiment.benchmarks[1]).weighting == "instance"
    plan = make_plan(exp)
    assert {c.statistics.weighting for c in plan.cells if c.bench_index == 0} == {"user"}
    assert {c.statistics.weighting for c in plan.cells if c.bench_index == 1} == {"instance"}


# ---- constant scores and values that are not scores ------------------------------------------------------

def test_a_constant_graded_score_gets_the_interval_of_one_draw_per_user_at_that_value():
    """The audit's [62.6, 70.6] for 40 instances of 66.7 from 8 users: now Jeffreys' interval of 8 draws at
    2/3 (statsmodels' on the fractional count), as all-100s get Clopper-Pearson's of one draw per user."""
    e = cluster_mean(np.full(40, 200 / 3), np.repeat(np.arange(8), 5))
    low, high = proportion_confint(8 * 2 / 3, 8, alpha=0.05, method="jeffreys")
    assert (e.ci_low, e.ci_high) == (pytest.approx(100 * low), pytest.approx(100 * high))
    assert e.ci_high - e.ci_low > 50 and e.se == 0
    # each user's instances vary, but every user's mean is the same: no variation between users either
    flat = cluster_mean(np.tile([60.0, 400 / 3 - 60], 20),  # each user's mean 66.7
                        np.repeat(np.arange(20), 2))
    low, high = proportion_confint(20 * 2 / 3, 20, alpha=0.05, method="jeffreys")
    assert (flat.ci_low, flat.ci_high) == (pytest.approx(100 * low), pytest.approx(100 * high))


@pytest.mark.parametrize("bad", [math.inf, -math.inf, "unscored"])
def test_infinite_and_string_scores_are_refused_naming_the_cell_and_instance(bad):
    values = pd.Series([50.0, bad, 70.0], index=["i1", "i2", "i3"], dtype=object)
    with pytest.raises(ValueError, match=r"cell iba/x: instance 'i2' is .*(finite|not a number)"):
        cluster_mean(values, ["u1", "u2", "u3"], label="cell iba/x")
    with pytest.raises(ValueError, match=r"value 1 is"):
        paired_difference([1.0, bad], [1.0, 2.0], ["u", "v"])
    scores = [_score("i1", "u1", "G", 50.0), _score("i2", "u2", "G", bad)]
    with pytest.raises(ValueError, match=r"iba/iba-rag/m/-/j, metric score: instance 'i2' is"):
        group_table(scores, ["score"], statistics=StatisticsSettings(), label="iba/iba-rag/m/-/j")
    # None and NaN stay unscored: dropped, never refused
    assert cluster_mean([50.0, None, float("nan"), 70.0], ["u1", "u2", "u3", "u4"]).n == 2


def test_the_wide_headline_shows_effective_users_only_where_they_differ_from_users_by_over_20_percent():
    from rich.console import Console

    from perseval.report.views.headline import wide_table
    from tests.record_helpers import cell

    def render(effective):
        row = cell("b", "a", "j", 50.0, 40.0, 60.0, users=50, scored=545)
        row = row.model_copy(update={"estimate": row.estimate.model_copy(update={"effective_users": effective})})
        console = Console(width=250, record=True)
        console.print(wide_table([row]))
        return console.export_text()

    assert "eff. users" in render(3.25) and "3.2" in render(3.25)  # one user holding 300 of 545 instances
    assert "eff. users" not in render(43.0)  # 2-8 instances each: within 20% of the users


def test_the_paired_tests_power_grows_with_the_difference_and_is_its_type_i_error_at_none():
    from perseval.metrics.coverage import power

    assert power(60, 20, 0.5, 0.3, 0.3, kind="continuous", seed=1) > 0.9
    assert power(60, 20, 0.5, 0.3, 0.0, kind="continuous", seed=1) < 0.15
    assert power(60, 6, 0.5, 0.3, 0.05, kind="binary", seed=1) < power(60, 50, 0.5, 0.3, 0.05, kind="binary", seed=1)
