"""The `params:` of an iba.agent YAML, validated when the experiment loads, so a typo fails before any server
starts, not mid-run."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from perseval.kernel.params import Params


class Settings(Params):
    # --- structure (the Table 5 ablations are switches here, not code forks) ---
    controller: Literal["pipeline", "fc"] = "pipeline"  # pipeline: fixed stage order; fc: function calling
    deep_retrieval: bool = True  # false: plain top-k retrieval with the task text
    broad_thinking: bool = True  # false: no preference extraction / alignment plan
    synthesis: Literal["trajectory", "rag"] = "trajectory"  # rag: the RAG baseline's prompt for the final output
    rerank: bool = True  # LLM salience re-ranking inside Deep Retrieval
    # --- how each step is done: the paper's way or a way robust to a weak model (see the agent's docstring) ---
    # rating: the model rates each passage 0..10 itself with Table 12's criteria (the paper); labels: the model
    # labels relevance and signal kinds, salience.py adds Table 12's weights (robust to a model's bad sums)
    salience: Literal["labels", "rating"] = "labels"
    # threshold: keep passages at or above salience_threshold, best first (the paper; min_passages tops up);
    # robust: the same, but the task text's own top-k stays unless the rater is confident it is unrelated
    # (a readable score <= confident_drop), and ties / unreadable answers go by retrieval score - a weak rater
    # then cannot keep less evidence than the retrieval it re-ranks
    selection: Literal["threshold", "robust"] = "robust"
    confident_drop: int = Field(0, ge=-1, le=10)  # robust: a task-text passage scored at most this is dropped
    # rule: the kept passages' user side, trimmed and numbered (no LLM); llm: the model writes the concise
    # evidence set from the numbered passages (the paper's compact evidence function), the rule as fallback
    compact: Literal["rule", "llm"] = "rule"
    # the final prompt: fallback - the evidence only when extraction found no preference (the paper's
    # synthesis reads the plan); always - the evidence beside the preferences and plan, so a weak extractor
    # cannot drop what retrieval kept
    synthesis_evidence: Literal["fallback", "always"] = "always"
    # --- retrieval sizes (paper C.3) ---
    top_k: int = Field(3, ge=0)  # passages per query
    max_queries: int = Field(5, ge=0)  # expanded queries
    max_passages: int = Field(10, ge=1)  # passages kept after filtering and re-ranking
    salience_threshold: int = Field(5, ge=0, le=10)  # keep passages scoring at least this (Table 12)
    # keep at least this many (the RAG baseline's top-3): when fewer reach the threshold, the best below
    # it fill up (see deep_retrieval.refine); 0: only passages at the threshold, Table 12 read literally
    min_passages: int = Field(3, ge=0)
    max_steps: int = Field(8, ge=1)  # controller turns of the FC loop
    # --- prompt sizes: the embedded model has a 4096-token context ---
    passage_chars: int | None = Field(600, ge=0)  # per passage in the RAG-style prompt (as the rag agent); None: all
    # the compact evidence shares evidence_total_chars among the kept passages, at least evidence_chars each:
    # ten passages get 300 characters of the user's side, three get 1000, so a preference stated late in
    # a long turn still reaches the extraction when few passages were kept
    evidence_chars: int = Field(300, ge=0)
    evidence_total_chars: int = Field(3000, ge=0)
    # per passage in the salience prompt: a whole retriever chunk (256 tokens), so the rater sees a
    # statement anywhere in the passage it is asked to label
    salience_chars: int = Field(1200, ge=0)
    max_preferences: int = Field(8, ge=0)
    # --- completion budgets per stage, small: the embedded CPU model writes ~40 tokens/s ---
    expand_max_tokens: int = Field(120, ge=0)
    salience_max_tokens: int = Field(32, ge=0)  # {"relevant": ..., "signals": [...]}: 12-20 tokens
    extract_max_tokens: int = Field(128, ge=0)
    compact_max_tokens: int = Field(256, ge=0)  # compact: llm
    plan_max_tokens: int = Field(128, ge=0)
    controller_max_tokens: int = Field(64, ge=0)
    max_tokens: int = Field(192, ge=0)  # Generate(text) / QA answer
    api_max_tokens: int = Field(64, ge=0)  # CallAPI JSON answer
