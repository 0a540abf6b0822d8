"""IBA-Bench cross-cell analyses: the paper's Tables 4-10 and the section 5.3 figures.

`analyze` is called by IbaBenchmark.analyze with the long frame of every instance score (columns
perseval.benchmarks.base.ANALYSIS_COLUMNS) and the benchmark's instances (QA probe twins from
perseval.benchmarks.iba.qa included, recognised by payload action_type 'qa'). QA twins are kept out
of every task table and used only by `qa_vs_task`.

Optional params (AnalysisParams, `params.analysis` of the benchmark entry):
  metric             the metric analysed (default 'score')
  ablation_agents    agent names of Table 5 (default: agents of kind 'iba.agent')
  ablation_base      the agent Table 5's deltas are taken against (default: the one without ablation flags)
  retriever_base     the retriever Table 10's deltas are taken against (default: the most used one)
  preference_window  sliding-window width of by_preferences (default 2, as in the paper)
  count_cap          evidence/preference counts >= cap share the last bucket (default 5, the '5+')
"""
from __future__ import annotations

import re
from typing import Any, TYPE_CHECKING

import pandas as pd
from pydantic import Field

from perseval.benchmarks.iba.analysis_ci import (ablation_pairs, by_preferences_ci, paired_table, retriever_base,
                                                 retriever_pairs, retriever_swap_by_domain, table4_ci, table9_mean_std)
from perseval.benchmarks.iba.analysis_frame import OVERALL, UNSCORED, Prepared, prepare
from perseval.benchmarks.iba.analysis_slices import by_evidence, by_preferences, qa_vs_task, static_vs_dynamic
from perseval.benchmarks.iba.analysis_tables import (ablation_table, default_base, domain_table, repeat_std_table,
                                                     retriever_swap)
from perseval.benchmarks.plots import grouped_bars, line_figure
from perseval.metrics.ci_tables import with_users
from perseval.kernel.params import Params
from perseval.core.instances import Instance



class AnalysisParams(Params):
    metric: str = "score"
    ablation_agents: list[str] | None = None
    ablation_base: str | None = None
    retriever_base: str | None = None
    preference_window: int = Field(2, ge=1)
    count_cap: int = Field(5, ge=1)


if TYPE_CHECKING:  # matplotlib is imported by the plots themselves, not by validation
    from matplotlib.figure import Figure

Result = dict[str, "pd.DataFrame | Figure"]


