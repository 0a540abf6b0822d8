"""Inter-judge alpha on per-repeat ratings at the level their metric treats them (issue 31), against the
krippendorff package."""
from collections import defaultdict

import krippendorff
import numpy as np
import pytest

from perseval.report.analyses.reliability import _alpha, level


def test_graded_ratings_are_interval_ranks_ordinal_and_pass_fail_nominal():
    assert level({"criterion"}, [1.0, 4.0, 7.0]) == "interval"
    assert level({"rank"}, [1.0, 2.0, 3.0]) == "ordinal"
    assert level({"criterion"}, [0.0, 1.0]) == "nominal" == level({"checkpoint"}, [0.0, 1.0])


def test_alpha_takes_each_repeat_as_given_not_the_repeats_mean():
    """Two judges, two repeats each, on three graded items: one unit per (item, judge repeat). Averaging
    the repeats first would rate item c1 7.5 by A: a value no judge gave."""
    a = {("c0", 0): 2.0, ("c0", 1): 3.0, ("c1", 0): 7.0, ("c1", 1): 8.0, ("c2", 0): 5.0, ("c2", 1): 5.0}
    b = {("c0", 0): 2.0, ("c0", 1): 2.0, ("c1", 0): 8.0, ("c1", 1): 9.0, ("c2", 0): 4.0, ("c2", 1): 6.0}
    table = defaultdict(dict)
    for (item, rep), v in a.items():
        table[("i", item, 0, rep)] |= {"A": v, "B": b[(item, rep)]}
    alpha, n = _alpha(table, ["A", "B"], {"criterion"})
    units = list(a)
    ref = krippendorff.alpha(reliability_data=np.array([[a[u] for u in units], [b[u] for u in units]]),
                             level_of_measurement="interval")
    assert n == 6 and alpha == pytest.approx(ref)
    averaged = krippendorff.alpha(reliability_data=np.array([[2.5, 7.5, 5.0], [2.0, 8.5, 5.0]]),
                                  level_of_measurement="interval")
    assert alpha != pytest.approx(averaged)
