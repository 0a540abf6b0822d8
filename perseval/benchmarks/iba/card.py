"""IBA-Bench's card: what it constructs or reads, the requests it sends, how answers are read and judged.

The generic agents' request: a system message, then the retrieved history (numbered passages under a
heading; nothing for a no-history agent) and the task; a CallAPI task adds the open slots, each with its
allowed values, and asks under a JSON schema. The checkpoint judge asks one binary verdict per hidden
checkpoint; the LLM slot judge one per personalization-relevant slot (C.2). IBA-Agent's own prompts live
with it (agents/iba_agent/). The request and the checkpoint judge's texts are shared with a user's own data
(custom), so they live below both benchmarks (perseval.benchmarks.actions, perseval.benchmarks.action_judges);
the LLM slot judge's are IBA-Bench's own, here (prompts.py imports them). tests/test_cards.py compares them with
what the rag agent sends. How the settings differ from the paper: docs/protocols/iba.md.
"""
from __future__ import annotations

from perseval.benchmarks.action_judges import JUDGE_INSTRUCTION, JUDGE_TEMPLATE
from perseval.benchmarks.actions import (AGENT_SYSTEM, API_TEMPLATE, GENERATE_TEMPLATE, HISTORY_TEMPLATE,
                                         PASSAGE_TEMPLATE, SLOT_TEMPLATE)
from perseval.benchmarks.card import BenchmarkCard

SLOT_JUDGE_INSTRUCTION = ("You grade one parameter of an API call an assistant made for a user. "
                          "Judge only that parameter.")
SLOT_JUDGE_TEMPLATE = ("Task:\n{task}\n\nAPI call: {api}\nParameter: {slot}\n{options}"
                       "{value}\n\nThe user's preference:\n{preference}\n\n"
                       "Is the submitted value valid and consistent with the task and the user's preference? "
                       'Answer {{"verdict": true or false, "reason": "<one sentence>"}}.')
OPTIONS_TEMPLATE = "Allowed values: {values}\n"  # "" when the slot lists none

CARD = BenchmarkCard(
    name="iba",
    paper="IBA-Bench: implicit behavioral alignment of personalized agents (iba-bench.txt)",
    data={"(no source:) constructed": "personas, noisy histories and tasks built from scenarios.yaml (construct)",
          "source: release folder": "instances and histories in the layout of docs/iba-release-layout.md (release)"},
    prompts={"agent system": AGENT_SYSTEM, "passage": PASSAGE_TEMPLATE, "history": HISTORY_TEMPLATE,
             "Generate task": GENERATE_TEMPLATE, "CallAPI task": API_TEMPLATE, "CallAPI slot": SLOT_TEMPLATE,
             "checkpoint judge system": JUDGE_INSTRUCTION, "checkpoint judge user": JUDGE_TEMPLATE,
             "slot judge system": SLOT_JUDGE_INSTRUCTION, "slot judge user": SLOT_JUDGE_TEMPLATE,
             "slot judge options": OPTIONS_TEMPLATE},
    answer="Generate: the text; CallAPI: the JSON object of the open slots, each value canonicalised to an "
    "allowed one; a missing slot is invalid",
    judges={"iba.checkpoint": "benchmarks.iba.judges.checkpoint:IbaCheckpointJudge",
            "iba.slots (by rule)": "benchmarks.iba.judges.slots:IbaSlotJudge",
            "iba.slot_llm": "benchmarks.iba.judges.slot_llm"},
    metrics={"score": "Generate: the mean of the checkpoints' verdicts; CallAPI: of the relevant slots' (x100)"},
    controls={"swapped-history": "each task answered from another persona's history"},
    analyses={"the run's tables and figures (5.3)": "benchmarks.iba.analysis",
              "by evidence count / preferences / static vs dynamic": "benchmarks.iba.analysis_slices",
              "QA vs execution (knowledge-to-action gap)": "benchmarks.iba.qa"},
    agents={"iba.agent (Deep Retrieval + BT&DA)": "benchmarks.iba.agents.iba_agent.agent",
            "iba.oracle": "benchmarks.iba.agents.oracle", "rag": "agents.rag:RagAgent"},
    code={"request": "benchmarks.actions:ActionFormat", "slot reading": "benchmarks.actions:parse_api_call",
          "checkpoint request": "benchmarks.action_judges:judge_messages",
          "slot request": "benchmarks.iba.prompts:slot_judge_messages",
          "validation (appendix B.1)": "benchmarks.iba.validation"},
    protocol="docs/protocols/iba.md",
)
