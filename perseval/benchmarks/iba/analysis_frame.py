"""The shared first step of every IBA-Bench analysis: one tidy frame, and the averaging order.

Order of averaging (paper 5, A.2, D; as in perseval.metrics.aggregate): the
checkpoint/slot mean is already the instance value; per judge, an instance's
value is the mean over its agent repeats and judge repeats; a judge's score of
a slice (domain, bucket, Overall) is the mean over the slice's instances; the
headline score is the mean over judges of the judges' scores (Table 4 is the
mean of Tables 6-8). Unscored values (None) are skipped by every mean and
counted separately.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable

import pandas as pd

from perseval.benchmarks.iba.views import IbaGold, IbaPayload
from perseval.core.instances import Instance

OVERALL = "Overall"
UNSCORED = "unscored"
# Full IBA domain names (Table 2) -> the short column labels of Tables 4-10, in the paper's column order.
DOMAIN_SHORT = {
    "Writing and Design": "Writing",
    "Work": "Work",
    "Daily Consumption": "Daily",
    "Planning": "Plan.",
    "Exercise and Health": "Health",
    "Transportation": "Trans.",
    "Medical Services": "Med.",
    "Leisure Activities": "Leis.",
    "Information Management": "Info.",
}
DOMAIN_ORDER = list(DOMAIN_SHORT.values())
_NO_PART = {"", "-", "none", "None"}  # backbone/retriever values that mean "not used"
_SYSTEM_COLS = ["agent", "agent_kind", "agent_params", "backbone", "retriever"]


def domain_label(name: Any) -> str:
    """Short column label of a domain; unknown names are kept as they are."""
    return DOMAIN_SHORT.get(str(name), str(name))


def domain_order(labels: Iterable[str]) -> list[str]:
    """Present domains in the paper's order, then unknown ones alphabetically; absent ones left out."""
    present = set(labels)
    return [d for d in DOMAIN_ORDER if d in present] + sorted(present - set(DOMAIN_ORDER))


def _present(part: Any) -> bool:
    return part is not None and not (isinstance(part, float) and pd.isna(part)) and str(part) not in _NO_PART


def system_label(agent: str, backbone: Any, retriever: Any = None) -> str:
    """'agent (backbone, retriever)', leaving out the parts a system does not use."""
    parts = [str(p) for p in (backbone, retriever) if _present(p)]
    return f"{agent} ({', '.join(parts)})" if parts else str(agent)


def is_dynamic(payload: IbaPayload, gold: IbaGold) -> bool | None:
    """The payload's `dynamic` when the instance says so, else gold n_dynamic > 0; None when unknown."""
    if payload.dynamic is not None:
        return payload.dynamic
    if gold.n_dynamic is not None:
        return gold.n_dynamic > 0
    return None


def _instance_row(instance: Instance) -> dict[str, Any]:
    payload = IbaPayload.of(instance)
    return {"instance_id": instance.instance_id, "action_type": payload.action_type,
            "n_evidence": payload.n_evidence, "n_constraints": payload.n_constraints,
            "dynamic": is_dynamic(payload, IbaGold.of(instance)), "base_instance": payload.base_instance}


def instance_frame(instances: list[Instance]) -> pd.DataFrame:
    """The instance attributes the analyses slice by, one row per instance."""
    rows = [_instance_row(i) for i in instances]
    cols = ["instance_id", "action_type", "n_evidence", "n_constraints", "dynamic", "base_instance"]
    return pd.DataFrame(rows, columns=cols).drop_duplicates("instance_id")


@dataclass
class Prepared:
    """Task rows and QA-probe rows of one metric, with a readable system label on every row."""

    task: pd.DataFrame
    qa: pd.DataFrame
    systems: pd.DataFrame  # one row per system: system, system_nr (label without retriever), agent...
    order: list[str]  # systems in order of first appearance


def prepare(scores: pd.DataFrame, instances: list[Instance], metric: str = "score") -> Prepared:
    df = scores[scores["metric"] == metric].copy()
    df["value"] = pd.to_numeric(df["value"], errors="coerce")  # None -> NaN: skipped by means, counted
    df["domain"] = df["group"].map(domain_label)
    for col in ("backbone", "retriever"):  # one spelling of "not used", so systems group and match
        df[col] = df[col].where(df[col].map(_present), "-")
    df["system"] = [system_label(a, b, r) for a, b, r in zip(df["agent"], df["backbone"], df["retriever"])]
    df["system_nr"] = [system_label(a, b) for a, b in zip(df["agent"], df["backbone"])]
    df = df.merge(instance_frame(instances), on="instance_id", how="left")
    qa_mask = df["action_type"].eq("qa")
    systems = df.drop_duplicates("system")[["system", "system_nr", *_SYSTEM_COLS]].reset_index(drop=True)
    return Prepared(df[~qa_mask].reset_index(drop=True), df[qa_mask].reset_index(drop=True), systems,
                    list(systems["system"]))


def agent_params(text: Any) -> dict[str, Any]:
    """The canonical-JSON agent_params column back as a dict ({} when empty or unreadable)."""
    try:
        out = json.loads(text) if isinstance(text, str) and text else {}
    except json.JSONDecodeError:
        return {}
    return out if isinstance(out, dict) else {}


# --- the averaging order -----------------------------------------------------------------------


def instance_means(df: pd.DataFrame, by: Iterable[str] = ()) -> pd.DataFrame:
    """Per (system, judge, instance): mean over agent repeats and judge repeats; `by` columns ride along."""
    keys = ["system", "judge", "instance_id", *by]
    return df.groupby(keys, sort=False, dropna=False)["value"].mean().reset_index()


def judge_scores(inst: pd.DataFrame, key: str) -> pd.Series:
    """Per (system, judge, key): mean over instances (unscored instances skipped)."""
    return inst.groupby(["system", "judge", key], sort=False)["value"].mean()


def headline(inst: pd.DataFrame, key: str, order: list[str], columns: list[Any] | None = None) -> pd.DataFrame:
    """Rows = systems, columns = values of `key`: mean over judges of each judge's mean over instances."""
    per_judge = judge_scores(inst, key)
    wide = per_judge.groupby(level=["system", key], sort=False).mean().unstack(key)
    wide = wide.reindex(index=[s for s in order if s in wide.index])
    if columns is not None:
        wide = wide.reindex(columns=[c for c in columns if c in wide.columns])
    wide.columns.name = None
    wide.index.name = "system"
    return wide


def with_overall(inst: pd.DataFrame, key: str, order: list[str], columns: list[Any]) -> pd.DataFrame:
    """`headline` by key plus an Overall column (mean over all instances, not over the key's means)."""
    table = headline(inst, key, order, columns)
    overall = headline(inst.assign(_all=OVERALL), "_all", order)
    return table.join(overall[[OVERALL]])  # same systems in both: every system has rows in `inst`


def unscored_count(df: pd.DataFrame, order: list[str]) -> pd.Series:
    """Per system: instance-score rows with no value (all judges, repeats and judge repeats)."""
    return df["value"].isna().groupby(df["system"]).sum().reindex(order, fill_value=0).astype(int).rename(UNSCORED)


def scored_instances(inst: pd.DataFrame, order: list[str]) -> pd.Series:
    """Per system: instances with a value from at least one judge."""
    scored = inst.dropna(subset=["value"])
    return scored.groupby("system")["instance_id"].nunique().reindex(order).fillna(0).astype(int).rename("n")


def reorder(table: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    return table.reindex(index=[s for s in order if s in table.index])
