"""custom's card: a researcher's own data in the generic layout, sent and scored with IBA-Bench's and APeB's
formats (no paper: the layout document stands in for a protocol sheet).

An instance's `action_type` picks the format: `generate` and `call_api` are IBA-Bench's requests and judges
(its card: perseval/benchmarks/iba/card.py), `rank` APeB's ranking request and its rule judge (its card:
perseval/benchmarks/apeb/card.py). The templates below are those cards' texts, named here so this card is
read alone; they are not copies.
"""
from __future__ import annotations

from perseval.benchmarks.apeb import card as apeb
from perseval.benchmarks.card import BenchmarkCard
from perseval.benchmarks.iba import card as iba

CARD = BenchmarkCard(
    name="custom",
    paper="none: your own data (docs/custom-data-layout.md)",
    data={"<source>/instances.jsonl|parquet": "instance_id, user_id, action_type (generate | call_api | rank), "
          "query, group, gold (checkpoints, slots or the relevant ids) ... (rows)",
          "<source>/histories.jsonl|parquet": "one history turn per row, per user (rows:turn_row)"},
    prompts={"generate (IBA's)": iba.GENERATE_TEMPLATE, "call_api (IBA's)": iba.API_TEMPLATE,
             "agent system (IBA's)": iba.AGENT_SYSTEM, "rank system (APeB's)": apeb.SYSTEM,
             "rank final instruction (APeB's)": apeb.FINAL_TEMPLATE,
             "checkpoint judge user (IBA's)": iba.JUDGE_TEMPLATE},
    answer="generate: the text; call_api: IBA's slot object; rank: APeB's ranked id list",
    judges={"custom.checkpoint / custom.slots / custom.ranking": "benchmarks.custom.judges"},
    metrics={"score": "checkpoint share (generate), slot share (call_api), hit@k and MRR (rank)"},
    controls={"swapped-history": "each instance answered from another user's history"},
    analyses={"scores_by_type_and_group": "benchmarks.custom.benchmark:CustomBenchmark.analyze_run"},
    agents={"rag (and top_k 0: no history)": "agents.rag:RagAgent"},
    code={"task format": "benchmarks.custom.answers:CustomTask", "rows": "benchmarks.custom.rows:instance_row"},
    protocol="docs/custom-data-layout.md",
)
