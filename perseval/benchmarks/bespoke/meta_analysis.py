"""Table 3: the evaluator's agreement with the human annotators on the meta-test pairs, per variant.

Pearson and Spearman correlations (scipy) between the evaluator's and the human's scores per criterion,
pooled over all meta-test pairs, and feedback accuracy (the meta-judge's share of equivalent feedback);
the "Avg." row is the mean of the four criteria, as in the paper. Correlations are None when either side is
constant or fewer than three pairs were scored.
"""
from __future__ import annotations

from statistics import mean
from typing import Mapping

import pandas as pd

from perseval.benchmarks.bespoke.layout import CRITERIA, CRITERION_TITLES
from perseval.benchmarks.bespoke.views import MetaGold
from perseval.kernel.params import Params
from perseval.core.instances import Instance


def correlations(evaluator: list[float], human: list[float]) -> tuple[float | None, float | None]:
    """(Pearson r, Spearman rho), None when undefined (fewer than 3 pairs, or a constant side)."""
    if len(evaluator) < 3 or len(set(evaluator)) < 2 or len(set(human)) < 2:
        return None, None
    from scipy import stats  # here: every builtin module is imported to register, and scipy.stats is slow

    return float(stats.pearsonr(evaluator, human).statistic), float(stats.spearmanr(evaluator, human).statistic)


VARIANTS = {"none": "w/o Personal.", "scores_only": "w/o Feedback", "feedback": "w/ Feedback"}


def _variant(params: Params | None) -> str:
    """The Table 3 row label of an evaluator's variant ("-" for an agent that is not an evaluator)."""
    return VARIANTS.get(getattr(params, "variant", ""), "-")


def table3(scores: pd.DataFrame, instances: list[Instance], agents: Mapping[str, Params]) -> pd.DataFrame:
    """`agents`: each agent's validated params, by name."""
    if scores.empty:
        return pd.DataFrame()
    human = {i.instance_id: MetaGold.of(i).human for i in instances}
    rows = []
    for (agent, backbone), grp in scores.groupby(["agent", "backbone"]):
        params = agents.get(agent)
        per = []
        for c in CRITERIA:
            ev = grp[(grp["metric"] == c) & grp["value"].notna()]
            pairs = [(v / 20, human[iid][c].score) for iid, v in zip(ev["instance_id"], ev["value"])]
            r, rho = correlations([p[0] for p in pairs], [p[1] for p in pairs])
            fb = grp[(grp["metric"] == f"feedback.{c}") & grp["value"].notna()]["value"]
            per.append({"Evaluator": agent, "Variant": _variant(params), "Model": backbone,
                        "Criterion": CRITERION_TITLES[c], "Pearson": r, "Spearman": rho,
                        "Feedback Acc.": fb.mean() / 100 if len(fb) else None, "Pairs": len(pairs)})
        rows += per
        rows.append({"Evaluator": agent, "Variant": _variant(params), "Model": backbone, "Criterion": "Avg.",
                     **{k: _mean([p[k] for p in per]) for k in ("Pearson", "Spearman", "Feedback Acc.")},
                     "Pairs": sum(p["Pairs"] for p in per)})
    return pd.DataFrame(rows)


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return mean(present) if len(present) == len(values) and present else None
