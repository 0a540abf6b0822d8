"""The `params:` of an iba.agent YAML, validated once so a typo fails at load time, not mid-run."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from perseval.errors import ConfigError

CONTROLLERS = ("pipeline", "fc")
SYNTHESES = ("trajectory", "rag")
MINIMUM = {"max_steps": 1, "max_passages": 1}  # other integer params may be 0


@dataclass(frozen=True)
class Settings:
    # --- structure (the Table 5 ablations are switches here, not code forks) ---
    controller: str = "pipeline"  # pipeline: fixed stage order; fc: the LLM picks tools by function calling
    deep_retrieval: bool = True  # false: plain top-k retrieval with the task text
    broad_thinking: bool = True  # false: no preference extraction / alignment plan
    synthesis: str = "trajectory"  # rag: the RAG baseline's prompt (passages + task) for the final output
    rerank: bool = True  # LLM salience re-ranking inside Deep Retrieval
    # --- retrieval sizes (paper C.3) ---
    top_k: int = 3  # passages per query
    max_queries: int = 5  # expanded queries
    max_passages: int = 10  # passages kept after filtering and re-ranking
    salience_threshold: int = 5  # keep passages scoring at least this (Table 12)
    max_steps: int = 8  # controller turns of the FC loop
    # --- prompt sizes: the embedded model has a 4096-token context ---
    passage_chars: int = 600  # per passage in the RAG-style prompt (as iba.rag)
    evidence_chars: int = 300  # per passage in the compact evidence and the salience prompt
    max_preferences: int = 8
    # --- completion budgets per stage, small: the embedded CPU model writes ~40 tokens/s ---
    expand_max_tokens: int = 120
    salience_max_tokens: int = 16
    extract_max_tokens: int = 128
    plan_max_tokens: int = 128
    controller_max_tokens: int = 64
    max_tokens: int = 192  # Generate(text) / QA answer
    api_max_tokens: int = 64  # CallAPI JSON answer

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> "Settings":
        params = dict(params or {})
        known = {f.name: f for f in fields(cls)}
        unknown = set(params) - set(known)
        if unknown:
            raise ConfigError(f"iba.agent params: unknown keys {sorted(unknown)}; known: {sorted(known)}")
        values = {name: _coerce(name, params[name], type(getattr(cls, name))) for name in params}
        out = cls(**values)
        out.check()
        return out

    def check(self) -> None:
        if self.controller not in CONTROLLERS:
            raise ConfigError(f"iba.agent params: key 'controller' must be one of {CONTROLLERS}")
        if self.synthesis not in SYNTHESES:
            raise ConfigError(f"iba.agent params: key 'synthesis' must be one of {SYNTHESES}")
        if not 0 <= self.salience_threshold <= 10:
            raise ConfigError("iba.agent params: key 'salience_threshold' must lie in [0, 10]")
        for f in fields(self):
            value, least = getattr(self, f.name), MINIMUM.get(f.name, 0)
            if isinstance(value, int) and not isinstance(value, bool) and value < least:
                raise ConfigError(f"iba.agent params: key '{f.name}' must be >= {least}")


def _coerce(name: str, value: Any, kind: type) -> Any:
    """YAML gives proper types; strings from a command line are accepted too ('false' is False)."""
    try:
        if kind is bool:
            if isinstance(value, str):
                if value.strip().lower() not in {"true", "false", "yes", "no", "1", "0"}:
                    raise ValueError(value)
                return value.strip().lower() in {"true", "yes", "1"}
            return bool(value)
        return kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"iba.agent params: key '{name}' must be a {kind.__name__}, got {value!r}") from None
