"""What a model is and how it is served: the settings of configs/models/ and configs/deployments/ files.

The llm wing owns them: its deployments, client and identity read them; perseval.experiment.config composes them
into an experiment.
"""
from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from perseval.kernel.params import Strict


class Sampling(Strict):
    temperature: float = Field(0.0, ge=0)  # a negative one is refused by every server, request by request
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int = Field(256, ge=1)
    seed: int | None = None  # None: the experiment seed


class Price(Strict):
    """What using a model costs, in US dollars: for cost reports only. No key includes it, so adding or
    changing a price invalidates no output and no cached request."""

    input_per_mtok: float = Field(0.0, ge=0)  # per million prompt tokens (an API's list price)
    output_per_mtok: float = Field(0.0, ge=0)  # per million completion tokens
    # per hour of one GPU while a stage unit runs on it (times a vLLM deployment's tensor_parallel_size;
    # an embedded server counts as one device): what a rented GPU costs
    per_gpu_hour: float = Field(0.0, ge=0)

    @model_validator(mode="after")
    def _some_price(self) -> "Price":
        if not self.model_fields_set:
            raise ValueError("give at least one of input_per_mtok, output_per_mtok, per_gpu_hour")
        return self


class ModelConfig(Strict):
    """Which weights: everything that fixes a model's answers, nothing about how it is served."""

    name: str
    format: Literal["gguf", "hf", "api"]
    # gguf: a file path or package:<module>/<file>; hf: a hub id or a local folder; api: the served name
    source: str
    revision: str | None = None  # hub commit (hf) or the provider's model version (api)
    digest: str | None = None  # sha256 of the weights, pinned: a file that differs is refused
    dtype: str = "auto"
    quantization: str | None = None  # e.g. Q4_1 (gguf), awq / fp8 (vllm)
    deployment: str  # default deployment (configs/deployments/<name>.yaml); an experiment may override it
    sampling: Sampling = Sampling()
    price: Price | None = None  # reporting only (perseval.pipeline.cost); never part of a key


class VLLMSettings(Strict):
    tensor_parallel_size: int = Field(1, ge=1)
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1)
    extra_args: list[str] = []
    python: str | None = None  # interpreter to launch with (python -m vllm...); None: the `vllm` command
    env: dict[str, str] = {}


DEPLOYMENT_FORMATS = {"embedded": "gguf", "vllm": "hf", "openai": "api"}
# How a server wants a JSON schema in `response_format`: json_schema (vLLM, OpenAI), json_object with a
# `schema` beside it (llama.cpp's servers), as a llama.cpp grammar made from it (`grammar`: what the embedded
# llama-server gets, perseval.llm.client.gbnf), or none (no response_format: the answer is only parsed).
STRUCTURED_OUTPUT = ("json_schema", "json_object_schema", "gbnf", "none")
StructuredOutput = Literal["json_schema", "json_object_schema", "gbnf", "none"]
EmbeddedServer = Literal["llama-server", "llama-cpp-python"]
EMBEDDED_ONLY = ("server", "parallel", "n_threads")


def default_dialect(kind: str) -> str:
    """The structured-output dialect of a deployment kind that sets none: what llama.cpp / vLLM accept."""
    return "json_object_schema" if kind == "embedded" else "json_schema"


class DeploymentConfig(Strict):
    """How a model is served: a server perseval starts (vllm, embedded) or an existing endpoint (openai)."""

    name: str
    kind: Literal["embedded", "vllm", "openai"]
    context_length: int = Field(4096, ge=256)  # n_ctx (embedded) / --max-model-len (vllm)
    n_threads: int | None = Field(None, ge=1)  # embedded: llama.cpp threads (None: all cores)
    # embedded: which server runs the GGUF (perseval.llm.embedded): llama.cpp's llama-server, several
    # requests decoded together, or llama-cpp-python's, one at a time
    server: EmbeddedServer = "llama-server"
    parallel: int | None = Field(None, ge=1)  # embedded llama-server: slots (None: perseval.llm.embedded's default, 1)
    vllm: VLLMSettings = VLLMSettings()
    base_url: str | None = None  # openai: the endpoint (…/v1)
    api_key_env: str | None = None  # openai: the variable holding the key (never logged)
    # requests in flight per client; None: sized to the server (embedded: its slots + 1), else 4
    max_concurrency: int | None = Field(None, ge=1)
    timeout_s: float = Field(300.0, gt=0)
    retries: int = Field(3, ge=0)
    startup_timeout_s: float = Field(600.0, gt=0)
    # the dialect of structured output; None: by server (llama-server gbnf, llama-cpp-python json_object_schema,
    # else json_schema). A serving choice like the port: it enters no key, so switching it reuses cached answers.
    structured_output: StructuredOutput | None = None

    @field_validator("base_url")
    @classmethod
    def _url(cls, url: str | None) -> str | None:
        """An http(s) URL with a host and a port in 1..65535 (a bad one would fail every request alike)."""
        if url is None:
            return url
        parts = urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            port = -1
        if parts.scheme not in ("http", "https") or not parts.hostname or port == -1 or port == 0:
            raise ValueError(f"{url!r} is not an http:// or https:// URL with a host and a port in 1..65535 "
                             "(e.g. http://127.0.0.1:8000/v1)")
        return url

    @model_validator(mode="after")
    def _kind_fields(self) -> "DeploymentConfig":
        if self.kind == "openai" and not self.base_url:
            raise ValueError("an openai deployment needs `base_url`")
        misplaced = sorted(k for k in EMBEDDED_ONLY if k in self.model_fields_set) if self.kind != "embedded" else []
        if misplaced:  # a setting no server of this kind reads would be ignored without a word
            raise ValueError(f"{', '.join(misplaced)}: only an embedded deployment reads "
                             f"{'them' if len(misplaced) > 1 else 'it'} (this one is kind {self.kind})")
        return self
