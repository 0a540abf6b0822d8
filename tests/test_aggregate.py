import pytest

from perseval.metrics.aggregate import OVERALL, group_table
from perseval.records import InstanceScore


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
