"""PrefEval's dataset tables, in the paper's layout: preferences and questions per topic and form, the
instances per task and inter-turn setting, and the conversation lengths each setting gives."""
from __future__ import annotations

from typing import Iterable

import pandas as pd

from perseval.core.instances import CORPUS_OWNER, Document, Instance
from perseval.benchmarks.prefeval.views import PrefEvalPayload


def by_topic(instances: list[Instance]) -> pd.DataFrame:
    frame = pd.DataFrame([{"topic": i.group, "form": PrefEvalPayload.of(i).form, "user": i.user_id,
                           "row": PrefEvalPayload.of(i).pref_doc} for i in instances])
    table = frame.groupby(["topic", "form"])["user"].nunique().unstack("form", fill_value=0)
    table.columns = [f"preferences ({form})" for form in table.columns]
    table["preferences"] = frame.groupby("topic")["user"].nunique()
    return table


def by_setting(instances: list[Instance], documents: Iterable[Document]) -> pd.DataFrame:
    """Per task, form and inter-turn setting: instances, users, and the characters of the conversation
    before the question (preference turns + inter-turns), mean over instances."""
    docs = list(documents)
    pref_chars = {d.doc_id: len(d.text) for d in docs if d.owner != CORPUS_OWNER}
    turn_chars = sorted((d.meta["turn"], len(d.text)) for d in docs if d.owner == CORPUS_OWNER)
    cumulative = [0]
    for _, chars in turn_chars:
        cumulative.append(cumulative[-1] + chars)
    views = [(i, PrefEvalPayload.of(i)) for i in instances]
    rows = [{"task": v.task, "form": v.form, "inter_turns": v.inter_turns,
             "user": i.user_id, "chars": pref_chars.get(v.pref_doc, 0) +
             cumulative[min(v.inter_turns, len(cumulative) - 1)]} for i, v in views]
    frame = pd.DataFrame(rows)
    return frame.groupby(["task", "form", "inter_turns"]).agg(
        instances=("user", "size"), preferences=("user", "nunique"), context_chars_mean=("chars", "mean"))


def dataset_tables(instances: list[Instance], documents: Iterable[Document]) -> dict[str, pd.DataFrame]:
    if not instances:
        return {}
    docs = list(documents)
    return {"preferences_by_topic": by_topic(instances), "instances_by_setting": by_setting(instances, docs)}
