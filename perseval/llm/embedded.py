"""The embedded CPU servers of a GGUF model, on 127.0.0.1.

- `llama-server` (default): llama.cpp's own server, built by `make install` from the llama.cpp source
  that the llama-cpp-python sdist vendors (infra/llama-server/build.py). It decodes several requests
  together (parallel slots, continuous batching) and keeps prompt prefixes: in each slot, and in a
  host-memory prompt cache any slot can load from, so shared instructions, rubrics and histories are not
  prefilled again.
- `llama-cpp-python`: the Python package's server, one request at a time, reusing a prefix only from the
  request just before. Kept as a deployment choice (`server: llama-cpp-python`).

Which server, its slots and threads are serving choices: they enter no key (perseval.llm.identity keys
the weights, not how they are served), so switching reuses every cached answer.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perseval.llm.settings import DeploymentConfig, ModelConfig, default_dialect
from perseval.core.errors import ConfigError

HOST = "127.0.0.1"
LLAMA_SERVER_ENV = "PERSEVAL_LLAMA_SERVER"  # a llama-server binary to use instead of the venv's
# llama-server's slots when the deployment sets no `parallel`: one, all cores on it. On 2 cores one slot
# answered the quickstart's captured requests fastest (scripts/bench_servers.py: a second slot halves the
# compute of each, and a decoding sequence waits on the other's prefill), and only one slot gives answers that
# do not depend on which requests happened to share a batch. The prompt cache serves every slot count.
DEFAULT_SLOTS = 1
# Host memory for llama-server's prompt cache (llama.cpp's default is 8 GiB): enough for the prefixes of
# the requests in flight and their followers, small enough for a laptop.
PROMPT_CACHE_MIB = 1024


def cores() -> int:
    """The cores this process may run on (a container's CPU set, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def threads(dep: DeploymentConfig) -> int:
    """llama.cpp threads: every core unless the deployment says (llama-cpp-python's default is half)."""
    return dep.n_threads or cores()


def slots(dep: DeploymentConfig) -> int:
    """Requests the embedded server decodes at once: llama-server's slots, or 1 (llama-cpp-python)."""
    if dep.server == "llama-cpp-python":
        return 1
    return dep.parallel or DEFAULT_SLOTS


def concurrency(dep: DeploymentConfig) -> int:
    """Requests a client keeps in flight: the deployment's `max_concurrency`, else one more than the server
    decodes at once, so a request is always queued in the server and no slot idles between two answers."""
    return dep.max_concurrency or slots(dep) + 1


def llama_server_binary() -> Path:
    """$PERSEVAL_LLAMA_SERVER, else the `llama-server` beside this Python (what `make install` builds into
    .venv/bin), else one on PATH. A missing one is a ConfigError saying how to get it."""
    named = os.environ.get(LLAMA_SERVER_ENV)
    if named:
        path = Path(named).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ConfigError(f"${LLAMA_SERVER_ENV}={named} is not an executable file")
        return path
    beside = Path(sys.executable).parent / "llama-server"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("llama-server")
    if found:
        return Path(found)
    raise ConfigError(
        f"llama-server not found (beside {sys.executable}, on PATH, or in ${LLAMA_SERVER_ENV}): `make install` "
        "builds it into .venv/bin (python infra/llama-server/build.py alone), or set `server: llama-cpp-python` "
        "in the embedded deployment's YAML")


# llama-cpp-python's JSON-schema-to-GBNF converter, as infra/llama-server/build.py installs it beside the binary
GRAMMAR_NAME = "llama-server-grammar.py"


def grammar_converter() -> Path:
    """The file of llama-cpp-python's JSON-schema-to-GBNF converter (llama_cpp/llama_grammar.py, standard library
    only): the installed package's own where the extra is installed (found, not imported: importing llama_cpp
    loads its compiled library), else the copy `make install` puts beside llama-server."""
    spec = importlib.util.find_spec("llama_cpp")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        if (Path(folder) / "llama_grammar.py").is_file():
            return Path(folder) / "llama_grammar.py"
    beside = llama_server_binary().parent / GRAMMAR_NAME
    if beside.is_file():
        return beside
    raise ConfigError(f"{beside} not found: `make install` puts llama-cpp-python's grammar converter beside "
                      "llama-server (python infra/llama-server/build.py alone)")


# how to get llama-cpp-python's server, an optional extra since the default serves on llama-server: its wheel
# is compiled at install (about 5 minutes on 2 cores), which the default install no longer pays
LLAMA_CPP_PYTHON_HINT = ("llama-cpp-python is not installed (an optional extra): `pip install -e '.[llama-cpp]'` "
                         "(it compiles, about 5 minutes on 2 cores), or serve on llama-server (`server: llama-server`,"
                         " the default, built by `make install`)")


def require_llama_cpp_python() -> None:
    """The `server: llama-cpp-python` deployment needs the package's server module; a missing one is a
    ConfigError saying how to install it, raised at validate rather than as a failed start later."""
    import importlib.util

    try:
        found = importlib.util.find_spec("llama_cpp.server") is not None
    except (ImportError, ValueError):  # no llama_cpp at all (or one set aside in sys.modules)
        found = False
    if not found:
        raise ConfigError(LLAMA_CPP_PYTHON_HINT)


def llama_server_command(model: ModelConfig, dep: DeploymentConfig, gguf: Path, port: int) -> list[str]:
    """llama.cpp's server on `gguf`: `slots(dep)` parallel slots, each with a KV cache of its own of
    `context_length` tokens (what one request may use, as with llama-cpp-python's n_ctx), the prompt cache
    in host memory, all cores. Not one unified KV pool: there every decode step attends over the cells of
    all slots, kept prompts included, and generation slowed from ~55 to ~500 ms a token as they filled.
    Flash attention off, as llama-cpp-python runs: `auto` turns it on for the CPU, which sums attention in
    another order (other answers at temperature 0) and was no faster here."""
    n, parallel = threads(dep), slots(dep)
    return [str(llama_server_binary()), "--model", str(gguf), "--alias", model.name, "--host", HOST,
            "--port", str(port), "--parallel", str(parallel), "--no-kv-unified",
            "--ctx-size", str(parallel * dep.context_length), "--cache-ram", str(PROMPT_CACHE_MIB),
            "--threads", str(n), "--threads-batch", str(n), "--flash-attn", "off", "--no-webui", "--metrics"]


def llama_cpp_python_command(model: ModelConfig, dep: DeploymentConfig, gguf: Path, port: int) -> list[str]:
    """llama-cpp-python's server on `gguf`, all cores: its default, cpu_count // 2, is one thread on a 2-core
    machine, where a judge request then took 5.2 s instead of 1.6 s."""
    n = threads(dep)
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", model.name,
            "--host", HOST, "--port", str(port), "--n_ctx", str(dep.context_length),
            "--n_threads", str(n), "--n_threads_batch", str(n)]


