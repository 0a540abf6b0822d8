"""What a running deployment hands to the tasks: plain, picklable connection facts."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Endpoint:
    name: str  # the model config's name
    kind: str  # embedded | vllm | openai: decides the structured-output dialect
    base_url: str  # .../v1
    served_model: str  # the model name the server expects in requests
    identity: str  # the model's identity (perseval.llm.identity): the cache key part, not the URL or port
    api_key_env: str | None = None  # the key itself is read from the environment, never stored
    max_concurrency: int = 4  # requests in flight per client
    timeout_s: float = 300.0
    retries: int = 3

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
