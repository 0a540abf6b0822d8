"""Bespoke's tables and figures, from every cell of a run (logged under analysis/<benchmark>/ in MLflow).

bespoke:          Table 4 (model x user-context setting -> four criteria, recall, Avg.), the unscored claim
                  judgments beside recall, Figure 4 (personalized vs personalized + gold information),
                  per-response diagnostic feedback, requests per setting, Tables 2 and 7.
bespoke-meta:     Table 3 (evaluator variant x criterion -> Pearson, Spearman, feedback accuracy).
bespoke-history:  Table 5 (query expansion -> nDCG@10, nDCG@20).

Table 4's Avg. is the mean of the five column means, as in the paper (not a mean of per-instance Avgs).
"""
from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from perseval.benchmarks.base import AnalysisInputs
from perseval.benchmarks.bespoke.layout import CRITERIA, CRITERION_TITLES
from perseval.metrics.ci_tables import ci_long, instance_level, with_users
from perseval.kernel.params import Params

TABLE4_COLUMNS = {"need_alignment": "Need Align.", "content_depth": "Content Depth", "tone": "Tone",
                  "explanation_style": "Style", "recall": "Recall"}
CELL = ["backbone", "agent", "retriever", "judge"]


NO_SETTING = {"History Usage": "-", "Query Awareness": "-", "History Selection": "-", "User Context": "-"}


def setting_columns(params: Params | None) -> dict[str, str]:
    """Table 4's four setting columns from a responder's params ("-" for other agents)."""
    from perseval.benchmarks.bespoke.agents.responder import ResponderParams

    if not isinstance(params, ResponderParams):  # not a responder (a generic agent on Bespoke)
        return dict(NO_SETTING)
    mark = {True: "✓", False: "✗"}
    return {"History Usage": mark[params.user_context != "none"], "Query Awareness": mark[params.query_aware],
            "History Selection": {"none": "✗", "llm": "✓ (LLM)", "retriever": "✓ (bi-encoder)"}.get(
                params.history_selection, "?"),
            "User Context": {"none": "✗", "raw": "Raw", "profile": "Profile"}[params.user_context]}


def table4(scores: pd.DataFrame, agents: Mapping[str, Params]) -> pd.DataFrame:
    """Rows: model x setting (x retriever x judge); columns: the four criteria, recall, Avg., and counts.
    `agents`: each agent's validated params, by name."""
    if scores.empty:
        return pd.DataFrame()
    wide = scores.pivot_table(index=CELL, columns="metric", values="value", aggfunc="mean")
    unscored = scores[scores["metric"] == "recall"].groupby(CELL)["n_unscored"].sum()
    n = scores[scores["metric"] == "recall"].groupby(CELL)["instance_id"].nunique()
    rows = []
    for key, row in wide.iterrows():
        parts = {label: row.get(metric) for metric, label in TABLE4_COLUMNS.items()}
        complete = all(pd.notna(v) for v in parts.values())
        rows.append({"Model": key[0], "Agent": key[1], **setting_columns(agents.get(key[1])), **parts,
                     "Avg.": sum(parts.values()) / len(parts) if complete else None,
                     "Recall unscored claims": int(unscored.get(key, 0)), "Queries": int(n.get(key, 0)),
                     "Retriever": key[2], "Judge": key[3]})
    if not rows:  # every value unscored or failed: no mean to show (the headline counts them)
        return pd.DataFrame()
    return pd.DataFrame(rows).sort_values(["Judge", "Model", "Retriever"], kind="stable").reset_index(drop=True)


def gold_pairs(table: pd.DataFrame, agents: Mapping[str, Params]) -> pd.DataFrame:
    """Figure 4's data: each responder that searches `gold` next to the responder with the same params but
    another search back end, per model (and retriever, judge)."""
    from perseval.benchmarks.bespoke.agents.responder import ResponderParams

    responders = {a: p for a, p in agents.items() if isinstance(p, ResponderParams)}
    rows = []
    for agent, p in responders.items():
        if p.search != "gold":
            continue
        twins = [a for a, q in responders.items() if a != agent and q.search not in ("gold", "none")
                 and q.model_copy(update={"search": p.search}) == p]
        for twin in twins:
            for label, name in (("Personalized", twin), ("Personalized + Gold Information", agent)):
                for _, r in table[table["Agent"] == name].iterrows():
                    rows.append({"Model": r["Model"], "Judge": r["Judge"], "Setting": label,
                                 **{TABLE4_COLUMNS[c]: r[TABLE4_COLUMNS[c]] for c in CRITERIA}})
    return pd.DataFrame(rows)


