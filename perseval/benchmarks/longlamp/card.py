"""LongLaMP's card: what it reads, the prompt it sends, how the answer is read and scored (one page).

The prompt follows the paper's design (Kumar et al. 2024, the prompt construction of its RAG framework, as
LaMP's): every chosen profile item is written in its task's item template, the k items are joined with
", and ", and the joined items go before the row's input with the task's bridge words. The wording is
perseval's own. No system message; one user message; the answer is free text. prompts.py imports these
templates; tests/test_cards.py renders them on the shipped sample and compares them with what the agents
send. How the settings differ from the paper: docs/protocols/longlamp.md.
"""
from __future__ import annotations

from perseval.benchmarks.card import BenchmarkCard

# One profile item, per task; the placeholders are the item's fields as the release names them. The long text
# comes last, so an item cut to an agent's `passage_chars` keeps its title, rating or summary.
ITEM_TEMPLATES: dict[str, str] = {
    "abstract_generation": '"{title}" is the title of the paper whose abstract is "{abstract}"',
    "product_review": '{overall} is the rating given to a product described as "{description}"; the review, '
                      'summarized as "{summary}", reads "{reviewText}"',
    "topic_writing": 'the post summarized as "{summary}" reads "{content}"',
}
ITEM_SEPARATOR = ", and "
# The user message: {items} the chosen items joined, {input} the row's input as the release writes it.
PROMPT_TEMPLATES: dict[str, str] = {
    "abstract_generation": "{items}. These abstracts are this author's: write in their style and with their "
                           "vocabulary. {input}",
    "product_review": "{items}. These are this reviewer's earlier reviews: write as they do. {input}",
    "topic_writing": "{items}. These are this person's earlier posts: write as they do. {input}",
}
NO_PROFILE_TEMPLATE = "{input}"  # no item chosen (the no-profile agent, an empty retrieval)

CARD = BenchmarkCard(
    name="longlamp",
    paper="Kumar et al., LongLaMP: A Benchmark for Personalized Long-form Text Generation, 2024",
    data={
        "<task>_<setting>/<split>.json": "rows {<user id>, input, output, profile: [items]} (JSON list or one row a "
        "line); the user id field and the item fields per task: layout:TASKS",
        "(no source:)": "the hand-written sample in the official layout in perseval/benchmarks/longlamp/sample",
    },
    prompts={"item " + task: text for task, text in ITEM_TEMPLATES.items()}
    | {"prompt " + task: text for task, text in PROMPT_TEMPLATES.items()}
    | {"prompt (no profile item)": NO_PROFILE_TEMPLATE},
    answer="the text, stripped; an empty answer is invalid (scored 0)",
    judges={"longlamp.rule": "benchmarks.longlamp.judges.rule:LongLampRuleJudge"},
    metrics={
        "score": "the headline, 0-100: ROUGE-1 (as LaMP's generation tasks)",
        "rouge1, rougeL": "rouge-score's F-measures against the user's own text (metrics.rouge), x100",
        "valid": "100 for a non-empty answer (an empty one is still scored, 0)",
        "(METEOR)": "not computed: no package ships the WordNet data it needs offline (the protocol sheet)",
    },
    controls={"swapped-history": "each row answered from another user's profile of the same task"},
    analyses={
        "table_longlamp (the paper's table: ROUGE-1, ROUGE-L per task)": "benchmarks.longlamp.analysis:paper_table",
        "longlamp_ci (every mean with its user-clustered interval)": "benchmarks.profile_questions:intervals",
        "rows_by_task (dataset table)": "benchmarks.longlamp.stats:by_task",
    },
    agents={
        "longlamp.oracle (the gold output)": "benchmarks.longlamp.agents.oracle:LongLampOracle",
        "random_k (k random profile items)": "agents.random_k:RandomKAgent",
        "rag (BM25 / dense top-k; top_k 0: no profile)": "agents.rag:RagAgent",
    },
    code={
        "tasks, user id and item fields, files": "benchmarks.longlamp.layout:TASKS",
        "row -> instance and profile documents": "benchmarks.longlamp.loader:row_instance",
        "prompt assembly": "benchmarks.longlamp.prompts:with_profile",
        "answer extraction": "benchmarks.longlamp.answers:extract",
        "metrics by rule": "benchmarks.longlamp.judges.rule:values",
    },
    protocol="docs/protocols/longlamp.md",
)
