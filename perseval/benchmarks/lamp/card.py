"""LaMP's card: what it reads, the prompt it sends, how the answer is read and scored (one page).

The prompt is the paper's (Salemi et al. 2024, Table 5, and the release's `LaMP/prompts/`): every profile
item is written in its task's item template, the k items an agent chose are joined with ", and ", and the
joined items go before the question's input with the task's bridge words (LaMP-1: inside the input, right
after the word "title"). No system message; one user message. A classification or rating task asks under
a JSON schema {"answer": one of the task's labels}. prompts.py imports these templates; tests/test_cards.py
renders them on the shipped sample and compares them with what the agents send.
How the settings differ from the paper: docs/protocols/lamp.md.
"""
from __future__ import annotations

from perseval.benchmarks.card import BenchmarkCard

# One profile item, per task; the placeholders are the item's fields in the release's questions file.
ITEM_TEMPLATES: dict[str, str] = {
    "LaMP-1": '"{title}"',
    "LaMP-2": 'the tag for the movie: "{description}" is "{tag}"',
    "LaMP-3": '{score} is the score for "{text}"',
    "LaMP-4": '"{title}" is the title for "{text}"',
    "LaMP-5": '"{title}" is a title for "{abstract}"',
    "LaMP-6": '"{title}" is the title for "{text}"',
    "LaMP-7": '"{text}"',
}
ITEM_SEPARATOR = ", and "
# The user message: {items} the chosen items joined, {input} the question's input as the release writes it.
PROMPT_TEMPLATES: dict[str, str] = {
    # LaMP-1: {head} is the input up to and including its first "title", {tail} the rest of it
    "LaMP-1": "{head}, and {items}{tail}",
    "LaMP-5": "{items}. Following the given patterns {input}",
    "LaMP-7": "{items} are written by a person. Following the given patterns {input}",
}
PROMPT_TEMPLATE = "{items}. {input}"  # every other task
NO_PROFILE_TEMPLATE = "{input}"  # no item chosen (the no-profile agent, an empty retrieval)

CARD = BenchmarkCard(
    name="lamp",
    paper="Salemi et al., LaMP: When Large Language Models Meet Personalization, ACL 2024",
    data={
        "LaMP_<n>/<split>/<split>_questions.json": "a list of {id, input, profile: [items]}; an item holds its "
        "task's fields (layout:TASKS) and maybe id, date",
        "LaMP_<n>/<split>/<split>_outputs.json": '{"task", "golds": [{id, output}]}',
        "time/LaMP_<n>/...": "the same files of the time-based split (`setting: time`)",
        "(no source:)": "the hand-written sample in the official layout in perseval/benchmarks/lamp/sample",
    },
    prompts={"item " + task: text for task, text in ITEM_TEMPLATES.items()}
    | {"prompt " + task: text for task, text in PROMPT_TEMPLATES.items()}
    | {"prompt (other tasks)": PROMPT_TEMPLATE, "prompt (no profile item)": NO_PROFILE_TEMPLATE},
    answer="classification and rating: the JSON answer, else the whole text when it is a label, else the one label "
    "it names, else (LaMP-3) the first rating 1-5; no label or several is invalid. Generation: the text, stripped",
    judges={"lamp.rule": "benchmarks.lamp.judges.rule:LampRuleJudge"},
    metrics={
        "score": "the headline, 0-100: accuracy (LaMP-1/2), 100 - 25 x |error| (LaMP-3), ROUGE-1 (LaMP-4..7)",
        "accuracy": "LaMP-1/2: the label answered is the gold's",
        "abs_error, squared_error": "LaMP-3: the rating's error; no rating counts as the worse of 1 and 5",
        "rouge1, rougeL": "LaMP-4..7: rouge-score's F-measures against the gold output",
        "valid": "100 for a usable answer (an invalid one is still scored, as a miss)",
    },
    controls={"swapped-history": "each question answered from another user's profile of the same task"},
    analyses={
        "table_lamp (the paper's table, F1 from the labels answered)": "benchmarks.lamp.analysis:paper_table",
        "lamp_ci (every mean with its user-clustered interval)": "benchmarks.lamp.analysis:intervals",
        "questions_by_task (dataset table)": "benchmarks.lamp.stats:by_task",
    },
    agents={
        "random_k (k random profile items)": "agents.random_k:RandomKAgent",
        "lamp.oracle (the gold output)": "benchmarks.lamp.agents.oracle:LampOracle",
        "rag (BM25 / dense top-k; top_k 0: no profile)": "agents.rag:RagAgent",
    },
    code={
        "tasks, kinds, labels, files": "benchmarks.lamp.layout:TASKS",
        "question row -> instance and profile documents": "benchmarks.lamp.loader:question",
        "retrieval query": "benchmarks.lamp.prompts:retrieval_query",
        "prompt assembly": "benchmarks.lamp.prompts:with_profile",
        "answer schema": "benchmarks.lamp.answers:answer_schema",
        "answer extraction": "benchmarks.lamp.answers:extract",
        "metrics by rule": "benchmarks.lamp.metrics",
    },
    protocol="docs/protocols/lamp.md",
)
