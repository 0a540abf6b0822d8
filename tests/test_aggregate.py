import pytest

from perseval.metrics.aggregate import OVERALL, group_table
from perseval.core.instances import InstanceScore


def s(iid, group, value, judge_repeat=0, repeat=0, metric="score", unscored=0):
    return InstanceScore(iid, "a", repeat, "j", judge_repeat, group, metric, value, n_items=2, n_unscored=unscored)


def test_group_means_and_overall_hand_computed():
    scores = [
        s("i1", "Work", 100.0), s("i1", "Work", 50.0, repeat=1),  # i1 -> 75 (repeats averaged first)
        s("i2", "Work", 25.0),                                     # Work mean = (75 + 25) / 2 = 50
        s("i3", "Health", 0.0),
        s("i4", "Health", None, unscored=2),                       # excluded from the mean, counted
    ]
    table = group_table(scores, ["score"])
    assert table.loc["Work", "score"] == pytest.approx(50.0)
    assert table.loc["Health", "score"] == pytest.approx(0.0)
    # Overall is the mean over instances, not over groups: (75 + 25 + 0) / 3
    assert table.loc[OVERALL, "score"] == pytest.approx(100 / 3)
    assert table.loc["Health", "unscored_instances"] == 1 and table.loc[OVERALL, "unscored_items"] == 2
    assert table.loc[OVERALL, "n"] == 4


def test_intervals_rest_on_users_and_leave_the_means_unchanged():
    from perseval.metrics.settings import StatisticsSettings
    from perseval.metrics.uncertainty import cluster_mean

    def su(iid, user, group, value, repeat=0):
        return InstanceScore(iid, "a", repeat, "j", 0, group, "score", value, 1, int(value is None), user_id=user)

    scores = [su("i1", "u1", "Work", 100.0), su("i1", "u1", "Work", 0.0, repeat=1),  # i1 -> 50
              su("i2", "u1", "Work", 80.0), su("i3", "u2", "Work", 20.0), su("i4", "u2", "Health", 60.0),
              su("i5", "u3", "Health", None), su("i6", "u3", "Health", 90.0), su("i7", "u4", "Health", 10.0)]
    st = StatisticsSettings(resamples=500, seed=4)
    plain, table = group_table(scores, ["score"]), group_table(scores, ["score"], statistics=st)
    assert list(table["score"]) == list(plain["score"]) and "ci_low" not in plain.columns
    expected = cluster_mean([50.0, 80.0, 20.0, 60.0, None, 90.0, 10.0], ["u1", "u1", "u2", "u2", "u3", "u3", "u4"])
    overall = table.loc[OVERALL]
    assert (overall["ci_low"], overall["ci_high"], overall["se"]) == (expected.ci_low, expected.ci_high, expected.se)
    assert overall["n_users"] == 4 and table.loc["Work", "n_users"] == 2 and table.loc["Health", "n_users"] == 3
    assert overall["ci_low"] < overall["score"] < overall["ci_high"]
