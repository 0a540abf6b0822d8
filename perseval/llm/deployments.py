"""Deployments: start, health-check and stop the servers that serve a model.

A deployment (configs/deployments/) says how a model (configs/models/) is served:
- vllm: `vllm serve` on GPUs (tensor parallel, context length, memory fraction from the deployment;
  dtype, quantization and revision from the model)
- embedded: a CPU server on a GGUF (perseval.llm.embedded): llama.cpp's llama-server, or
  llama-cpp-python's
- openai: an existing OpenAI-compatible endpoint, nothing to start
Servers listen on 127.0.0.1 on a free port; a server that fails to start raises
DeploymentError with the last lines of its log. Once started, a server is watched
by its pool: if its process exits during the run (killed, out of memory, crashed),
the pool says so in one line naming its log, writes the server's exit file (from
then on no client sends it a request, perseval.llm.client) and the run stops:
the next stage that needs it, or the end of the serving stages, raises
ServerExited (exit 4; the same command resumes and starts the server again). A
restart was the other choice; it is not made: a server that died once (memory,
a crash) mostly dies again, requests in flight were lost either way and are
redone by the re-run, and every worker holds the old port.
"""
from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Iterable, Mapping

import httpx
import psutil

from perseval.llm.settings import DeploymentConfig, ModelConfig
from perseval.core.errors import DeploymentError
from perseval.llm.embedded import HOST, cores, embedded_command, serving
from perseval.llm.endpoint import Endpoint, ServerExited
from perseval.llm.identity import identity_label, resolve_gguf
from perseval.llm.probe import probe

log = logging.getLogger("perseval.deployments")
WATCH_S = 0.2  # how often a pool looks at its servers' processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


VLLM_PYTHON_ENV = "PERSEVAL_VLLM_PYTHON"
VLLM_VENV = Path(__file__).resolve().parents[2] / ".venv-vllm"  # what `make install-gpu` builds


def vllm_python(dep: DeploymentConfig) -> str | None:
    """The interpreter that has vLLM (it pins its own torch, so it lives in its own environment): the
    deployment's `vllm.python`, else $PERSEVAL_VLLM_PYTHON, else the project's .venv-vllm; None: `vllm` on PATH."""
    found = VLLM_VENV / "bin" / "python"
    return dep.vllm.python or os.environ.get(VLLM_PYTHON_ENV) or (str(found) if found.exists() else None)


def vllm_command(model: ModelConfig, dep: DeploymentConfig, port: int) -> list[str]:
    """The launch command of a vLLM OpenAI-compatible server for `model` as `dep` serves it."""
    v, python = dep.vllm, vllm_python(dep)
    head = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model.source] if python \
        else ["vllm", "serve", model.source]
    cmd = head + [
        "--host", HOST, "--port", str(port), "--served-model-name", model.name,
        "--tensor-parallel-size", str(v.tensor_parallel_size), "--max-model-len", str(dep.context_length),
        "--gpu-memory-utilization", str(v.gpu_memory_utilization), "--dtype", model.dtype,
    ]
    if model.quantization:
        cmd += ["--quantization", model.quantization]
    if model.revision:
        cmd += ["--revision", model.revision]
    return cmd + list(v.extra_args)


