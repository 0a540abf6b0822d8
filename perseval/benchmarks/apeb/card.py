"""APeB's card: what it builds or reads, the ranking request it sends, how the ranking is read and scored.

The ranking request (direct ranking, VQRA's second step, ReAct's final answer): a system message, then the
shopper's activity (one line per history event, oldest first; absent for a no-history system), the query,
VQRA's refined query where there is one, the candidates (one line each) and the final instruction, joined
with blank lines, under a JSON schema {"ranking": [k candidate ids]}. VQRA first asks for a refined query.
ReAct's own loop prompt lives with it (agents/react.py). The ranking request's texts are shared with a user's
own ranking instances (custom), so they live below both benchmarks (perseval.benchmarks.rankings); VQRA's are
APeB's own, here (prompts.py imports them). tests/test_cards.py compares them with what the direct agent
sends. How the settings differ from the paper: docs/protocols/apeb.md.
"""
from __future__ import annotations

from perseval.benchmarks.card import BenchmarkCard
from perseval.benchmarks.rankings import (ACTIVITY_TEMPLATE, CANDIDATES_TEMPLATE, FINAL_TEMPLATE, NO_ACTIVITY,
                                          QUERY_TEMPLATE, REFINED_TEMPLATE, SYSTEM)

REFINE_SYSTEM = ("You help a shopping assistant understand vague searches. From the shopper's past activity, work out "
                 "what they are really looking for and rewrite their search as a short, explicit product query "
                 "(product type, preferred brand, price level, key features). Reply with JSON only.")
REFINE_TEMPLATE = ("{activity_block}\n\n" + QUERY_TEMPLATE + "\n\n"
                   'Rewrite the search as an explicit product query this shopper would type. Answer as '
                   '{{"refined_query": "..."}}.')

CARD = BenchmarkCard(
    name="apeb",
    paper="APeB: personalized product search from noisy behaviour logs (apeb.txt, summarised in the docs)",
    data={"(no source:) generated behaviour logs": "synthetic catalog and per-user event logs (synth_logs)",
          "source: logs folder": "events and catalog in the layout of docs/apeb-log-schema.md (logfiles)",
          "mined sessions": "a search followed by an order within Delta; the history is everything before"},
    prompts={"system": SYSTEM, "activity": ACTIVITY_TEMPLATE, "no activity": NO_ACTIVITY, "query": QUERY_TEMPLATE,
             "refined query": REFINED_TEMPLATE, "candidates": CANDIDATES_TEMPLATE, "final instruction": FINAL_TEMPLATE,
             "VQRA refine system": REFINE_SYSTEM, "VQRA refine user": REFINE_TEMPLATE},
    answer="the ids of {\"ranking\": [...]} (or a list) that are candidates, duplicates dropped; a short ranking is "
    "corrected once by asking only for the missing ids",
    judges={"apeb.ranking / apeb.ranking_strict": "benchmarks.apeb.judges.ranking:ApebRankingJudge",
            "apeb.rubric (trajectory: intent, attribution, planning)": "benchmarks.apeb.judges.rubric"},
    metrics={"hit@1 (headline)": "the purchase ranked first", "hit@5": "the purchase among the five",
             "mrr": "the reciprocal rank of the purchase"},
    controls={"swapped-history": "each session ranked with another shopper's history"},
    analyses={"by query level and candidate set": "benchmarks.apeb.analysis:analyze"},
    agents={"apeb.direct": "benchmarks.apeb.agents.direct", "apeb.vqra": "benchmarks.apeb.agents.vqra",
            "apeb.react": "benchmarks.apeb.agents.react", "apeb.pps (non-LLM)": "benchmarks.apeb.agents.pps",
            "apeb.random": "benchmarks.apeb.agents.random_ranker", "apeb.oracle": "benchmarks.apeb.agents.oracle"},
    code={"session mining": "benchmarks.apeb.sessions:mine_sessions",
          "ranking request": "benchmarks.rankings:ranking_messages",
          "ranking reading": "benchmarks.rankings:parse_ranking"},
    protocol="docs/protocols/apeb.md",
)
