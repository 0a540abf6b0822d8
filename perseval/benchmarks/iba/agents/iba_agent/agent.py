"""IBA-Agent (IBA-Bench paper, section 4): Deep Retrieval, then Broad Thinking & Deep Alignment.

Deep Retrieval: retrieve with the task text; expand the task into facet queries
(style, structure, decision, correction, habit); dense retrieval per query;
content-hash redundancy filter; LLM salience re-ranking 0..10 keeping >= 5
(Table 12); at most 5 expanded queries and 10 passages (C.3).
Broad Thinking & Deep Alignment: compact evidence -> preference extraction ->
task-preference alignment plan -> synthesis of the final output (text, QA
answer, or the CallAPI slots under the schema iba.rag uses).

params (all optional; see settings.py for the full list):
  controller      pipeline (fixed order, default) | fc (the LLM picks tools by function calling)
  max_steps       controller turns of the fc loop (default 8)
  deep_retrieval  false: plain top-k retrieval with the task text        (Table 5: w/o Deep Retrieval)
  broad_thinking  false: no extraction/plan, synthesise from passages   (Table 5: w/o BT+DA)
  synthesis       trajectory (default) | rag: the RAG baseline's prompt (Table 5: w/o Synth.)
  rerank          false: skip LLM salience re-ranking (keep retrieval order)
  top_k, max_queries, max_passages, salience_threshold   retrieval sizes (3, 5, 10, 5)
  min_passages    at least this many kept: the best below the threshold fill up (3; 0: none)
  salience        labels (default): the model labels relevance and signal kinds, salience.py adds Table 12's
                  weights | rating: the model's own 0..10 rating with Table 12's criteria (the paper)
  selection       robust (default): ranked by the rater's score, ties and unreadable answers by retrieval
                  score, and the task text's own top-k kept unless the rater is confident it is unrelated
                  (a readable score <= confident_drop, 0) - a weak rater cannot keep less evidence than
                  the retrieval it re-ranks | threshold: only passages >= salience_threshold (the paper)
  compact         rule (default): the kept passages' user side, trimmed | llm: the model condenses them
                  (the paper's compact evidence function; the rule when its answer cites no passage)
  synthesis_evidence  always (default): the compact evidence in the final prompt beside preferences and plan
                  | fallback: only when extraction found no preference (the paper's plan-driven synthesis)

The paper's settings (Table 12 read literally, no top-up): salience: rating, selection: threshold,
min_passages: 0, compact: llm, synthesis_evidence: fallback. The defaults are robust to the embedded 135M
model, whose ratings do the opposite of the rubric on real chat text (issue 22).
  salience_chars  characters of a passage the salience rater sees (1200: a whole chunk)
  evidence_chars, evidence_total_chars   compact evidence per passage: the total shared, at least the
                  per-passage floor (300, 3000)
  *_max_tokens    completion budget per stage (expand, salience, extract, plan, controller, api, max_tokens)
"""
from __future__ import annotations

from perseval.agents.base import Agent, AgentContext
from perseval.benchmarks.iba.agents.iba_agent import alignment
from perseval.benchmarks.iba.agents.iba_agent import deep_retrieval as dr
from perseval.benchmarks.iba.agents.iba_agent.fc import run_fc
from perseval.benchmarks.iba.agents.iba_agent.settings import Settings
from perseval.benchmarks.iba.agents.iba_agent.state import StageFailed, State
from perseval.kernel.capabilities import Capability
from perseval.core.instances import AgentOutput, Instance
from perseval.kernel.registry import register_agent


@register_agent("iba.agent")
class IbaAgent(Agent[Settings]):
    benchmarks = ("iba",)
    needs = frozenset({Capability.LLM, Capability.RETRIEVE, Capability.DOCUMENTS})
    prompt_version = 2  # salience and rating prompts: the shared instructions before the passage (prompts.py)

    @property
    def settings(self) -> Settings:
        return self.params

    async def act(self, instance: Instance, ctx: AgentContext, repeat: int, name: str) -> AgentOutput:
        state = State(instance, ctx, self.settings, repeat)
        state.log("config", controller=self.settings.controller, deep_retrieval=self.settings.deep_retrieval,
                  broad_thinking=self.settings.broad_thinking, synthesis=self.settings.synthesis,
                  rerank=self.settings.rerank)
        if ctx.llm is None:
            return state.output(name, StageFailed("config", "iba.agent needs a backbone model"))
        try:
            await (run_fc(state) if self.settings.controller == "fc" else run_pipeline(state))
        except StageFailed as exc:
            return state.output(name, exc)
        return state.output(name)


async def run_pipeline(state: State) -> None:
    """The fixed-order controller: every enabled stage once, in the paper's order."""
    s = state.settings
    await (dr.deep_retrieve(state) if s.deep_retrieval else dr.plain_retrieve(state))
    # RAG-style synthesis reads the passages only: the thinking stages would have no consumer
    if s.broad_thinking and s.synthesis == "trajectory":
        await alignment.broad_thinking(state)
    await alignment.synthesize(state)
