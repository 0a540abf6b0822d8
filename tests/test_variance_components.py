"""Variance sources of a cell (users, agent repeats, judge repeats) and the analysis stage's interval
tables, on a hand-computed nested design."""
import math

import pandas as pd
import pytest

from perseval.benchmarks.base import ANALYSIS_COLUMNS
from perseval.metrics.settings import StatisticsSettings
from perseval.metrics.ci_tables import uncertainty_tables
from perseval.metrics.uncertainty import cluster_mean
from perseval.metrics.variance import variance_components
from perseval.core.instances import Instance

# y[instance][agent repeat] = (judge repeat 0, judge repeat 1)
Y = {"i1": [(60, 80), (70, 70)], "i2": [(20, 40), (30, 50)], "i3": [(90, 90), (50, 70)]}


def frame(judge2_values=None):
    rows = []
    for iid, reps in Y.items():
        for r, pair in enumerate(reps):
            for k, v in enumerate(pair):
                rows.append({"cell": "b/a/m/-/j1", "agent": "a", "agent_kind": "k", "agent_params": "{}",
                             "backbone": "m", "retriever": "-", "judge": "j1", "judge_model": "m",
                             "instance_id": iid, "repeat": r, "judge_repeat": k, "group": "G" if iid != "i3" else "H",
                             "metric": "score", "value": float(v), "n_items": 1, "n_unscored": 0, "user_id": None})
    for iid, v in (judge2_values or {}).items():
        rows.append({**rows[0], "cell": "b/a/m/-/j2", "judge": "j2", "instance_id": iid, "repeat": 0,
                     "judge_repeat": 0, "value": v})
    return pd.DataFrame(rows, columns=ANALYSIS_COLUMNS)


INSTANCES = [Instance(i, "b", f"u{i}", "G", "q") for i in Y]


def test_variance_splits_into_users_agent_and_judge_by_hand():
    scores = frame({"i1": 50.0, "i2": 50.0, "i3": 50.0}).assign(user_id=lambda f: "u" + f["instance_id"])
    table = variance_components(scores, "score")
    row = table.loc["b/a/m/-/j1"]
    s2_judge = (200 + 0 + 200 + 200 + 0 + 200) / 6          # between judge repeats of one answer
    s2_agent = (0 + 50 + 450) / 3 - s2_judge / 2             # between agent repeats, less judge noise
    se2 = (10 ** 2 + 25 ** 2 + 15 ** 2) / 2 / 3              # instance means 70, 35, 75 (one user each)
    judge, agent = s2_judge / 12, s2_agent / 6
    assert row["se"] == pytest.approx(math.sqrt(se2)) and row["mean"] == pytest.approx(60)
    assert (row["se2_judge"], row["se2_agent"], row["se2_users"]) == pytest.approx((judge, agent, se2 - judge - agent))
    assert row["share_users"] + row["share_agent"] + row["share_judge"] == pytest.approx(100)
    assert (row["agent_repeats"], row["judge_repeats"], row["n_judges"]) == (2, 2, 2)
    assert row["between_judges_sd"] == pytest.approx(math.sqrt(((60 - 55) ** 2 + (50 - 55) ** 2) / 1))
    single = frame()[lambda f: (f["repeat"] == 0) & (f["judge_repeat"] == 0)]
    assert variance_components(single, "score").empty  # nothing repeated: nothing to split


def test_the_analysis_stage_adds_interval_tables_with_users_from_the_instances():
    st = StatisticsSettings(resamples=300)
    tables = uncertainty_tables(frame(), INSTANCES, "score", st)
    ci = tables["scores_ci"].reset_index()
    overall = ci[(ci["cell"] == "b/a/m/-/j1") & (ci["group"] == "Overall")].iloc[0]
    est = cluster_mean([70.0, 35.0, 75.0], ["ui1", "ui2", "ui3"])
    assert (overall["mean"], overall["ci_low"], overall["ci_high"], overall["n_users"]) == \
        (pytest.approx(60), est.ci_low, est.ci_high, 3)
    g = ci[(ci["cell"] == "b/a/m/-/j1") & (ci["group"] == "G")].iloc[0]
    assert g["mean"] == pytest.approx((70 + 35) / 2) and g["n"] == 2
    assert "variance_components" in tables
