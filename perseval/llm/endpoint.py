"""What a running deployment hands to the tasks: plain, picklable connection facts."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from perseval.setup.config import default_dialect


@dataclass(frozen=True)
class Endpoint:
    name: str  # the model config's name
    kind: str  # embedded | vllm | openai: the structured-output dialect when the deployment sets none
    base_url: str  # .../v1
    served_model: str  # the model name the server expects in requests
    identity: str  # the model's identity (perseval.llm.identity): the cache key part, not the URL or port
    api_key_env: str | None = None  # the key itself is read from the environment, never stored
    max_concurrency: int = 4  # requests in flight per client
    timeout_s: float = 300.0
    retries: int = 3
    structured_output: str | None = None  # json_schema | json_object_schema | gbnf | none; None: by kind
    deployment_file: str | None = None  # the deployment's YAML, for messages that say what to fix
    # body fields sent beside the OpenAI ones (perseval.llm.embedded.serving); like the dialect, a
    # serving choice that enters no key
    extra_body: dict[str, Any] = field(default_factory=dict)
    # send the first of requests sharing a prompt prefix alone, the rest once it is answered
    # (perseval.llm.prefix): for a server that keeps prompt prefixes (llama-server)
    prefix_first: bool = False

    def dialect(self) -> str:
        return self.structured_output or default_dialect(self.kind)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
