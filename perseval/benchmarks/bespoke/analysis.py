"""Bespoke's tables and figures, from every cell of a run (logged under analysis/<benchmark>/ in MLflow).

bespoke:          Table 4 (model x user-context setting -> four criteria, recall, Avg.), the unscored claim
                  judgments beside recall, Figure 4 (personalized vs personalized + gold information),
                  per-response diagnostic feedback, requests per setting, Tables 2 and 7.
bespoke-meta:     Table 3 (evaluator variant x criterion -> Pearson, Spearman, feedback accuracy).
bespoke-history:  Table 5 (query expansion -> nDCG@10, nDCG@20).

Table 4's Avg. is the mean of the five column means, as in the paper (not a mean of per-instance Avgs).
"""
from __future__ import annotations

import json
from typing import Any

import pandas as pd

from perseval.benchmarks.base import AnalysisInputs
from perseval.benchmarks.bespoke.layout import CRITERIA, CRITERION_TITLES

TABLE4_COLUMNS = {"need_alignment": "Need Align.", "content_depth": "Content Depth", "tone": "Tone",
                  "explanation_style": "Style", "recall": "Recall"}
CELL = ["backbone", "agent", "retriever", "judge"]


def _params(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def setting_columns(agent_params: str) -> dict[str, str]:
    """Table 4's four setting columns from a responder's params ("-" for other agents)."""
    from perseval.benchmarks.bespoke.agents.responder import ResponderParams

    try:
        p = ResponderParams.model_validate(_params(agent_params)).model_dump()
    except ValueError:  # not a responder (a generic agent on Bespoke)
        return {"History Usage": "-", "Query Awareness": "-", "History Selection": "-", "User Context": "-"}
    uses = p["user_context"] != "none"
    mark = {True: "✓", False: "✗"}
    return {"History Usage": mark[uses], "Query Awareness": mark[bool(p.get("query_aware"))],
            "History Selection": {"none": "✗", "llm": "✓ (LLM)", "retriever": "✓ (bi-encoder)"}.get(
                p.get("history_selection", "none"), "?"),
            "User Context": {"none": "✗", "raw": "Raw", "profile": "Profile"}[p["user_context"]]}


def table4(scores: pd.DataFrame) -> pd.DataFrame:
    """Rows: model x setting (x retriever x judge); columns: the four criteria, recall, Avg., and counts."""
    if scores.empty:
        return pd.DataFrame()
    keys = [*CELL, "agent_params"]
    wide = scores.pivot_table(index=keys, columns="metric", values="value", aggfunc="mean")
    unscored = scores[scores["metric"] == "recall"].groupby(keys)["n_unscored"].sum()
    n = scores[scores["metric"] == "recall"].groupby(keys)["instance_id"].nunique()
    rows = []
    for key, row in wide.iterrows():
        parts = {label: row.get(metric) for metric, label in TABLE4_COLUMNS.items()}
        complete = all(pd.notna(v) for v in parts.values())
        rows.append({"Model": key[0], "Agent": key[1], **setting_columns(key[4]), **parts,
                     "Avg.": sum(parts.values()) / len(parts) if complete else None,
                     "Recall unscored claims": int(unscored.get(key, 0)), "Queries": int(n.get(key, 0)),
                     "Retriever": key[2], "Judge": key[3]})
    return pd.DataFrame(rows).sort_values(["Judge", "Model", "Retriever"], kind="stable").reset_index(drop=True)


def gold_pairs(table: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    """Figure 4's data: each agent that searches `gold` next to the agent with the same params but another
    search back end, per model (and retriever, judge)."""
    params = scores.drop_duplicates("agent").set_index("agent")["agent_params"].map(_params)
    rows = []
    for agent, p in params.items():
        if p.get("search") != "gold":
            continue
        twins = [a for a, q in params.items() if a != agent and q.get("search") not in ("gold", "none")
                 and {k: v for k, v in q.items() if k != "search"} == {k: v for k, v in p.items() if k != "search"}]
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


def response_analysis(inputs: AnalysisInputs, stats: dict[str, pd.DataFrame]) -> dict[str, Any]:
    table = table4(inputs.scores)
    out: dict[str, Any] = {"table4": table, "requests_per_setting": requests_table(inputs.outputs()),
                           "feedback_per_response": feedback_table(inputs.judgments()), **stats}
    pairs = gold_pairs(table, inputs.scores) if not table.empty else pd.DataFrame()
    if not pairs.empty:
        out["figure4_gold_information"] = pairs
        out["figure4_gold_information_plot"] = figure4(pairs)
    return out
