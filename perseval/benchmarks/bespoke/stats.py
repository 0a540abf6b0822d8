"""Dataset statistics of a loaded Bespoke release or sample: Table 2 and Table 7 of the paper, plus the
query-type distribution with Shannon's equitability (appendix B.1's diversity index, applied to the four
task types when they are known; the official release does not label them).

A chat session's turns are its user messages (each with the assistant's reply), as the paper counts them.
"""
from __future__ import annotations

import math
from collections import Counter
from statistics import mean

import pandas as pd

from perseval.benchmarks.bespoke.layout import TASK_TYPES
from perseval.benchmarks.bespoke.views import BespokeGold
from perseval.core.instances import CORPUS_OWNER, Document, Instance


def shannon_equitability(counts: list[int]) -> float | None:
    """E_H = H / ln S over the categories with a count (None when fewer than two categories are present)."""
    present = [c for c in counts if c > 0]
    if len(present) < 2:
        return None
    total = sum(present)
    h = -sum(c / total * math.log(c / total) for c in present)
    return h / math.log(len(present))


def per_user_table(documents: list[Document]) -> pd.DataFrame:
    """Table 7: search and chat sessions per user, average and maximum turns per chat session."""
    rows = []
    users = sorted({d.owner for d in documents if d.owner != CORPUS_OWNER})
    for user in users:
        mine = [d for d in documents if d.owner == user]
        turns = [int(d.meta.get("user_turns", d.meta.get("turns", 0))) for d in mine if d.meta.get("source") == "chat"]
        rows.append({"user": user, "search_sessions": sum(d.meta.get("source") == "search" for d in mine),
                     "chat_sessions": len(turns), "avg_turns_per_chat": mean(turns) if turns else None,
                     "max_turns_per_chat": max(turns) if turns else None})
    table = pd.DataFrame(rows, columns=["user", "search_sessions", "chat_sessions", "avg_turns_per_chat",
                                        "max_turns_per_chat"]).set_index("user")
    if not table.empty:
        table = table.astype(float)
        table.loc["Avg."] = table.mean()
    return table


def query_type_table(instances: list[Instance]) -> pd.DataFrame:
    counts = Counter(gold.task_type or "unknown" for _, gold in _queries(instances))
    rows = [{"task_type": t, "queries": counts.get(t, 0)} for t in (*TASK_TYPES, "unknown") if counts.get(t, 0)]
    return pd.DataFrame(rows, columns=["task_type", "queries"]).set_index("task_type")


def overview_table(instances: list[Instance], documents: list[Document]) -> pd.DataFrame:
    """Table 2 (users, sessions by source, sessions per user) with the query-side counts of the release."""
    queries = _queries(instances)
    history = [d for d in documents if d.owner != CORPUS_OWNER]
    users = {d.owner for d in history} | {i.user_id for i, _ in queries}
    golds = [gold for _, gold in queries]
    chat = [d for d in history if d.meta.get("source") == "chat"]
    types = Counter(g.task_type for g in golds if g.task_type)
    rows = {
        "users": len(users),
        "queries": len(queries),
        "sessions": len(history),
        "search_sessions": sum(d.meta.get("source") == "search" for d in history),
        "chat_sessions": len(chat),
        "avg_sessions_per_user": len(history) / len(users) if users else None,
        "avg_turns_per_chat": mean(int(d.meta.get("user_turns", 0)) for d in chat) if chat else None,
        "avg_gold_claims_per_query": mean(len(g.claims) for g in golds) if golds else None,
        "avg_rubric_words": mean(len(g.rubric.split()) for g in golds) if golds else None,
        "avg_rj_shots_per_query": mean(len(g.shots) for g in golds) if golds else None,
        "avg_meta_test_pairs_per_query": mean(len(g.meta_test) for g in golds) if golds else None,
        "query_type_equitability": shannon_equitability([types.get(t, 0) for t in TASK_TYPES]),
        "corpus_passages": sum(d.owner == CORPUS_OWNER for d in documents),
    }
    return pd.DataFrame({"value": rows})


def dataset_tables(instances: list[Instance], documents: list[Document]) -> dict[str, pd.DataFrame]:
    return {"table2_overview": overview_table(instances, documents), "table7_per_user": per_user_table(documents),
            "query_types": query_type_table(instances)}


def _queries(instances: list[Instance]) -> list[tuple[Instance, BespokeGold]]:
    """One instance (with its gold) per (user, query): bespoke-meta makes several per query."""
    seen: dict[tuple[str, str], tuple[Instance, BespokeGold]] = {}
    for i in instances:
        gold = BespokeGold.of(i)
        seen.setdefault((i.user_id, gold.query_id or i.instance_id), (i, gold))
    return list(seen.values())
