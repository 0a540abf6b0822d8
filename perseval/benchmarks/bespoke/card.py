"""Bespoke's card: the release it reads, the responder's prompt, the judges and the meta-evaluation.

The responder (after Tables 13 and 14): a system message, then the query, the search results (numbered,
sharing a character budget), the user context (a profile, or raw sessions) with its guidelines where
there is one, and the final instruction, joined with blank lines. The personalization judge E_p and the
rubric step keep their longer prompts in evaluation.py; the recall judge's in prompts.py. respond.py imports
these texts; tests/test_cards.py compares them with what the responder sends on the shipped sample.
How the settings differ from the paper: docs/protocols/bespoke.md.
"""
from __future__ import annotations

from perseval.benchmarks.card import BenchmarkCard

ANSWER_SYSTEM = "You are a personalized information-seeking assistant."
QUERY_TEMPLATE = "<query>\n{query}\n</query>"
RESULT_TEMPLATE = "[{i}] {text}"  # one search result, numbered from 1
RESULTS_TEMPLATE = "<search results>\n{results}\n</search results>"  # absent with no result
USER_CONTEXT_TEMPLATE = ("<user context> (follow these preferences when you write the answer)\n{user_context}\n"
                         "</user context>\n\nGuidelines:\n- Match the organization, tone, depth and style the user "
                         "context implies.\n- Tailor the answer to this user's preferences, using accurate "
                         "information from the search results.\n- Do not ask follow-up questions or evaluate; "
                         "give only the final answer.")  # absent with no user context
FINAL_INSTRUCTION = ("Answer the query directly, personalized for this user and grounded in the search results. "
                     "No follow-up questions, no generic answer.")
SESSION_TEMPLATE = "--- past {source} ---\n{text}"  # one raw history session of the user context

CARD = BenchmarkCard(
    name="bespoke",
    paper="Bespoke: search-augmented personalization benchmark (bespoke.txt)",
    data={"queries/query_table.parquet": "user, query-id, query, gold_information_need",
          "gold_information/gold_information.parquet": "the gold atomic claims per query",
          "personalized_rubric/..., evaluation_shot/..., meta_test/...": "rubrics, judged example responses, "
          "held-out human-scored pairs (docs/bespoke-release-layout.md)",
          "chat_history/..., search_history/...": "one raw session per row",
          "(no source:)": "the small sample in the release layout (sample)"},
    prompts={"responder system": ANSWER_SYSTEM, "query": QUERY_TEMPLATE, "search result": RESULT_TEMPLATE,
             "search results": RESULTS_TEMPLATE, "user context": USER_CONTEXT_TEMPLATE,
             "final instruction": FINAL_INSTRUCTION, "raw session": SESSION_TEMPLATE},
    answer="the responder's text; the judges read it",
    judges={"bespoke.recall (one verdict per gold claim)": "benchmarks.bespoke.judges.recall",
            "bespoke.criteria (E_p, 1..5 per criterion, x20)": "benchmarks.bespoke.judges.criteria",
            "bespoke.evaluator_scores / feedback_match (meta-evaluation)": "benchmarks.bespoke.judges.feedback_match",
            "bespoke.history_ndcg (history retrieval)": "benchmarks.bespoke.judges.history_ndcg"},
    metrics={"recall": "share of gold claims the response conveys",
             "need_alignment, content_depth, tone, explanation_style": "E_p's scores on 0..100"},
    controls={"swapped-history": "each query answered with another user's context"},
    analyses={"Table 4 (user-context variants)": "benchmarks.bespoke.analysis:table4",
              "Table 3 (meta-evaluation)": "benchmarks.bespoke.meta_analysis",
              "Table 5 (history retrieval)": "benchmarks.bespoke.history_benchmark"},
    agents={"bespoke.responder": "benchmarks.bespoke.agents.responder",
            "bespoke.evaluator": "benchmarks.bespoke.agents.evaluator",
            "bespoke.history_retriever": "benchmarks.bespoke.agents.history_retriever"},
    code={"release": "benchmarks.bespoke.loader:load_release",
          "responder prompt": "benchmarks.bespoke.respond:answer_messages",
          "E_p prompt": "benchmarks.bespoke.evaluation:ep_messages",
          "claim prompt": "benchmarks.bespoke.prompts:claim_messages"},
    protocol="docs/protocols/bespoke.md",
)
