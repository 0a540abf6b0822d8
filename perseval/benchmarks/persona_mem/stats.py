"""PersonaMem's dataset tables, in the paper's layout: questions per query type, per topic, the distance of
the evidence from the question, and the contexts (personas, messages, sessions, tokens)."""
from __future__ import annotations

from collections import Counter
from typing import Iterable

import pandas as pd

from perseval.benchmarks.persona_mem.analysis import distance_bin
from perseval.benchmarks.persona_mem.layout import QUESTION_TYPES
from perseval.core.instances import Document, Instance
from perseval.benchmarks.persona_mem.views import PersonaMemPayload


def by_type(instances: list[Instance]) -> pd.DataFrame:
    counts = Counter(i.group for i in instances)
    users = {t: len({i.user_id for i in instances if i.group == t}) for t in counts}
    rows = [{"question_type": t, "questions": counts[t], "share_%": 100.0 * counts[t] / len(instances),
             "personas": users[t]} for t in QUESTION_TYPES if t in counts]
    rows.append({"question_type": "Overall", "questions": len(instances), "share_%": 100.0,
                 "personas": len({i.user_id for i in instances})})
    return pd.DataFrame(rows).set_index("question_type")


def by_topic(instances: list[Instance]) -> pd.DataFrame:
    frame = pd.DataFrame([{"topic": PersonaMemPayload.of(i).topic, "user": i.user_id} for i in instances])
    return frame.groupby("topic").agg(questions=("user", "size"), personas=("user", "nunique"))


def by_distance(instances: list[Instance]) -> pd.DataFrame:
    frame = pd.DataFrame([{"distance": distance_bin(PersonaMemPayload.of(i).distance_tokens),
                           "blocks": PersonaMemPayload.of(i).distance_blocks} for i in instances])
    return frame.groupby("distance").agg(questions=("blocks", "size"), blocks_mean=("blocks", "mean"),
                                         blocks_max=("blocks", "max"))


def contexts(instances: list[Instance], documents: Iterable[Document]) -> pd.DataFrame:
    docs = list(documents)
    per = Counter(d.meta.get("context") for d in docs)
    sessions = {c: 1 + max(d.meta.get("session", 0) for d in docs if d.meta.get("context") == c) for c in per}
    views = [PersonaMemPayload.of(i) for i in instances]
    tokens = {v.shared_context_id: v.context_length_in_tokens for v in views}
    known = [t for t in tokens.values() if t is not None]
    return pd.DataFrame([{"personas": len({i.user_id for i in instances}), "shared_contexts": len(per),
                          "messages": sum(per.values()), "messages_per_context": sum(per.values()) / max(len(per), 1),
                          "sessions_per_context": sum(sessions.values()) / max(len(per), 1),
                          "context_tokens_mean": sum(known) / len(known) if known else None,
                          "questions": len(instances)}], index=pd.Index(["all"], name="contexts"))


def dataset_tables(instances: list[Instance], documents: Iterable[Document]) -> dict[str, pd.DataFrame]:
    return {"questions_by_type": by_type(instances), "questions_by_topic": by_topic(instances),
            "questions_by_distance": by_distance(instances), "contexts": contexts(instances, documents)}
