"""The per-domain tables of IBA-Bench: Table 4 (mean over judges), 6-8 (one judge), 9 (std), 5, 10."""
from __future__ import annotations

from typing import Any

import pandas as pd

from perseval.benchmarks.iba.analysis_frame import (
    OVERALL, UNSCORED, _present, agent_params, domain_order, instance_means, reorder, scored_instances,
    unscored_count, with_overall,
)

ABLATION_KIND = "iba.agent"
# agent_params keys that switch a module of IBA-Agent off when False (section 4, Table 5)
MODULE_KEYS = {"deep_retrieval", "bt_da", "broad_thinking", "deep_alignment", "thinking", "alignment",
               "trajectory_synthesis", "query_expansion", "expansion", "salience_rerank", "rerank",
               "redundancy_filter"}
RAG_SYNTHESIS = {"rag", "rag_style", "plain", "simple"}  # 'synthesis' values of the w/o Synth. variant
FC_KEYS = {"fc", "function_call", "function_calling"}


def domain_table(rows: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """Rows = systems; columns = present domains (paper order), Overall, n (scored instances), unscored.

    Each cell is the mean over the judges in `rows` of that judge's mean over instances; pass the rows
    of a single judge to get that judge's table (Tables 6-8).
    """
    inst = instance_means(rows, by=["domain"])
    table = with_overall(inst, "domain", order, domain_order(rows["domain"].dropna()))
    table["n"] = scored_instances(inst, order)
    table[UNSCORED] = unscored_count(rows, order)
    return table


def repeat_std_table(rows: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """Table 9 for one judge: per cell, the sample std (ddof=1) over judge repeats of the cell's score.

    Per judge repeat: instance = mean over agent repeats; domain/Overall score = mean over instances.
    Column `repeats` = judge repeats seen for the system.
    """
    inst = rows.groupby(["system", "judge_repeat", "instance_id", "domain"], sort=False)["value"].mean()
    inst = inst.reset_index()
    per_rep = inst.groupby(["system", "judge_repeat", "domain"], sort=False)["value"].mean()
    std = per_rep.groupby(level=["system", "domain"], sort=False).std(ddof=1).unstack("domain")
    std = std.reindex(columns=domain_order(rows["domain"].dropna()))
    overall = inst.groupby(["system", "judge_repeat"], sort=False)["value"].mean()
    std[OVERALL] = overall.groupby(level="system").std(ddof=1)
    std["repeats"] = rows.groupby("system")["judge_repeat"].nunique()
    std.columns.name = None
    return reorder(std, order)


# --- Table 5: ablation ---------------------------------------------------------------------------


def ablation_flags(params: dict[str, Any]) -> list[str]:
    """agent_params keys that mark an ablated IBA-Agent (a module switched off, RAG-style synthesis)."""
    flags = []
    for key, value in params.items():
        low = key.lower()
        if low in MODULE_KEYS and value is False:
            flags.append(key)
        elif (low.startswith(("no_", "without_", "wo_")) or "ablat" in low) and value:
            flags.append(key)
        elif low == "synthesis" and str(value).lower() in RAG_SYNTHESIS:
            flags.append(key)
    return flags


def uses_fc(params: dict[str, Any]) -> bool:
    """The function-calling variant (iba.agent `controller: fc`), never the base of Table 5."""
    return str(params.get("controller", "")).lower() == "fc" or any(params.get(k) is True for k in FC_KEYS)


def default_base(candidates: pd.DataFrame) -> str | None:
    """The agent with no ablation flag, preferring one without function calling (Table 5's base)."""
    parsed = candidates["agent_params"].map(agent_params)
    clean = candidates[parsed.map(lambda p: not ablation_flags(p))]
    if clean.empty:
        return None
    no_fc = clean[~parsed[clean.index].map(uses_fc)]
    return str((no_fc if not no_fc.empty else clean)["agent"].iloc[0])


def ablation_table(table: pd.DataFrame, systems: pd.DataFrame, params: dict[str, Any]) -> pd.DataFrame | None:
    """Table 5: headline scores of the ablation systems, each score followed by 'Δ <col>' = score - base.

    The base of a system is the base agent's system with the same backbone and retriever (its own row
    then has Δ = 0); without one, the Δ columns are empty. None when fewer than two ablation systems.
    """
    wanted = params.get("ablation_agents")
    mask = systems["agent"].isin(wanted) if wanted else systems["agent_kind"].eq(ABLATION_KIND)
    sub = systems[mask & systems["system"].isin(table.index)]
    if len(sub) < 2:
        return None
    base = params.get("ablation_base") or default_base(sub)
    cols = [c for c in table.columns if c not in ("n", UNSCORED)]
    scores = table.loc[sub["system"], cols]
    base_sys = sub[sub["agent"] == base].set_index(["backbone", "retriever"])["system"]
    keys = pd.MultiIndex.from_frame(sub[["backbone", "retriever"]])
    base_rows = table.reindex(base_sys.reindex(keys).values)[cols]
    delta = scores - base_rows.to_numpy()
    out = pd.concat({c: scores[c] for c in cols} | {f"Δ {c}": delta[c] for c in cols}, axis=1)
    out = out[[x for c in cols for x in (c, f"Δ {c}")]]
    out.index.name = "system"
    return out


# --- Table 10: retriever swap --------------------------------------------------------------------


def retriever_swap(table: pd.DataFrame, systems: pd.DataFrame, params: dict[str, Any]) -> pd.DataFrame | None:
    """Table 10: rows = agent (backbone); columns = Overall under each retriever, then 'Δ <r>' = r - base.

    Base retriever: params['retriever_base'], else the one most systems use. Only rows scored under
    at least two retrievers; None when the frame has a single retriever.
    """
    frame = systems[systems["retriever"].map(_present)].set_index("system")[["system_nr", "retriever"]]
    frame = frame.join(table[OVERALL]).dropna(subset=[OVERALL])
    if frame["retriever"].nunique() < 2:
        return None
    wide = frame.pivot_table(index="system_nr", columns="retriever", values=OVERALL, aggfunc="mean", sort=False)
    wide = wide[wide.notna().sum(axis=1) >= 2]
    if wide.empty:
        return None
    base = params.get("retriever_base") or frame["retriever"].value_counts(sort=True).index[0]
    others = [r for r in wide.columns if r != base]
    for r in others:
        wide[f"Δ {r}"] = wide[r] - wide[base]
    wide = wide[[base, *others, *(f"Δ {r}" for r in others)]]
    wide.columns.name = None
    wide.index.name = "system"
    return wide
