"""LaMP-QA's card: what it reads, the prompts it sends, how answers are read and judged (one page).

The prompts are perseval's own words after the structure of the paper's (Salemi & Zamani 2025) and the
release's code. Answering: a system message, then the user's earlier posts (the k chosen profile items,
in retrieval order, separated by blank lines) under one heading and the current question under another;
with no item, the question alone under ANSWER_SYSTEM. Judging: one request per rubric aspect, answered
with a match score 0, 1 or 2 under a JSON schema. prompts.py imports these texts; tests/test_cards.py
renders them on the shipped sample against what the agents send. How the settings differ from the paper:
docs/protocols/lamp_qa.md.
"""
from __future__ import annotations

from perseval.benchmarks.card import BenchmarkCard

ANSWER_SYSTEM = ("You answer questions people post online. Give a complete, helpful answer written for the "
                 "person who asks.")
PROFILE_SYSTEM = ("You answer questions people post online, personalized for the person who asks. You are "
                  "shown posts this person wrote before (their earlier questions and the details they gave). "
                  "Work out from them what this person cares about, already knows and prefers, and write a "
                  "complete, helpful answer to their current question that fits them.")
PROFILE_HEADING = "Earlier posts by this person:"
QUESTION_HEADING = "Their current question:"
PLAN_HEADING = "Points this person wants the answer to cover:"  # the oracle's gold aspects, one "- " line each
ITEM_SEPARATOR = "\n\n"
# The user message with profile items: {items} the chosen posts joined; without: {question} alone.
PROFILE_TEMPLATE = PROFILE_HEADING + "\n\n{items}\n\n" + QUESTION_HEADING + "\n{question}"
NO_PROFILE_TEMPLATE = "{question}"
# The judge: its system message (then perseval.judges.quoting's rule on quoted data) and one user message per
# aspect; {response} is the response quoted as data (perseval.judges.quoting:quote).
JUDGE_INSTRUCTION = ("You grade one response to a person's question against one aspect this person wants the "
                     "answer to address. Give a match score: 0 if the response does not cover the aspect, 1 if it "
                     "covers it only partly or superficially, 2 if it covers it well.")
JUDGE_TEMPLATE = ("Question: {question}\n"
                  "Details the person gave: {narrative}\n\n"
                  "{response}\n\n"
                  "Aspect: {aspect}\n"
                  "Why it matters to this person: {reason}\n"
                  "What they wrote that shows it: {evidence}\n\n"
                  'Reply with JSON only: {{"match_score": 0, 1 or 2}}')

CARD = BenchmarkCard(
    name="lamp_qa",
    paper="Salemi & Zamani, LaMP-QA: A Benchmark for Personalized Long-form Question Answering, 2025",
    data={
        "<Category>_<split>.json": "a list of {id, question, narrative, rubric_aspects: [{aspect, reason, "
        "evidence}], profile: [{id, text}]} (the release's download script; layout:CATEGORIES)",
        "(no source:)": "the hand-written sample in perseval/benchmarks/lamp_qa/sample (the test split)",
    },
    prompts={"answer system": ANSWER_SYSTEM, "answer system (with profile)": PROFILE_SYSTEM,
             "answer user (with profile)": PROFILE_TEMPLATE, "answer user (no profile)": NO_PROFILE_TEMPLATE,
             "oracle plan heading": PLAN_HEADING, "judge system": JUDGE_INSTRUCTION, "judge user": JUDGE_TEMPLATE},
    answer="the value under personalized_answer (or answer) of a JSON object in the text, else the text; "
    "empty is invalid",
    judges={"lamp_qa.aspects": "benchmarks.lamp_qa.judges.aspects:AspectsJudge"},
    metrics={
        "score": "the paper's per-question score x100: the sum of the aspects' match scores over 2 x aspects",
        "full_coverage": "share of aspects scored 2",
        "no_coverage": "share of aspects scored 0",
    },
    controls={"swapped-history": "each question answered from another asker's profile of the same category"},
    analyses={
        "table_lamp_qa (system x category, the paper's 0..1 scale)": "benchmarks.lamp_qa.analysis:paper_table",
        "every mean with its user-clustered interval": "benchmarks.profile_questions:intervals",
        "questions_by_category (dataset table)": "benchmarks.lamp_qa.stats:by_category",
    },
    agents={
        "lamp_qa.oracle (the gold aspects as points to cover)": "benchmarks.lamp_qa.agents.oracle",
        "random_k (k random profile items)": "agents.random_k:RandomKAgent",
        "rag (BM25 / dense top-k; top_k 0: no profile)": "agents.rag:RagAgent",
    },
    code={
        "question row -> instance and profile documents": "benchmarks.lamp_qa.loader:question",
        "answer request": "benchmarks.lamp_qa.prompts:answer_messages",
        "judge request": "benchmarks.lamp_qa.prompts:aspect_messages",
        "answer extraction": "benchmarks.lamp_qa.answers:extract",
        "match score reading": "benchmarks.lamp_qa.judges.aspects:read_match",
        "per-question score": "benchmarks.lamp_qa.judges.aspects:question_scores",
    },
    protocol="docs/protocols/lamp_qa.md",
)
