"""PersonaMem's card: what it reads, the question it sends, how the one letter is read and scored (one page).

The question is the final user turn: optionally excerpts of the earlier conversations (the generic
retrieval agents), then the user's question, the instruction and the four options; the long-context agent
sends the conversation itself as chat turns before it. Agents ask under a JSON schema {"answer": a|b|c|d}.
answers.py imports these texts; tests/test_cards.py renders them on tests/data/persona_mem against what
the agents send. How the settings differ from the paper: docs/protocols/persona_mem.md.
"""
from __future__ import annotations

from perseval.benchmarks.card import BenchmarkCard

INSTRUCTION = ("Choose the reply that fits me best, given everything you know about me from our earlier "
               "conversations. Answer with the letter of one option only.")
EXCERPT_TEMPLATE = "- {excerpt}"  # one retrieved passage, one line each
EXCERPTS_TEMPLATE = "Excerpts of our earlier conversations:\n{excerpts}"
OPTION_TEMPLATE = "({letter}) {text}"  # one line each, (a) to (d)
# The final user turn ({excerpts_block} and its blank line only where passages were retrieved):
QUESTION_TEMPLATE = "{question}\n\n" + INSTRUCTION + "\n\n{options}"
WITH_EXCERPTS_TEMPLATE = "{excerpts_block}\n\n" + QUESTION_TEMPLATE

CARD = BenchmarkCard(
    name="persona_mem",
    paper="Jiang et al., Know Me, Respond to Me: Benchmarking LLMs for Dynamic User Profiling and "
    "Personalized Responses at Scale (PersonaMem), 2025",
    data={
        "questions_<split>.csv": "question_id, question_type, topic, user_question_or_message, all_options, "
        "correct_answer, shared_context_id, end_index_in_shared_context, distance_to_ref_in_tokens ...",
        "shared_contexts_<split>.jsonl": "one {shared_context_id: [chat messages]} per line (the user's sessions)",
    },
    prompts={"question turn": QUESTION_TEMPLATE, "question turn (with excerpts)": WITH_EXCERPTS_TEMPLATE,
             "excerpts block": EXCERPTS_TEMPLATE, "excerpt": EXCERPT_TEMPLATE, "option": OPTION_TEMPLATE},
    answer="the JSON answer, else the official reading: the text after <final_answer>, then the one option "
    "named as (x), else as a bare letter; none or several is invalid",
    judges={"persona_mem.choice": "benchmarks.persona_mem.judges.choice"},
    metrics={"accuracy": "100 for the correct option, else 0 (an invalid output is a miss)",
             "valid": "100 for a usable answer"},
    controls={"swapped-history": "each question answered from another persona's context"},
    analyses={"accuracy by question type": "benchmarks.persona_mem.analysis:by_type",
              "accuracy by distance to the reference": "benchmarks.persona_mem.analysis:by_distance",
              "dataset tables": "benchmarks.persona_mem.stats:dataset_tables"},
    agents={"persona_mem.long_context (the context as chat turns)": "benchmarks.persona_mem.agents.long_context",
            "persona_mem.rag": "benchmarks.persona_mem.agents.rag",
            "persona_mem.oracle": "benchmarks.persona_mem.agents.oracle"},
    code={"question row -> instance": "benchmarks.persona_mem.loader:question_row",
          "context -> documents": "benchmarks.persona_mem.loader:context_documents",
          "question turn": "benchmarks.persona_mem.answers:question_message",
          "answer extraction": "benchmarks.persona_mem.answers:read_letter"},
    protocol="docs/protocols/persona_mem.md",
)
