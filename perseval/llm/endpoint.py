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
    identity: str  # model + revision or weights hash: the cache key part (not the URL or port)
    api_key_env: str | None = None  # the key itself is read from the environment, never stored

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
