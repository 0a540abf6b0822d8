"""The `params:` of an iba.agent YAML, validated when the experiment loads, so a typo fails before any server
starts, not mid-run."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from perseval.params import Params


class Settings(Params):
    # --- structure (the Table 5 ablations are switches here, not code forks) ---
    controller: Literal["pipeline", "fc"] = "pipeline"  # pipeline: fixed stage order; fc: function calling
    deep_retrieval: bool = True  # false: plain top-k retrieval with the task text
    broad_thinking: bool = True  # false: no preference extraction / alignment plan
    synthesis: Literal["trajectory", "rag"] = "trajectory"  # rag: the RAG baseline's prompt for the final output
    rerank: bool = True  # LLM salience re-ranking inside Deep Retrieval
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
    plan_max_tokens: int = Field(128, ge=0)
    controller_max_tokens: int = Field(64, ge=0)
    max_tokens: int = Field(192, ge=0)  # Generate(text) / QA answer
    api_max_tokens: int = Field(64, ge=0)  # CallAPI JSON answer