def wait_healthy(base_url: str, proc: subprocess.Popen | None, timeout_s: float, log_path: Path | None,
                 health_path: str = "/models", name: str | None = None) -> None:
    """Poll `<base_url><health_path>` until it answers 200; fail fast if the process exits. `name` says which
    server in the error (a run starts several, and the message is all the user sees)."""
    prefix = f"{name}: " if name else ""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise DeploymentError(f"{prefix}server exited with code {proc.returncode} during start-up"
                                  f"{log_cause(log_path)}\n{log_tail(log_path)}", log_path)
        try:
            if httpx.get(base_url + health_path, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise DeploymentError(f"{prefix}server not healthy at {base_url} after {timeout_s:.0f}s{log_cause(log_path)}\n"
                          f"{log_tail(log_path)}", log_path)


# The line of a server's start-up log that says why it stopped, most telling first: an argparse refusal
# ("prog: error: unrecognized arguments: ..."), pydantic's (llama-cpp-python checks its settings: "1
# validation error for ModelSettings" and the two lines naming the field), an exception's last line
# ("ValueError: Failed to load model from file: ..."); else the last unindented line that says error or
# failed (an indented one is a traceback frame or the usage text a refused flag prints).
USAGE_ERROR = re.compile(r"^\S+: error: ")
# llama-server's own log lines carry a time and a level ("0.00.013.303 E llama_model_load: error loading model:
# ..."): the one that says what failed to load, else its first error line (the root cause; the later ones echo it)
LLAMA_SERVER_ERROR = re.compile(r"^[\d.]+ E (?:\S+\s+)?(\S+: .*)$")
VALIDATION = re.compile(r"^\d+ validation errors? for ")
EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception)(: |$)")
ERROR_WORD = re.compile(r"\berror\b|\bfailed\b", re.IGNORECASE)


def log_cause(path: Path | None, lines: int = 2000) -> str:
    """': <why the server stopped, from its log>' for the error's first line (the one a user sees; the log
    keeps the rest), or '' when no line of the log's tail says."""
    if path is None or not path.exists():
        return ""
    tail = path.read_text(errors="replace").splitlines()[-lines:]
    found = next((ln for ln in reversed(tail) if USAGE_ERROR.match(ln)), None)
    at = next((i for i in reversed(range(len(tail))) if VALIDATION.match(tail[i])), None)
    if found is None and at is not None:
        found = ": ".join(ln.strip() for ln in tail[at:at + 3])
    errors = [m.group(1) for m in map(LLAMA_SERVER_ERROR.match, tail) if m]
    found = found or next((e for e in errors if "error loading model" in e), None) or (errors[0] if errors else None)
    found = found or next((ln for ln in reversed(tail) if EXCEPTION.match(ln)), None) or \
        next((ln for ln in reversed(tail) if ERROR_WORD.search(ln) and not ln[:1].isspace()), None)
    return f": {' '.join(found.split())[:300]}" if found else ""


def log_tail(path: Path | None, lines: int = 25) -> str:
    if path is None or not path.exists():
        return "(no log)"
    text = path.read_text(errors="replace").splitlines()[-lines:]
    return f"last lines of {path}:\n" + "\n".join(text)


GUARD = Path(__file__).with_name("guard.py")


def start_server(cmd: list[str], env: dict[str, str], log_path: Path, leases: Path | None = None,
                 idle_s: float = 0.0) -> subprocess.Popen:
    """A server in its own process group, stdout and stderr to `log_path` (read back on failure).

    It runs under a guard (perseval/llm/guard.py) that stops the group when this process is gone, so
    a kill -9 of perseval leaves no server listening and no core busy on an abandoned request; with
    `leases`, instead once no live process has held a lease there for `idle_s` seconds (a kept server)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    watch = ["--leases", str(leases), "--idle-s", str(idle_s)] if leases is not None else [str(os.getpid())]
    guarded = [sys.executable, str(GUARD), *watch, "--", *cmd]
    # a watched guard's stdin is a pipe only this process writes to: it closes the moment this process is gone
    stdin = subprocess.PIPE if leases is None else subprocess.DEVNULL
    with open(log_path, "wb") as log:
        return subprocess.Popen(guarded, stdin=stdin, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)


def stop_server(proc: subprocess.Popen | None, grace_s: float = 20.0) -> None:
    """SIGTERM the server's whole process group (its workers go too), SIGKILL after `grace_s`."""
    if proc is None:
        return
    if proc.poll() is not None:
        _close_pipe(proc)
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass
    _close_pipe(proc)


def _close_pipe(proc: subprocess.Popen) -> None:
    if proc.stdin is not None:  # the guard's watch pipe (start_server)
        proc.stdin.close()


BUSY_SAMPLE_S, BUSY_SHARE = 0.3, 0.1  # a tenth of a core over the sample is busy (an idle server uses none)
BUSY_CORES = 0.5  # other processes using half a core or more: the machine is shared now
OMP_SETTINGS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")  # the caller's choice of OpenMP wait, when it made one


