"""What a running deployment hands to the tasks: plain, picklable connection facts."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from perseval.core.errors import DeploymentError
from perseval.llm.settings import default_dialect


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
    # a server perseval started (embedded, vllm): the file its pool writes once the server's process has
    # exited (perseval.llm.deployments.ServerPool); from then on no client sends it anything. None: an
    # existing endpoint (openai), which perseval does not watch
    exit_file: str | None = None

    def dialect(self) -> str:
        return self.structured_output or default_dialect(self.kind)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ServerExited(DeploymentError):
    """A model server perseval started exited while the run used it: nothing more is sent to its port, and
    the run stops (exit 4; the same command resumes, with the server started again)."""


def server_exit(endpoint: Endpoint) -> ServerExited | None:
    """The exit of `endpoint`'s server, once its pool has noticed it (its exit file: the one line, then the
    server's log); None while it runs, or for an endpoint perseval does not watch."""
    if not endpoint.exit_file:
        return None
    try:
        text = Path(endpoint.exit_file).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:  # there, but unreadable: still an exit
        text = f"model {endpoint.name}: its server exited (the notice {endpoint.exit_file} is unreadable: {exc})"
    line, _, log = text.partition("\n")
    return ServerExited(line, log.strip() or None)
