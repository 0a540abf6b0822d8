"""The difference of two cells' per-instance values, with its interval: paired over shared instances, else
unpaired; users are the clusters. Pure statistics over frames, shared by reports and benchmark analyses."""
from __future__ import annotations

import pandas as pd

from perseval.metrics.aggregate import numeric_scores, per_instance, scores_frame
from perseval.metrics.uncertainty import Difference, paired_difference, unpaired_difference
from perseval.metrics.settings import StatisticsSettings
from perseval.core.instances import InstanceScore


def instance_values(scores: list[InstanceScore] | pd.DataFrame, metric: str, label: str = "scores") -> pd.DataFrame:
    """Index instance_id; columns user_id, value: the metric per instance, repeats and judge repeats averaged
    first (as the score tables average). `scores`: records or a frame with InstanceScore's columns; a
    value that is not a finite number or None is refused, naming `label` and the instance."""
    frame = numeric_scores(scores if isinstance(scores, pd.DataFrame) else scores_frame(scores), label)
    if "user_id" not in frame:
        frame = frame.assign(user_id="")
    inst = per_instance(frame)
    return inst[inst["metric"] == metric].set_index("instance_id")[["user_id", "value"]]


def compare_values(a: pd.DataFrame, b: pd.DataFrame, statistics: StatisticsSettings, paired: bool) -> Difference:
    """a - b from two `instance_values` frames; paired over the instances both have; weighted as
    `statistics.weighting` says (the mean of users' mean differences where "user")."""
    kw = {"level": statistics.level, "weighting": statistics.weighting}
    if paired:
        both = a.merge(b, how="inner", left_index=True, right_index=True, suffixes=("_a", "_b"))
        return paired_difference(both["value_a"].tolist(), both["value_b"].tolist(), both["user_id_a"].tolist(),
                                 resamples=statistics.resamples, seed=statistics.seed, **kw)
    return unpaired_difference(a["value"].tolist(), a["user_id"].tolist(), b["value"].tolist(),
                               b["user_id"].tolist(), **kw)
