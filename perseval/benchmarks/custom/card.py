"""custom's card: a researcher's own data in the generic layout, sent and scored with the formats IBA-Bench and
APeB use (no paper: the layout document stands in for a protocol sheet).

An instance's `action_type` picks the format: `generate` and `call_api` are IBA-Bench's actions, requested and
judged as IBA-Bench does (perseval.benchmarks.actions, perseval.benchmarks.action_judges), `rank` is the ranking
request and rule judge APeB uses (perseval.benchmarks.rankings, perseval.benchmarks.ranking_judge). Those modules
lie below both benchmarks, so this folder imports neither; the templates below are theirs, named here so this
card is read alone.
"""
from __future__ import annotations

from perseval.benchmarks import actions, rankings
from perseval.benchmarks.action_judges import JUDGE_TEMPLATE
from perseval.benchmarks.card import BenchmarkCard

CARD = BenchmarkCard(
    name="custom",
    paper="none: your own data (docs/custom-data-layout.md)",
    data={"<source>/instances.jsonl|parquet": "instance_id, user_id, action_type (generate | call_api | rank), "
          "query, group, gold (checkpoints, slots or the relevant ids) ... (rows)",
          "<source>/histories.jsonl|parquet": "one history turn per row, per user (rows:turn_row)"},
    prompts={"generate": actions.GENERATE_TEMPLATE, "call_api": actions.API_TEMPLATE,
             "agent system": actions.AGENT_SYSTEM, "rank system": rankings.SYSTEM,
             "rank final instruction": rankings.FINAL_TEMPLATE, "checkpoint judge user": JUDGE_TEMPLATE},
    answer="generate: the text; call_api: the slot object (IBA-Bench's reading); rank: the ranked id list (APeB's)",
    judges={"custom.checkpoint / custom.slots / custom.ranking": "benchmarks.custom.judges"},
    metrics={"score": "checkpoint share (generate), slot share (call_api), hit@k and MRR (rank)"},
    controls={"swapped-history": "each instance answered from another user's history"},
    analyses={"scores_by_type_and_group": "benchmarks.custom.benchmark:CustomBenchmark.analyze_run"},
    agents={"rag (and top_k 0: no history)": "agents.rag:RagAgent"},
    code={"request format": "benchmarks.custom.answers:CustomFormat", "rows": "benchmarks.custom.rows:instance_row",
          "layout": "benchmarks.custom.benchmark:CUSTOM_LAYOUT"},
    protocol="docs/custom-data-layout.md",
)
