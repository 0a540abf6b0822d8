"""History retrieval (section 4.4, C.4): query expansion prompts (Table 23), nDCG@k, Table 5.

nDCG@k uses scikit-learn's `ndcg_score` with binary relevance (a session is relevant when the oracle kept
it): the ranked sessions get descending scores, oracle sessions the system did not rank come after them.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from perseval.benchmarks.bespoke.views import HistoryGold
from perseval.kernel.params import Params


def cot_messages(query: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "You help retrieve a user's past chat and search sessions."},
            {"role": "user", "content": f"Query: {query}\n\nThink step by step about which aspects of this query "
                                        "matter most for finding the user's relevant past sessions, and write them "
                                        "out as plain sentences. No bullets, nothing else."}]


def pseudo_history_messages(query: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "You help retrieve a user's past chat and search sessions."},
            {"role": "user", "content": f"Query: {query}\n\nWrite one entry of this user's past history that would "
                                        "help find their relevant sessions: either a chat message they sent an "
                                        "assistant (a full, conversational sentence) or a search they typed (short, "
                                        "keywords), in their own natural voice. Output only that history text."}]


def ndcg_at(ranking: Sequence[str], relevant: set[str], k: int) -> float | None:
    """nDCG@k of `ranking` against the `relevant` set (None when the set is empty: undefined).

    Relevant sessions the system did not rank still count in the ideal DCG but earn nothing: they are placed
    after k irrelevant fillers, below everything ranked."""
    if not relevant:
        return None
    ranked = list(dict.fromkeys(ranking))
    missed = sorted(relevant - set(ranked))
    fillers = max(k - len(ranked), 0) if missed else 0
    y_true = [1.0 if i in relevant else 0.0 for i in ranked] + [0.0] * fillers + [1.0] * len(missed)
    n = len(y_true)
    y_score = [float(n - r) for r in range(len(ranked) + fillers)] + [0.0] * len(missed)
    if n < 2:  # scikit-learn needs two documents; a single relevant session ranked first is perfect
        return 1.0 if ranked and ranked[0] in relevant else 0.0
    from sklearn.metrics import ndcg_score  # here, not at import: scikit-learn takes ~1 s to import

    return float(ndcg_score(np.array([y_true]), np.array([y_score]), k=k))


def table5(scores: pd.DataFrame, instances: list, agents: Mapping[str, Params]) -> pd.DataFrame:
    """Rows: query type (expansion) x model x retriever; columns nDCG@10, nDCG@20 on 0..1 as in the paper,
    with the mean number of oracle sessions per query beside them. `agents`: validated params by agent."""
    if scores.empty:
        return pd.DataFrame()
    oracle = [len(HistoryGold.of(i).oracle) for i in instances]
    rows = []
    for (agent, backbone, retriever), grp in scores.groupby(["agent", "backbone", "retriever"]):
        expansion = getattr(agents.get(agent), "expansion", "none")
        label = {"none": "Original Query", "cot": "+CoT", "pseudo_history": "+Pseudo-history"}.get(expansion, expansion)
        row = {"Query Type": label, "Agent": agent, "Model": backbone, "Retriever": retriever}
        for metric in ("ndcg@10", "ndcg@20"):
            vals = grp[(grp["metric"] == metric) & grp["value"].notna()]["value"]
            row[metric.replace("ndcg", "nDCG")] = vals.mean() / 100 if len(vals) else None
        row["Queries scored"] = int(grp[(grp["metric"] == "ndcg@10")]["value"].notna().sum())
        row["Queries without oracle sessions"] = int(grp[(grp["metric"] == "ndcg@10")]["value"].isna().sum())
        row["Oracle sessions per query"] = sum(oracle) / len(oracle) if oracle else 0.0
        rows.append(row)
    return pd.DataFrame(rows)