def embedded_command(model: ModelConfig, dep: DeploymentConfig, gguf: Path, port: int) -> list[str]:
    """The launch command of the deployment's embedded server."""
    if dep.server == "llama-cpp-python":
        return llama_cpp_python_command(model, dep, gguf, port)
    return llama_server_command(model, dep, gguf, port)


def dialect(dep: DeploymentConfig) -> str:
    """How a JSON schema reaches the server, unless the deployment says: llama-server gets the grammar
    llama-cpp-python's server makes of it (perseval.llm.client.gbnf), so both constrain answers alike."""
    return dep.structured_output or ("gbnf" if dep.server == "llama-server" else "json_object_schema")


# llama-cpp-python's server applies a repeat penalty of 1.1 unless told otherwise; llama-server's default is
# none. Every request to an embedded server says 1.1, the sampling the request cache's answers were made with.
REPEAT_PENALTY = 1.1


@dataclass(frozen=True)
class Serving:
    """How a client talks to a deployment's server, resolved once from its YAML (`perseval show` prints it).
    Serving choices all: none enters a key."""

    max_concurrency: int  # requests in flight per client
    structured_output: str  # the JSON-schema dialect (perseval.llm.client.structured_fields)
    extra_body: dict[str, Any] = field(default_factory=dict)  # body fields beside the OpenAI ones
    prefix_first: bool = False  # requests sharing a prompt prefix go in turn (perseval.llm.prefix): slots > 1
    server: str | None = None  # embedded: which server
    slots: int | None = None  # embedded: requests decoded at once
    threads: int | None = None  # embedded: llama.cpp threads


def serving(dep: DeploymentConfig) -> Serving:
    """The effective serving values of `dep`: what it sets, else what its kind and server need."""
    if dep.kind != "embedded":
        return Serving(dep.max_concurrency or 4, dep.structured_output or default_dialect(dep.kind))
    return Serving(concurrency(dep), dialect(dep), {"repeat_penalty": REPEAT_PENALTY},
                   prefix_first=dep.server == "llama-server" and slots(dep) > 1, server=dep.server, slots=slots(dep),
                   threads=threads(dep))