def figure4(pairs: pd.DataFrame) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(pairs["Model"]))
    crit = [TABLE4_COLUMNS[c] for c in CRITERIA]
    fig, axes = plt.subplots(1, len(crit), figsize=(3.2 * len(crit), 3.2), sharey=True, squeeze=False)
    for ax, label in zip(axes[0], crit):
        for k, (setting, colour) in enumerate((("Personalized", "tab:red"),
                                               ("Personalized + Gold Information", "tab:green"))):
            vals = [pairs[(pairs["Model"] == m) & (pairs["Setting"] == setting)][label].mean() for m in models]
            ax.bar([i + 0.38 * k for i in range(len(models))], vals, width=0.38, color=colour, label=setting)
        ax.set_xticks([i + 0.19 for i in range(len(models))], models, rotation=30, ha="right", fontsize=8)
        ax.set_title(label)
        ax.set_ylim(0, 100)
    axes[0][0].set_ylabel("score (0-100)")
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.suptitle("Figure 4: personalized responses with their own search vs with the gold information")
    fig.tight_layout()
    return fig


def feedback_table(judgments: pd.DataFrame) -> pd.DataFrame:
    """Per response and criterion: E_p's score and diagnostic feedback (unscored rows keep the judge's raw text)."""
    if judgments.empty:
        return pd.DataFrame()
    crit = judgments[(judgments["kind"] == "criterion") & judgments["item_id"].isin(CRITERIA)].copy()
    crit["criterion"] = crit["item_id"].map(CRITERION_TITLES)
    crit["raw"] = crit["raw"].where(crit["status"] != "scored", "")
    cols = ["cell", "agent", "backbone", "retriever", "judge", "instance_id", "repeat", "judge_repeat",
            "criterion", "score", "status", "feedback", "raw"]
    return crit[cols].sort_values(["cell", "instance_id", "repeat", "judge_repeat", "criterion"]).reset_index(drop=True)


def requests_table(outputs: pd.DataFrame) -> pd.DataFrame:
    """Per agent and backbone: model requests per response (sent, answered from the cache; the profiler's
    apart when it is its own model), history kept by selection, and the histories cut to their budget."""
    if outputs.empty:
        return pd.DataFrame()
    rows = []
    for (agent, backbone), grp in outputs.groupby(["agent", "backbone"]):
        n = {k: 0 for k in ("calls", "cached", "profiler", "profiler_cached", "kept", "considered", "cut", "chars")}
        for trace in grp["trace"]:
            for step in trace or []:
                if step.get("step") == "requests":
                    n["calls"], n["cached"] = n["calls"] + step["llm_calls"], n["cached"] + step["cached"]
                    n["profiler"] += step.get("profiler_calls", 0)
                    n["profiler_cached"] += step.get("profiler_cached", 0)
                if step.get("step") == "history" and step.get("selection") == "llm":
                    n["considered"] += len(step["decisions"])
                    n["kept"] += sum(d["keep"] for d in step["decisions"])
                if step.get("step") == "context" and step.get("chars_cut"):
                    n["cut"], n["chars"] = n["cut"] + 1, n["chars"] + step["chars_cut"]
        rows.append({"agent": agent, "backbone": backbone, "responses": len(grp), "llm_calls": n["calls"],
                     "from_cache": n["cached"], "llm_calls_per_response": n["calls"] / len(grp),
                     "profiler_calls": n["profiler"], "profiler_from_cache": n["profiler_cached"],
                     "sessions_judged": n["considered"], "sessions_kept": n["kept"],
                     "histories_cut": n["cut"], "history_chars_cut": n["chars"],
                     "failed": int((grp["status"] == "failed").sum())})
    return pd.DataFrame(rows)


def table4_ci(scores: pd.DataFrame, instances: list[Any]) -> pd.DataFrame:
    """Table 4's columns with their intervals, long: one row per cell x criterion (recall, Avg. of each
    instance's five parts): mean, ci_low, ci_high, se, n, n_users (users resampled)."""
    if scores.empty:
        return pd.DataFrame()
    rows = with_users(scores, instances)
    rows = rows[rows["metric"].isin([*TABLE4_COLUMNS, "avg"])].assign(
        metric=lambda f: f["metric"].map({**TABLE4_COLUMNS, "avg": "Avg. (per instance)"}),
        value=lambda f: pd.to_numeric(f["value"], errors="coerce"))
    long = ci_long(instance_level(rows, [*CELL, "metric"]), [*CELL, "metric"])
    return long.rename(columns={"backbone": "Model", "agent": "Agent", "retriever": "Retriever", "judge": "Judge",
                                "metric": "Column"})


def response_analysis(inputs: AnalysisInputs, stats: dict[str, pd.DataFrame]) -> dict[str, Any]:
    table = table4(inputs.scores, inputs.agents)
    out: dict[str, Any] = {"table4": table, "table4_ci": table4_ci(inputs.scores, inputs.instances),
                           "requests_per_setting": requests_table(inputs.outputs()),
                           "feedback_per_response": feedback_table(inputs.judgments()), **stats}
    pairs = gold_pairs(table, inputs.agents) if not table.empty else pd.DataFrame()
    if not pairs.empty:
        out["figure4_gold_information"] = pairs
        out["figure4_gold_information_plot"] = figure4(pairs)
    return out