def _embedded_server(cmd: list[str]) -> bool:
    """A command line of an embedded model server as perseval starts them (given a model alias)."""
    return any(a in cmd for a in ("--alias", "--model_alias")) and \
        any(Path(c).name == "llama-server" or c == "llama_cpp.server" for c in cmd[:3])


def _busy_s(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def other_servers() -> list[psutil.Process]:
    """The embedded model servers on this machine that this process did not start (other perseval runs')."""
    me = psutil.Process()
    mine = {m.pid for m in (me, *me.children(recursive=True))}
    return [p for p in psutil.process_iter(["pid", "cmdline"])
            if p.pid not in mine and _embedded_server(p.info["cmdline"] or [])]


def sample_machine() -> tuple[float, list[tuple[int, float]]]:
    """Over BUSY_SAMPLE_S: the cores' worth of CPU that processes other than this one and its children used,
    and the embedded model servers of other perseval runs that computed in it, (pid, share of a core)."""
    me = psutil.Process()
    mine = [me, *me.children(recursive=True)]
    servers = other_servers()

    def used(procs: list[psutil.Process]) -> dict[int, float]:
        out = {}
        for proc in procs:
            try:
                out[proc.pid] = _busy_s(proc)
            except psutil.Error:
                continue
        return out

    def machine() -> float:
        t = psutil.cpu_times()
        return t.user + t.nice + t.system + t.irq + t.softirq + getattr(t, "steal", 0.0)

    before, own0, srv0, t0 = machine(), used(mine), used(servers), time.monotonic()
    time.sleep(BUSY_SAMPLE_S)
    after, own1, srv1, dt = machine(), used(mine), used(servers), time.monotonic() - t0
    own = sum(own1[k] - own0[k] for k in own1.keys() & own0.keys())
    busy = [(pid, round((srv1[pid] - srv0[pid]) / dt, 2)) for pid in srv1.keys() & srv0.keys()
            if (srv1[pid] - srv0[pid]) / dt >= BUSY_SHARE]
    return max(0.0, (after - before - own) / dt), sorted(busy)


def _alias(cmd: list[str]) -> str | None:
    """The model name an embedded server's command line serves (--alias / --model_alias)."""
    for flag in ("--alias", "--model_alias"):
        if flag in cmd and cmd.index(flag) + 1 < len(cmd):
            return cmd[cmd.index(flag) + 1]
    return None


def same_model_servers(model: str) -> list[int]:
    """Pids of other perseval runs' embedded servers serving `model` (busy or idle)."""
    return sorted(p.pid for p in other_servers() if _alias(p.info["cmdline"] or []) == model)


# Why a run does not share another run's server of the same model: that server is its run's, stopped with it
# (a run that ended would take a user's server away mid-request), and its port, slots, context length and
# prompt cache were sized for that run's requests.
NOT_SHARED = ("a model server belongs to the run that started it and stops when that run ends; this run starts "
              "its own")


def say_not_reused(model: str) -> None:
    """One line when another run already serves `model` on this machine: why this run does not reuse it."""
    pids = same_model_servers(model)
    if pids:
        log.warning("another perseval run serves %s here (pid %s); not reused: %s", model,
                    ", ".join(map(str, pids)), NOT_SHARED)


def shared_machine_env(env: Mapping[str, str]) -> dict[str, str]:
    """The OpenMP wait an embedded server starts with (scripts/bench_cotenant.py, docs/guides/performance.md):
    OpenMP's default (spin, then sleep) on a quiet machine, where PASSIVE made the quickstart 1.26x slower;
    PASSIVE when other processes are computing (other runs' model servers, or half a core of anything), where
    spinning threads are descheduled and decoding collapsed (0.4 against 33 tok/s). A setting the caller made
    (OMP_WAIT_POLICY, GOMP_SPINCOUNT) is kept as it is. Says in one line when the machine is shared."""
    others, servers = sample_machine()
    if not servers and others < BUSY_CORES:
        return {}
    chosen = {} if any(k in env for k in OMP_SETTINGS) else {"OMP_WAIT_POLICY": "PASSIVE"}
    what = ", ".join(f"pid {pid} at {share:.0%} of a core" for pid, share in servers)
    log.warning("this machine is shared: %s; this run's embedded server shares the %d core(s) and runs slower "
                "than alone%s", f"{len(servers)} other perseval model server(s) busy ({what})" if servers else
                f"other processes use {others:.1f} core(s)", cores(),
                ", with OMP_WAIT_POLICY=PASSIVE" if chosen else "")
    return chosen


class Deployment:
    """A model made live by a deployment. Use as a context manager, or call start()/stop()."""

    def __init__(self, model: ModelConfig, deployment: DeploymentConfig, log_dir: str | Path,
                 config_file: str | None = None):
        self.model, self.cfg, self.log_dir = model, deployment, Path(log_dir)
        self.config_file = config_file  # the deployment's YAML, named in what a failed start says
        self.proc: subprocess.Popen | None = None
        self.endpoint: Endpoint | None = None
        self.log_path: Path | None = None
        self.exit_file: Path | None = None  # written once the started server's process has exited
        self.name = f"model {model.name} ({deployment.kind} deployment {deployment.name})"

    def command(self, port: int) -> list[str]:
        if self.cfg.kind == "vllm":
            return vllm_command(self.model, self.cfg, port)
        return embedded_command(self.model, self.cfg, resolve_gguf(self.model.source), port)

    def launch_env(self) -> dict[str, str]:
        env = dict(os.environ)
        # llama.cpp's OpenMP threads keep OpenMP's default wait (spin a while, then sleep) on a quiet machine:
        # PASSIVE slowed the quickstart's decoding. On a shared one start() makes it PASSIVE (shared_machine_env);
        # the caller's OMP_WAIT_POLICY or GOMP_SPINCOUNT passes through either way (the test suite sets PASSIVE)
        env.update(self.cfg.vllm.env if self.cfg.kind == "vllm" else {})
        return env

    def _endpoint(self, base_url: str, served_model: str, api_key_env: str | None = None) -> Endpoint:
        c, how = self.cfg, serving(self.cfg)
        return Endpoint(self.model.name, c.kind, base_url, served_model, identity_label(self.model), api_key_env,
                        how.max_concurrency, c.timeout_s, c.retries, how.structured_output,
                        self.config_file or f"deployments/{c.name}.yaml", how.extra_body, how.prefix_first,
                        str(self.exit_file) if self.exit_file else None)

    def start(self) -> Endpoint:
        cfg = self.cfg
        if cfg.kind == "openai":  # nothing to start: one probe request says whether it takes key and dialect
            endpoint = self._endpoint((cfg.base_url or "").rstrip("/"), self.model.source, cfg.api_key_env)
            probe(endpoint, f"model {self.model.name} (openai deployment {cfg.name})")
            self.endpoint = endpoint
            return self.endpoint
        port = free_port()
        self.log_path = self.log_dir / f"{self.model.name}-{port}.log"
        self.exit_file = self.log_path.with_suffix(".exited")
        self.exit_file.unlink(missing_ok=True)  # an earlier run's server on this port: not this one
        env = self.launch_env()
        if cfg.kind == "embedded":
            say_not_reused(self.model.name)
            env.update(shared_machine_env(env))
        self.proc = start_server(self.command(port), env, self.log_path)
        base = f"http://{HOST}:{port}"
        name = self.name
        try:
            if cfg.kind == "vllm" or cfg.server == "llama-server":  # /health says 200 once the model is loaded
                wait_healthy(base, self.proc, cfg.startup_timeout_s, self.log_path, health_path="/health", name=name)
            wait_healthy(base + "/v1", self.proc, cfg.startup_timeout_s, self.log_path, name=name)
        except DeploymentError:
            self.stop()
            raise
        self.endpoint = self._endpoint(base + "/v1", self.model.name)
        return self.endpoint

    def stop(self, grace_s: float = 20.0) -> None:
        proc, self.proc = self.proc, None  # first: a watcher that sees it end now knows it was stopped
        stop_server(proc, grace_s)

    def exited(self) -> ServerExited | None:
        """The started server's process has exited while nobody stopped it: the error that says so (its one
        line, the log beside it), its exit file written for the clients; None while it runs."""
        proc = self.proc
        if proc is None or proc.poll() is None or self.proc is not proc:
            return None
        gone = ServerExited(f"{self.name}: its server {exit_text(proc.returncode)} while the run was using it"
                            f"{'' if proc.returncode > 128 or proc.returncode < 0 else log_cause(self.log_path)}",
                            self.log_path)
        if self.exit_file is not None:
            tmp = self.exit_file.with_suffix(".exited.tmp")
            try:  # whole or not at all: a client reads it on every request
                tmp.write_text(f"{gone}\n{self.log_path}\n", encoding="utf-8")
                os.replace(tmp, self.exit_file)
            except OSError as exc:  # a full disk: the clients cannot be told; the run still stops
                log.warning("%s: could not write %s (%s)", self.name, self.exit_file, exc)
        return gone

    def __enter__(self) -> Endpoint:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def exit_text(code: int) -> str:
    """'exited with code 137 (killed by SIGKILL)': a guard reports a server killed by signal N as 128 + N."""
    sig = -code if code < 0 else code - 128 if code > 128 else 0
    try:
        how = f" (killed by {signal.Signals(sig).name})" if sig else ""
    except ValueError:
        how = ""
    return f"exited with code {code}{how}"


class ServerPool:
    """The deployments of one flow run: each model started when first needed, all stopped together.

    While any is started a thread watches their processes (every WATCH_S): a server that exits says so once,
    in one warning line naming its log; `ensure` then raises its ServerExited, and so does leaving the pool
    (the run stops before its later stages) unless an error is already on its way out."""

    def __init__(self, models: Mapping[str, ModelConfig], deployments: Mapping[str, DeploymentConfig],
                 log_dir: str | Path, files: Mapping[str, str] | None = None):
        self.models, self.deployments, self.log_dir = models, deployments, Path(log_dir)
        self.files = files or {}  # "deployments/<name>" -> its YAML (ResolvedExperiment.files)
        self.endpoints: dict[str, Endpoint] = {}
        self.started: dict[str, Deployment] = {}
        self.exited: dict[str, ServerExited] = {}  # model name -> how its server ended
        self._stack = ExitStack()
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._watcher: threading.Thread | None = None

    def ensure(self, names: Iterable[str]) -> dict[str, Endpoint]:
        """Start every named model not started yet; returns the endpoints of all started ones. Raises the
        ServerExited of a server that died since it was started."""
        self.check()
        for name in sorted(set(names) - set(self.endpoints)):
            cfg = self.deployments[name]
            dep = Deployment(self.models[name], cfg, self.log_dir, self.files.get(f"deployments/{cfg.name}"))
            self.endpoints[name] = self._stack.enter_context(dep)
            with self._lock:
                self.started[name] = dep
            if dep.proc is not None and self._watcher is None:
                self._watcher = threading.Thread(target=self._watch, name="perseval-server-watch", daemon=True)
                self._watcher.start()
        return dict(self.endpoints)

    def check(self) -> None:
        """Raise the ServerExited of the first server that exited (also looked at now, not only every WATCH_S)."""
        self._look()
        if self.exited:
            raise next(iter(self.exited.values()))

    def _look(self) -> None:
        with self._lock:
            for name, dep in self.started.items():
                if name not in self.exited and (gone := dep.exited()) is not None:
                    self.exited[name] = gone
                    log.warning("%s (server log: %s); nothing more is sent to it and the run stops", gone,
                                gone.log_path)

    def _watch(self) -> None:
        while not self._done.wait(WATCH_S):
            self._look()

    def __enter__(self) -> "ServerPool":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is None:
            self._look()
        self._done.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
        self._stack.close()
        if exc_type is None and self.exited:  # the serving stages ran to their end: the stages after them do not
            raise next(iter(self.exited.values()))
