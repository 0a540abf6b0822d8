"""How often the LLM slot judge (iba.slot_llm) agrees with the exact-match rule scorer (iba.slots).

One row per LLM judge (its repeats pooled) and an `All` row: the slots both scored (n), the share on which
they agree, Cohen's kappa (scikit-learn), each one's pass rate, and the slots the LLM judge left unscored or
failed (never counted as a disagreement). A slot pair is the same agent output (agent, backbone, retriever,
instance, repeat) and the same slot. Empty when no judge of the entry ran iba.slot_llm.
"""
from __future__ import annotations

from typing import Callable

import pandas as pd

RULE_JUDGE = "iba.slots"
OUTPUT = ["agent", "backbone", "retriever", "instance_id", "repeat", "item_id"]
COLUMNS = ["n", "agreement_pct", "kappa", "llm_pass_pct", "rule_pass_pct", "llm_unscored"]


def _row(pairs: pd.DataFrame, unscored: int) -> dict[str, float | int | None]:
    from sklearn.metrics import cohen_kappa_score  # heavy: only when an analysis needs it, not on validation

    llm, rule = pairs["score_llm"].round().astype(int), pairs["score_rule"].round().astype(int)
    n = len(pairs)
    # kappa is undefined when both raters give one label throughout
    kappa = float(cohen_kappa_score(rule, llm)) if n and len(set(llm) | set(rule)) > 1 else None
    return {"n": n, "agreement_pct": 100.0 * float((llm == rule).mean()) if n else None, "kappa": kappa,
            "llm_pass_pct": 100.0 * float(llm.mean()) if n else None,
            "rule_pass_pct": 100.0 * float(rule.mean()) if n else None, "llm_unscored": unscored}


def agreement_table(judgments: pd.DataFrame) -> pd.DataFrame | None:
    """The agreement table from the judgments of an IBA entry's cells (AnalysisInputs.judgments())."""
    slots = judgments[judgments["kind"].eq("slot")]
    rule = slots[slots["judge"].eq(RULE_JUDGE) & slots["status"].eq("scored")]
    llm = slots[~slots["judge"].eq(RULE_JUDGE)]
    if llm.empty or rule.empty:
        return None
    rule = rule.drop_duplicates(OUTPUT)[OUTPUT + ["score"]]
    rows, all_pairs, all_unscored = {}, [], 0
    for judge, mine in llm.groupby("judge", sort=True):
        scored = mine[mine["status"].eq("scored")]
        pairs = scored.merge(rule, on=OUTPUT, suffixes=("_llm", "_rule"))
        unscored = int((~mine["status"].eq("scored")).sum())
        rows[judge] = _row(pairs, unscored)
        all_pairs.append(pairs)
        all_unscored += unscored
    rows["All"] = _row(pd.concat(all_pairs, ignore_index=True), all_unscored)
    return pd.DataFrame.from_dict(rows, orient="index", columns=COLUMNS).rename_axis("judge")


def slot_agreement_tables(scores: pd.DataFrame, api_ids: set[str],
                          judgments: Callable[[], pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """{"slot_judge_agreement": table} when an LLM judge scored CallAPI instances, else {}; the judgments
    (large at paper scale) are loaded only then."""
    llm_api = scores["judge_model"].ne("-") & scores["instance_id"].isin(api_ids)
    if not llm_api.any():
        return {}
    table = agreement_table(judgments())
    return {"slot_judge_agreement": table} if table is not None else {}
