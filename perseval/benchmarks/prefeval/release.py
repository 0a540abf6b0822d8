"""The PrefEval release as perseval's instances and documents: forms x topics x rows x inter-turn settings
x tasks (docs/benchmarks/prefeval.md).

An instance's payload says its form, task and inter-turn setting and names the document of its preference
turns (`pref_doc`); the agents lay out the conversation as the official scripts do: the preference turns,
then the first `inter_turns` inter-turns, then the question. A classification instance shows the four
options of the topic's mcq_options row with the same preference and question, shuffled with the seed;
its gold is the letter of the option that follows the preference. The files of a topic are aligned by
row, as the official scripts read them (row i of every form and of mcq_options is the same preference,
sometimes reworded slightly), so row i is user `<topic>-<i>` in every form.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perseval.benchmarks.prefeval.layout import CLASSIFICATION, GENERATION, LETTERS
from perseval.benchmarks.prefeval.loader import (McqRow, PreferenceRow, inter_turn_documents, read_form,
                                                 read_inter_turns, read_mcq, topics_in, transcript)
from perseval.core.instances import Document, Instance
from perseval.benchmarks.prefeval.views import PrefEvalPayload

BENCHMARK = "prefeval"


@dataclass
class Selection:
    forms: list[str]
    tasks: list[str]
    inter_turns: list[int]
    topics: list[str] | None


def instance_id(row: PreferenceRow, turns: int, task: str) -> str:
    return f"pe-{row.form}-{row.topic}-{row.row}-t{turns}-{'gen' if task == GENERATION else 'mcq'}"


def shuffled(options: list[str], key: str, seed: int) -> tuple[list[str], str]:
    """The options in a seeded order, and the letter of the first (the preference-following one)."""
    order = list(range(len(options)))
    random.Random(f"{seed}:{key}").shuffle(order)
    return [options[i] for i in order], LETTERS[order.index(0)]


def read_all(source: Path, sel: Selection) -> tuple[dict[str, list[PreferenceRow]], dict[str, list[McqRow]]]:
    """Every requested form's rows and, when classification is asked for, the mcq rows, per topic."""
    topics = sel.topics or topics_in(source, sel.forms)
    rows = {t: [r for f in sel.forms for r in read_form(source, f, t)] for t in topics}
    mcq = {t: read_mcq(source, t) for t in topics} if CLASSIFICATION in sel.tasks else {}
    return rows, mcq


def build_release(source: Path, sel: Selection, seed: int) -> tuple[list[Instance], list[Document], dict[str, Any]]:
    rows, mcq = read_all(source, sel)
    turns = read_inter_turns(source, max(sel.inter_turns))
    instances: list[Instance] = []
    documents: list[Document] = inter_turn_documents(turns)
    missing_mcq = 0
    for topic, topic_rows in rows.items():
        options = {m.row: m for m in mcq.get(topic, [])}
        for r in topic_rows:
            user = f"{topic}-{r.row:03d}"
            doc_id = f"{user}:{r.form}:{r.row}"
            documents.append(Document(user, doc_id, transcript(r.messages),
                                      meta={"form": r.form, "row": r.row, "messages": r.messages}))
            gold = {"preference": r.preference, "explanation": r.explanation}
            base = {"form": r.form, "topic": topic, "pref_doc": doc_id, **r.extra}
            for n in sel.inter_turns:
                if GENERATION in sel.tasks:
                    instances.append(Instance(instance_id(r, n, GENERATION), BENCHMARK, user, topic, r.question,
                                              {**base, "task": GENERATION, "inter_turns": n}, dict(gold)))
                if CLASSIFICATION in sel.tasks:
                    m = options.get(r.row)
                    if m is None:
                        missing_mcq += 1
                        continue
                    iid = instance_id(r, n, CLASSIFICATION)
                    shown, answer = shuffled(m.options, iid, seed)
                    instances.append(Instance(iid, BENCHMARK, user, topic, r.question,
                                              {**base, "task": CLASSIFICATION, "inter_turns": n, "options": shown},
                                              {**gold, "answer": answer}))
    info = {"source": str(source), "release": {
        "topics": len(rows), "preferences": sum(len({r.row for r in v}) for v in rows.values()),
        "inter_turns_available": len(turns), "rows_without_mcq_options": missing_mcq // max(len(sel.inter_turns), 1),
        **counts(instances)}}
    return instances, documents, info


def counts(instances: list[Instance]) -> dict[str, Any]:
    """How many instances, and of each form and task: of the release as selected, or of the sample drawn."""
    return {"instances": len(instances), "by_form": dict(Counter(PrefEvalPayload.of(i).form for i in instances)),
            "by_task": dict(Counter(PrefEvalPayload.of(i).task for i in instances))}


def sample_by_user(instances: list[Instance], sample: int, seed: int) -> list[Instance]:
    """Every instance of `sample` seeded preferences (users): a user's forms, settings and tasks stay together,
    so its cells are compared on the same users."""
    users = list(dict.fromkeys(i.user_id for i in instances))
    if len(users) <= sample:
        return instances
    keep = set(random.Random(f"{seed}:prefeval").sample(users, sample))
    return [i for i in instances if i.user_id in keep]