def safe_name(text: str) -> str:
    """A judge name as a file-name-safe suffix."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(text)).strip("_") or "judge"


def judge_views(scores: pd.DataFrame) -> pd.DataFrame:
    """Each LLM judge's view of the benchmark: its own rows (Generate checkpoints, QA probes) plus the rows
    a rule judge scored (CallAPI slots), which are the same for every judge - so Tables 6-8 cover every
    instance and Table 4 is their mean, as in the paper. The rule rows are repeated for each of the judge's
    repeats, so Table 9's std over repeats is the LLM judge's alone. Without an LLM judge, the rule rows
    are the only view. A judge that scored CallAPI slots itself (iba.slot_llm) takes no rule rows for them."""
    rule = scores["judge_model"].eq("-")
    if not rule.any() or rule.all():
        return scores
    views = [scores[~rule]]
    unit = ["agent", "backbone", "retriever", "instance_id", "repeat", "metric"]
    for judge, rows in scores[~rule].groupby("judge", sort=False):
        own = pd.MultiIndex.from_frame(rows[unit])
        missing = scores[rule][~pd.MultiIndex.from_frame(scores[rule][unit]).isin(own)]
        views += [missing.assign(judge=judge, judge_repeat=rep) for rep in sorted(rows["judge_repeat"].unique())]
    return pd.concat(views, ignore_index=True)


def analyze(scores: pd.DataFrame, instances: list[Instance], params: dict[str, Any] | None = None) -> Result:
    """name -> DataFrame or Figure; each analysis only when the frame holds what it needs."""
    params = dict(params or {})
    if scores is None or scores.empty:
        return {}
    prep = prepare(judge_views(with_users(scores, instances)), instances, str(params.get("metric", "score")))
    if prep.task.empty:
        return {}
    out: Result = {}
    out.update(domain_tables(prep, params))
    out.update(slice_tables(prep, params))
    out.update(figures(out))
    return out


def domain_tables(prep: Prepared, params: dict[str, Any]) -> Result:
    task, order = prep.task, prep.order
    table4 = domain_table(task, order)
    out: Result = {"table4_mean_over_judges": table4, "table4_mean_over_judges_ci": table4_ci(task, order)}
    for judge, rows in task.groupby("judge", sort=False):
        out[f"table_judge_{safe_name(judge)}"] = domain_table(rows, order)
        if rows["judge_repeat"].nunique() > 1:
            std = repeat_std_table(rows, order)
            out[f"table9_std_over_repeats_{safe_name(judge)}"] = std
            out[f"table9_{safe_name(judge)}"] = table9_mean_std(rows, order, std)  # the paper's "mean ± std"
    table5 = ablation_table(table4, prep.systems, params)
    base = retriever_base(prep.systems, params)
    optional = {"table5_ablation": table5,
                "table5_ablation_ci": paired_table(task, ablation_pairs(table5, prep.systems, _ablation_base(
                    prep, table5, params))),
                "table10_retriever_swap": retriever_swap(table4, prep.systems, params),
                "table10_retriever_swap_by_domain": retriever_swap_by_domain(table4, prep.systems, base),
                "table10_retriever_swap_ci": paired_table(task, retriever_pairs(prep.systems, base) if base else [])}
    out.update({k: v for k, v in optional.items() if v is not None})
    return out


def _ablation_base(prep: Prepared, table5: pd.DataFrame | None, params: dict[str, Any]) -> str | None:
    if table5 is None:
        return None
    return params.get("ablation_base") or default_base(prep.systems[prep.systems["system"].isin(table5.index)])


def slice_tables(prep: Prepared, params: dict[str, Any]) -> Result:
    cap = int(params.get("count_cap", 5))
    window = int(params.get("preference_window", 2))
    optional = {"by_evidence": by_evidence(prep.task, prep.order, cap),
                "by_preferences": by_preferences(prep.task, prep.order, window, cap),
                "by_preferences_ci": by_preferences_ci(prep.task, window, cap),
                "static_vs_dynamic": static_vs_dynamic(prep.task, prep.order),
                "qa_vs_task": qa_vs_task(prep.task, prep.qa, prep.order)}
    return {k: v for k, v in optional.items() if v is not None}


def _scores_only(table: pd.DataFrame) -> pd.DataFrame:
    return table.drop(columns=[c for c in ("n", UNSCORED, OVERALL) if c in table.columns])


def _bounds(ci: pd.DataFrame | None, like: pd.DataFrame,
            column: str = "domain") -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """(low, high) frames shaped like `like` (systems x `column`'s values) from a long interval table."""
    if ci is None or ci.empty:
        return None
    long = ci.reset_index()
    low, high = (long.pivot_table(index="system", columns=column, values=v, aggfunc="first", dropna=False)
                 .reindex(index=like.index, columns=like.columns) for v in ("ci_low", "ci_high"))
    return low, high


def figures(tables: Result) -> Result:
    """Figure 5 (a)-(d) style plots and per-domain bars, from the tables just built."""
    out: Result = {}
    if "table4_mean_over_judges" in tables:
        means = _scores_only(tables["table4_mean_over_judges"])
        out["fig_domains"] = grouped_bars(means, "Score by domain (mean over judges; 95% intervals over users)",
                                          "Domain", errors=_bounds(tables.get("table4_mean_over_judges_ci"), means))
    if "by_evidence" in tables:
        out["fig_by_evidence"] = line_figure(_scores_only(tables["by_evidence"]),
                                             "Score by number of evidence items", "Evidence items")
    if "by_preferences" in tables:
        windows = _scores_only(tables["by_preferences"])
        out["fig_by_preferences"] = line_figure(windows, "Score by number of preferences (sliding window; 95% "
                                                "intervals over users)", "Preferences (window)",
                                                errors=_bounds(tables.get("by_preferences_ci"), windows, "window"))
    if "static_vs_dynamic" in tables:
        out["fig_static_vs_dynamic"] = grouped_bars(tables["static_vs_dynamic"][["Static", "Dynamic"]].T,
                                                    "Static vs dynamic preferences", "System")
    if "qa_vs_task" in tables:
        out["fig_qa_vs_task"] = grouped_bars(tables["qa_vs_task"][["QA", "Task"]].T,
                                             "QA vs task execution", "System")
    return out
