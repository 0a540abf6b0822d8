"""Nothing silent (issue 24): settings that passed `validate` and then hung, ran nothing, ran twice or failed
late, and endpoints whose refusal read as a reason to run again. Each of the 25 bad inputs below was
accepted (or misreported) before; the first 22 are now refused by `perseval validate` and by `perseval run`
with exit 2 and one line naming the file, the key and what is allowed, before any server starts; the last
3 can only show when a deployment starts, and then say why in the error's first line.

| #  | bad input                                          | caught at     | the line names                                  |
|----|----------------------------------------------------|---------------|-------------------------------------------------|
| 1  | `dask: {n_workers: 0}` (run hung, printing nothing) | validate      | experiment, `dask.n_workers`, >= 1              |
| 2  | `dask: {n_workers: -1}`                            | validate      | experiment, `dask.n_workers`, >= 1              |
| 3  | `dask: {threads_per_worker: 0}`                    | validate      | experiment, `dask.threads_per_worker`, >= 1     |
| 4  | a deployment's `timeout_s: -1`                     | validate      | deployment YAML, `timeout_s`, > 0               |
| 5  | a deployment's `startup_timeout_s: 0`              | validate      | deployment YAML, `startup_timeout_s`, > 0       |
| 6  | a deployment's `n_threads: -2` (exit 4 after 60 s) | validate      | deployment YAML, `n_threads`, >= 1              |
| 7  | `base_url` with port 99999 (every row failed)      | validate      | deployment YAML, `base_url`, port 1..65535      |
| 8  | `base_url` with no scheme                          | validate      | deployment YAML, `base_url`, http(s)://         |
| 9  | `structured_output: json` (no such dialect)        | validate      | deployment YAML, `structured_output`, the three |
| 10 | a model's `sampling.temperature: -0.5`             | validate      | model YAML, `sampling.temperature`, >= 0        |
| 11 | `backbones: []` with an agent that needs a model   | validate      | experiment, `backbones`, the agent, known models |
| 12 | `agents: []` (exit 0, empty headline)              | validate      | experiment, `benchmarks.0.agents`, known agents |
| 13 | `benchmarks: []` ("judge judges none of ...")      | validate      | experiment, `benchmarks`, registered benchmarks |
| 14 | no cell: `retrievers: []` with only a RAG agent    | validate      | experiment, `retrievers`, the agent, known ones |
| 15 | a benchmark entry listed twice (cells twice)       | validate      | experiment, `benchmarks.1`, `benchmarks.0`      |
| 16 | the same entry again with another sample           | validate      | experiment, `benchmarks.1`, `benchmarks.0`      |
| 17 | an agent listed twice in one entry                 | validate      | experiment, `benchmarks.0.agents`, the name     |
| 18 | a GGUF `source` that is a folder ("no file at")    | validate      | model YAML, `source`, must be a .gguf file      |
| 19 | a 0-byte GGUF (exit 4 once the server started)     | validate      | model YAML, `source`, an empty file             |
| 20 | IBA release: `histories.jsonl` is a folder         | validate      | the path, "is a folder, expected a file"        |
| 21 | custom data: `histories.jsonl` is a folder         | validate      | the path, "is a folder, expected a file"        |
| 22 | Bespoke release: `chat_history.parquet` a folder   | validate      | the path, "is a folder, expected a file"        |
| 23 | a server that rejects its flags (vLLM extra_args)  | start         | the model, the deployment, the refusal, the log |
| 24 | an endpoint answering 401 (or 403) to the key      | start (probe) | authentication, `$api_key_env`, deployment YAML |
| 25 | an openai endpoint that refuses `json_schema`      | start (probe) | deployment YAML, `structured_output`, the three |

Issue 35 (a careless user's inputs; the first was destructive: `run` renamed the user's folder
`<dir>.damaged-<time>` and put a SQLite file in its place):

| #  | bad input                                          | caught at     | the line names                                  |
|----|----------------------------------------------------|---------------|-------------------------------------------------|
| 26 | `request_cache: <a folder>` (the folder was moved)  | validate      | experiment, `request_cache`, is a directory     |
| 27 | `request_cache:` a text file of the user's          | validate      | experiment, `request_cache`, not a SQLite file  |
| 28 | `request_cache:` another program's SQLite database  | validate      | experiment, `request_cache`, its tables         |
| 29 | the default cache (under `output_root`) a folder    | validate      | experiment, `output_root`, is a directory       |
| 30 | `mlflow.tracking_uri: sqlit:///...` (exit 4, 38 s)  | validate      | experiment, the key, the scheme, the schemes    |
| 31 | `mlflow.tracking_uri: sqlite://x.db` (no file)      | validate      | experiment, the key, sqlite:///                 |
| 32 | `seed: yes` (read as 1)                            | validate      | experiment, `seed`, a boolean, write the number |
| 33 | a deployment's `parallel: on`                      | validate      | deployment YAML, `parallel`, a boolean          |
| 34 | a model's `sampling.temperature: yes` (a float)    | validate      | model YAML, `sampling.temperature`, a boolean   |
| 35 | an agent's `params.top_k: no` (a component param)  | validate      | agent YAML, `params.top_k`, a boolean           |
| 36 | `plugins: [exp.yaml]` ("No module named 'exp'")    | validate      | experiment, `plugins`, module name or .py file  |
| 37 | a GGUF `source: /dev/zero` ("no file at")          | validate      | model YAML, `source`, not a regular file        |
| 38 | an agent named `../agents/iba-no-history`          | validate      | experiment, `benchmarks.0.agents`, plain name   |
| 39 | a backbone named `sub/smollm2-135m`                | validate      | experiment, `backbones`, plain name             |
| 40 | an openai `base_url` nothing answers at (exit 3)    | start (probe) | deployment YAML, `base_url`, the URL; exit 4    |
| 41 | a `base_url` that takes TCP, speaks no HTTP (exit 3) | start (probe) | deployment YAML, `base_url`, not HTTP; exit 4   |
| 42 | `PERSEVAL_PREFECT_IDLE_S=-1`, `-0.5` (meant 0)      | validate, run | the variable, a finite number >= 0; exit 2      |
| 43 | `PERSEVAL_PREFECT_IDLE_S=inf` (kept forever), `nan` | validate, run | the variable, a finite number >= 0; exit 2      |
| 44 | `PERSEVAL_PREFECT_IDLE_S=abc` (exit 1)              | validate, run | the variable, a finite number >= 0; exit 2      |

Issue 45 (misleading or silent before):

| #  | bad input                                          | caught at     | the line names                                  |
|----|----------------------------------------------------|---------------|-------------------------------------------------|
| 41 | a `source:` that is a symlink loop ("does not exist") | validate   | experiment, `benchmarks.0.source`, symlink loop |
| 42 | `output_root: /proc/...` (the run failed late)     | validate      | experiment, `output_root`, cannot be written    |
| 43 | an `output_root` under a file                      | validate      | experiment, `output_root`, the file             |
| 44 | a validator's refusal ("Value error, ...")         | validate      | the key and the validator's words alone         |
| 45 | a plugin that raises on import                     | validate      | experiment, `plugins`, the plugin file and line |
| 46 | a plugin that registers a built-in name again      | validate      | experiment, `plugins`, the plugin, the name     |
| 47 | a model YAML that is a folder (IsADirectoryError)  | validate      | the YAML, "is a folder, expected a file"        |
| 48 | a model YAML that is a link loop ("there is no")    | validate      | the YAML, "is a symlink loop"                   |

Issue 53 (silent, late or misleading before):

| #  | bad input                                          | caught at     | the line names                                  |
|----|----------------------------------------------------|---------------|-------------------------------------------------|
| 49 | `output_root` in the installed package (40 paths)  | validate, run | experiment, `output_root`, the package          |
| 50 | `output_root` in a Python environment              | validate, run | experiment, `output_root`, the environment      |
| 51 | `output_root` the repository or its tests/ folder  | validate, run | experiment, `output_root`, the repository       |
| 52 | a plugin that calls sys.exit(0) (exit 0, no output) | validate, run | experiment, `plugins`, the file and line        |
| 53 | an alias bomb in an override (run: 3 GB in 36 s)   | validate, run | the experiment file and line                    |
| 54 | an alias bomb in an agent YAML                     | validate, run | the agent YAML and line                         |
| 55 | an alias of itself (`&x [1, *x]`)                  | validate, run | the file and line, "repeats without end"        |
| 56 | `api_key_env` not set (exit 4 after construct)     | validate, run | deployment YAML, `api_key_env`, the variable    |
| 57 | LaMP `setting: time` without time/ (a file named)  | validate, run | the missing folder                              |
| 58 | an endpoint that takes requests, never answers (3) | start (probe) | deployment YAML, `base_url`, the wait; exit 4   |

Beside the table (issue 53): `--output-root` in the package, a name that is both a file in the working
folder and an experiment's (`validate`, `compare`: a note says which was read and how to get the other),
`compare` and `samples` where there is no MLflow database (nothing created there).

Row 26 also leaves the folder and every file in it as they were, after `validate` and after `run` (and
after a run whose `--output-root` puts the default cache on a folder, which only the flow's start sees).

Further cases beside the table: APeB's `events.csv` as a folder, a 403, an unset `api_key_env`, a key
refused in the middle of a run (the run's last line names the key to fix, not "run again"), a GGUF that
only llama.cpp can find broken (its log's cause lifted into the error line), a connection error that names
the address. (An int where a layout says text, `preferences[0].value: 5`, is the IBA loader's case.)
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pytest
import yaml
from typer.testing import CliRunner

import perseval_flows.cli
from perseval_flows.cli import _redo_hint, app
from perseval_flows.failure import failure_report, what_failed
from perseval_flows.prefect_server import IDLE_ENV
from perseval.llm.settings import DeploymentConfig, ModelConfig, Sampling
from perseval.experiment.config import load_config
from perseval.experiment.load import load_experiment
from perseval.core.errors import DeploymentError, EndpointRefused
from perseval.llm import deployments
from perseval.llm.cache import RequestCache
from perseval.llm.client import LLMClient
from perseval.llm.deployments import Deployment, free_port
from perseval.llm.endpoint import Endpoint

from .conftest import CONFIGS, REPO, shipped_yaml
from .http_stub import JsonHandler, completion, serve
from .bad_input_cases import _experiment, _valid_source

runner = CliRunner()
SCHEMA = {"type": "object", "properties": {"verdict": {"type": "boolean"}}, "required": ["verdict"]}
Break = Callable[[Path, Path, Path], Path]  # (configs, experiment file, tmp) -> the experiment to validate


@dataclass(frozen=True)
class Case:
    name: str
    breaks: Break
    expect: tuple[str, ...]  # all in the one error line
    forbid: tuple[str, ...] = ()  # what the line used to say instead


def _edit(path: Path, change: Callable[[dict], object]) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def exp(change: Callable[[dict], object]) -> Break:
    def go(configs: Path, path: Path, tmp: Path) -> Path:
        _edit(path, change)
        return path
    return go


def entry(change: Callable[[dict], object]) -> Break:
    return exp(lambda e: change(e["benchmarks"][0]))


def config(rel: str, **values: object) -> Break:
    """A named config under configs/ with `values` set (the experiment unchanged)."""
    def go(configs: Path, path: Path, tmp: Path) -> Path:
        _edit(configs / rel, lambda d: d.update(values))
        return path
    return go


def remote(**values: object) -> Break:
    """The shipped API model as a second backbone, its openai deployment with `values` set."""
    def go(configs: Path, path: Path, tmp: Path) -> Path:
        _edit(path, lambda e: e["backbones"].append("remote-openai"))
        return config("deployments/openai-api.yaml", **values)(configs, path, tmp)
    return go


def gguf(make: Callable[[Path], Path]) -> Break:
    def go(configs: Path, path: Path, tmp: Path) -> Path:
        return config("models/smollm2-135m.yaml", source=str(make(tmp)))(configs, path, tmp)
    return go


def _folder(tmp: Path) -> Path:
    (tmp / "weights").mkdir()
    (tmp / "weights" / "config.json").write_text("{}")  # an HF checkout, not a GGUF file
    return tmp / "weights"


def _empty(tmp: Path) -> Path:
    (tmp / "empty.gguf").write_bytes(b"")
    return tmp / "empty.gguf"


def table_is_folder(loader: str, rel: str) -> Break:
    """A valid `loader` source whose table `rel` is a folder of that name (an archive unpacked in place)."""
    def go(configs: Path, path: Path, tmp: Path) -> Path:
        source = _valid_source(loader, tmp / "source")
        (source / rel).unlink()
        (source / rel).mkdir()
        (source / rel / "part-0").write_text("")
        return _experiment(configs, tmp / "out", loader, source)
    return go


def text(change: Callable[[str], str]) -> Break:
    """The experiment file's text changed as written (YAML's `yes`, which a dump would write as `true`)."""
    def go(configs: Path, path: Path, tmp: Path) -> Path:
        path.write_text(change(path.read_text()))
        return path
    return go


def user_folder(tmp: Path) -> Path:
    """A folder of the user's, with files: what `request_cache` wrongly names."""
    folder = tmp / "my-notes"
    (folder / "drafts").mkdir(parents=True)
    (folder / "todo.txt").write_text("the user's own\n")
    (folder / "drafts" / "paper.tex").write_text("\\section{Results}\n")
    return folder


def path_at(key: str, make: Callable[[Path], Path]) -> Break:
    """The experiment's `key` set to the path `make(tmp)` gives."""
    def go(configs: Path, path: Path, tmp: Path) -> Path:
        _edit(path, lambda e: e.update({key: str(make(tmp))}))
        return path
    return go


def cache_at(make: Callable[[Path], Path]) -> Break:
    return path_at("request_cache", make)


def _text_file(tmp: Path) -> Path:
    (tmp / "answers.txt").write_text("not a database\n")
    return tmp / "answers.txt"


def _other_db(tmp: Path) -> Path:
    import sqlite3

    con = sqlite3.connect(tmp / "mlflow.db")
    con.execute("CREATE TABLE experiments (id INTEGER)")
    con.commit()
    con.close()
    return tmp / "mlflow.db"


def _default_cache_folder(configs: Path, path: Path, tmp: Path) -> Path:
    (tmp / "earlier-runs" / "request-cache.sqlite").mkdir(parents=True)
    _edit(path, lambda e: e.update(output_root=str(tmp / "earlier-runs")))
    return path


def _twice(other_sample: bool) -> Callable[[dict], None]:
    def go(e: dict) -> None:
        again = dict(e["benchmarks"][0], **({"sample": 3} if other_sample else {}))
        e["benchmarks"].append(again)
    return go


def _source_loop(configs: Path, path: Path, tmp: Path) -> Path:
    (tmp / "release").symlink_to(tmp / "release")  # a link to itself: "does not exist" misled
    return _experiment(configs, tmp / "out", "iba", tmp / "release")


def _output_under_file(configs: Path, path: Path, tmp: Path) -> Path:
    (tmp / "notes.txt").write_text("the user's own\n")
    _edit(path, lambda e: e.update(output_root=str(tmp / "notes.txt" / "runs")))
    return path


def _prefeval(change: Callable[[dict], object]) -> Break:
    def go(configs: Path, path: Path, tmp: Path) -> Path:
        exp_path = _experiment(configs, tmp / "out", "prefeval", _valid_source("prefeval", tmp / "pe"))
        _edit(exp_path, lambda e: change(e["benchmarks"][0]))
        return exp_path
    return go


def _config_replaced(rel: str, make: Callable[[Path], object]) -> Break:
    """A named config whose YAML file is replaced by what `make` puts at its path."""
    def go(configs: Path, path: Path, tmp: Path) -> Path:
        (configs / rel).unlink()
        make(configs / rel)
        return path
    return go


def _plugin(source: str) -> Break:
    def go(configs: Path, path: Path, tmp: Path) -> Path:
        (path.parent / "broken.py").write_text(source)
        _edit(path, lambda e: e.update(plugins=["broken.py"]))
        return path
    return go


# A "billion laughs": nine levels of nine aliases, a billion values once expanded, from 11 short lines.
BOMB = 'l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"l{i}: &l{i} [*l{i - 1},*l{i - 1},*l{i - 1},*l{i - 1},*l{i - 1},*l{i - 1},*l{i - 1},*l{i - 1},*l{i - 1}]\n"
    for i in range(1, 10))


def _bomb_in_override(configs: Path, path: Path, tmp: Path) -> Path:
    """The bomb under `overrides.agents` of an agent the experiment does not list (validate said ok, then
    the run grew past 3 GB)."""
    nested = "".join(f"      {line}\n" for line in BOMB.splitlines())
    path.write_text(path.read_text() + f"overrides:\n  agents:\n    iba-rag:\n{nested}")
    return path


def _config_text(rel: str, extra: str) -> Break:
    """A named config under configs/ with `extra` written at its end, as text (anchors and aliases)."""
    def go(configs: Path, path: Path, tmp: Path) -> Path:
        (configs / rel).write_text((configs / rel).read_text() + extra)
        return path
    return go


def _in_a_venv(tmp: Path) -> Path:
    (tmp / "env").mkdir()
    (tmp / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")  # what `python -m venv` writes first
    return tmp / "env" / "runs"


def _lamp_time_split_missing(configs: Path, path: Path, tmp: Path) -> Path:
    """A LaMP release without its time/ folder, read with `setting: time`."""
    source = _valid_source("lamp", tmp / "lamp")
    shutil.rmtree(source / "time")
    exp_path = _experiment(configs, tmp / "out", "lamp", source)
    _edit(exp_path, lambda e: e["benchmarks"][0].update(params={"setting": "time", "tasks": ["LaMP-3"]}))
    return exp_path


UNSET = "PERSEVAL_TEST_NEVER_SET_KEY"  # no environment sets it
OUT_OF_PLACE = (REPO / "perseval" / "out-of-place", REPO / "tests" / "out-of-place")  # never made
GE1 = "greater than or equal to 1"
CPU = "deployments/smollm2-135m-cpu.yaml"
CASES = [
    Case("n_workers_0", exp(lambda e: e.update(dask={"n_workers": 0})), ("bad.yaml", "key 'dask.n_workers'", GE1)),
    Case("n_workers_negative", exp(lambda e: e.update(dask={"n_workers": -1})),
         ("bad.yaml", "key 'dask.n_workers'", GE1)),
    Case("threads_per_worker_0", exp(lambda e: e.update(dask={"threads_per_worker": 0})),
         ("bad.yaml", "key 'dask.threads_per_worker'", GE1)),
    Case("timeout_negative", config(CPU, timeout_s=-1), ("smollm2-135m-cpu.yaml", "key 'timeout_s'", "greater than 0")),
    Case("startup_timeout_0", config(CPU, startup_timeout_s=0),
         ("smollm2-135m-cpu.yaml", "key 'startup_timeout_s'", "greater than 0")),
    Case("n_threads_negative", config(CPU, n_threads=-2), ("smollm2-135m-cpu.yaml", "key 'n_threads'", GE1)),
    Case("base_url_port", remote(base_url="http://127.0.0.1:99999/v1"),
         ("openai-api.yaml", "key 'base_url'", "99999", "a port in 1..65535")),
    Case("base_url_no_scheme", remote(base_url="api.example.com/v1"),
         ("openai-api.yaml", "key 'base_url': 'api.example.com/v1' is not an http:// or https:// URL"),
         ("Value error",)),
    Case("structured_output_unknown", config(CPU, structured_output="json"),
         ("smollm2-135m-cpu.yaml", "key 'structured_output'", "'json_schema', 'json_object_schema', 'gbnf' or 'none'")),
    Case("temperature_negative", config("models/smollm2-135m.yaml", sampling={"temperature": -0.5}),
         ("smollm2-135m.yaml", "key 'sampling.temperature'", "greater than or equal to 0")),
    Case("no_backbones", exp(lambda e: e.update(backbones=[])),
         ("bad.yaml", "key 'backbones' is empty", "'iba-no-history'", "needs a model", "known: ", "smollm2-135m")),
    Case("no_agents", entry(lambda b: b.update(agents=[])),
         ("bad.yaml", "key 'benchmarks.0.agents'", "has no agents", "known: ", "iba-agent")),
    Case("no_benchmarks", exp(lambda e: e.update(benchmarks=[])),
         ("bad.yaml", "key 'benchmarks'", "has no benchmarks", "registered: ", "apeb, bespoke"), ("judges none",)),
    Case("no_cells", exp(lambda e: (e.update(retrievers=[]), e["benchmarks"][0].update(agents=["iba-rag"]))),
         ("bad.yaml", "key 'retrievers' is empty", "'iba-rag'", "retrieves", "known: ", "minilm")),
    Case("entry_twice", exp(_twice(False)),
         ("bad.yaml", "key 'benchmarks.1'", "same benchmark as benchmarks.0", "listed twice")),
    Case("entry_twice_other_sample", exp(_twice(True)), ("bad.yaml", "key 'benchmarks.1'", "benchmarks.0")),
    Case("agent_twice", entry(lambda b: b.update(agents=["iba-no-history", "iba-no-history"])),
         ("bad.yaml", "key 'benchmarks.0.agents'", "'iba-no-history' is listed twice")),
    Case("gguf_folder", gguf(_folder),
         ("smollm2-135m.yaml", "key 'source'", "is a directory", "must be a .gguf file"), ("no file at",)),
    Case("gguf_empty", gguf(_empty), ("smollm2-135m.yaml", "key 'source'", "empty.gguf is an empty file", "GGUF")),
    Case("iba_histories_folder", table_is_folder("iba", "histories.jsonl"),
         ("histories.jsonl: is a folder, expected a file",), ("missing file",)),
    Case("custom_histories_folder", table_is_folder("custom", "histories.jsonl"),
         ("histories.jsonl: is a folder, expected a file",), ("missing file",)),
    Case("bespoke_table_folder", table_is_folder("bespoke", "chat_history/chat_history.parquet"),
         ("chat_history.parquet: is a folder, expected a file",), ("file missing",)),
    Case("apeb_events_folder", table_is_folder("apeb", "events.csv"),
         ("events.csv: is a folder, expected a file",), ("missing file",)),
    # issue 35
    Case("request_cache_folder", cache_at(user_folder), ("bad.yaml", "key 'request_cache'", "my-notes is a directory",
                                                         "nothing was moved"), ("damaged",)),
    Case("request_cache_text_file", cache_at(_text_file),
         ("bad.yaml", "key 'request_cache'", "answers.txt is not a SQLite file"), ("damaged",)),
    Case("request_cache_other_db", cache_at(_other_db),
         ("bad.yaml", "key 'request_cache'", "mlflow.db is another program's SQLite database (tables: experiments)")),
    Case("default_cache_folder", _default_cache_folder,
         ("bad.yaml", "key 'output_root'", "request-cache.sqlite is a directory")),
    Case("tracking_uri_scheme", exp(lambda e: e.update(mlflow={"tracking_uri": "sqlit:///mlruns/mlflow.db"})),
         ("bad.yaml", "key 'mlflow.tracking_uri'", "(scheme 'sqlit')", "sqlite:///<file>", "postgresql://",
          "http://", "file:///<folder>")),
    Case("tracking_uri_sqlite_two_slashes", exp(lambda e: e.update(mlflow={"tracking_uri": "sqlite://mlflow.db"})),
         ("bad.yaml", "key 'mlflow.tracking_uri'", "sqlite:///<relative file>")),
    Case("seed_yes", text(lambda t: t.replace("name: bad-input\n", "name: bad-input\nseed: yes\n")),
         ("bad.yaml", "key 'seed'", "got a boolean (true", "write the number")),
    Case("parallel_on", config(CPU, parallel=True), ("smollm2-135m-cpu.yaml", "key 'parallel'", "got a boolean")),
    Case("temperature_yes", config("models/smollm2-135m.yaml", sampling={"temperature": True}),
         ("smollm2-135m.yaml", "key 'sampling.temperature'", "got a boolean")),
    Case("param_top_k_no", config("agents/iba-no-history.yaml", params={"top_k": False}),
         ("iba-no-history.yaml", "key 'params.top_k'", "got a boolean (false")),
    Case("plugins_yaml", exp(lambda e: e.update(plugins=["exp.yaml"])),
         ("bad.yaml", "key 'plugins'", "'exp.yaml' is neither a module name nor a .py file", "a module to import",
          "a .py file"), ("No module named",)),
    Case("gguf_device", gguf(lambda tmp: Path("/dev/zero")),
         ("smollm2-135m.yaml", "key 'source'", "/dev/zero is not a regular file", "not a GGUF file"), ("no file at",)),
    Case("agent_name_dotdot", entry(lambda b: b.update(agents=["../agents/iba-no-history"])),
         ("bad.yaml", "key 'benchmarks.0.agents'", "'../agents/iba-no-history' is not a plain name")),
    Case("backbone_name_path", exp(lambda e: e.update(backbones=["sub/smollm2-135m"])),
         ("bad.yaml", "key 'backbones'", "'sub/smollm2-135m' is not a plain name")),
    # issue 45
    Case("source_symlink_loop", _source_loop, ("bad.yaml", "key 'benchmarks.0.source'", "is a symlink loop"),
         ("does not exist",)),
    Case("output_root_proc", exp(lambda e: e.update(output_root="/proc/perseval-runs")),
         ("bad.yaml", "key 'output_root'", "'/proc/perseval-runs'", "/proc cannot be written", "read-only or virtual")),
    Case("output_root_under_a_file", _output_under_file,
         ("bad.yaml", "key 'output_root'", "notes.txt is a file, expected a folder")),
    Case("prefeval_inter_turns_negative", _prefeval(lambda b: b["params"].update(inter_turns=[-1])),
         ("bad.yaml", "key 'benchmarks.0.params.inter_turns': an inter-turn setting is 0 or more turns"),
         ("Value error",)),
    Case("model_yaml_folder", _config_replaced("models/smollm2-135m.yaml", lambda p: p.mkdir()),
         ("smollm2-135m.yaml: is a folder, expected a file",)),
    Case("model_yaml_link_loop", _config_replaced("models/smollm2-135m.yaml", lambda p: p.symlink_to(p)),
         ("smollm2-135m.yaml: is a symlink loop",), ("there is no",)),
    Case("plugin_raises", _plugin("x = 1\nraise RuntimeError('no config file')\n"),
         ("bad.yaml", "key 'plugins'", "broken.py' failed to import at ", "broken.py, line 2",
          "RuntimeError: no config file")),
    Case("plugin_registers_a_builtin_name", _plugin("from perseval.agents.rag import RagAgent\n"
                                                    "from perseval.kernel.registry import register_agent\n\n\n"
                                                    "@register_agent('rag')\nclass Again(RagAgent):\n    pass\n"),
         ("bad.yaml", "key 'plugins'", "broken.py'", "agent kind 'rag' is registered twice")),
    # issue 53
    Case("output_root_in_the_package", path_at("output_root", lambda tmp: OUT_OF_PLACE[0]),
         ("bad.yaml", "key 'output_root'", "is inside the installed perseval package", "name a folder of your own")),
    Case("output_root_in_a_venv", path_at("output_root", _in_a_venv),
         ("bad.yaml", "key 'output_root'", "env/runs'", "is inside the Python environment", "name a folder")),
    Case("output_root_in_the_repository_tests", path_at("output_root", lambda tmp: OUT_OF_PLACE[1]),
         ("bad.yaml", "key 'output_root'", "is inside the perseval repository's tests/ folder", "runs")),
    Case("output_root_the_repository", path_at("output_root", lambda tmp: REPO),
         ("bad.yaml", "key 'output_root'", "is the top folder of the perseval repository")),
    Case("plugin_exits", _plugin("import sys\nsys.exit(0)\n"),
         ("bad.yaml", "key 'plugins'", "broken.py' failed to import at ", "broken.py, line 2",
          "it called sys.exit(0) on import; a plugin must not end the process")),
    Case("alias_bomb_in_an_override", _bomb_in_override,
         ("bad.yaml, line ", "its anchors and aliases expand to more than 100,000 values")),
    Case("alias_bomb_in_an_agent_yaml", _config_text("agents/iba-no-history.yaml", BOMB),
         ("iba-no-history.yaml, line ", "expand to more than 100,000 values")),
    Case("alias_of_itself", text(lambda t: t + "extra: &x [1, *x]\n"),
         ("bad.yaml, line ", "holds an alias of itself", "repeats without end")),
    Case("api_key_env_unset", remote(api_key_env=UNSET),
         ("openai-api.yaml: key 'api_key_env'", f"${UNSET} is not set in this environment", "export it (or remove api_key_env")),
    Case("lamp_time_split_missing", _lamp_time_split_missing,
         ("lamp/time: missing folder", "the time-based dev split of LaMP-3 is read from", "time/LaMP_3"),
         ("outputs.json",)),
]


def _case(case: Case, configs: Path, tmp_path: Path) -> Path:
    return case.breaks(configs, _experiment(configs, tmp_path / "out"), tmp_path)


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_refused_before_anything_starts(case, command, tmp_path, configs, monkeypatch):
    """Exit 2 and one line; `run` never reaches its flow (no Prefect, no Dask, no model server)."""
    monkeypatch.chdir(tmp_path)
    started: list = []
    monkeypatch.setattr(perseval_flows.cli, "_run_flow", lambda *a, **k: started.append(a))
    monkeypatch.setattr(deployments, "start_server", lambda *a, **k: started.append(a))
    result = runner.invoke(app, [command, str(_case(case, configs, tmp_path))])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert all(part in lines[0] for part in case.expect), lines[0]
    assert not any(part in lines[0] for part in case.forbid), lines[0]
    assert not started and not (tmp_path / "out").exists() and not any(p.exists() for p in OUT_OF_PLACE)


def test_the_real_cli_in_a_fresh_process(tmp_path, configs):
    """`python -m perseval_flows.cli validate` as a user runs it: one line on stdout, exit 2, nothing written."""
    path = CASES[0].breaks(configs, _experiment(configs, tmp_path / "out"), tmp_path)
    done = subprocess.run([sys.executable, "-m", "perseval_flows.cli", "validate", str(path)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done
    assert done.stdout.strip().splitlines() == [f"error: {path}: key 'dask.n_workers': Input should be {GE1}"]
    assert not (tmp_path / "out").exists()


# --- 26: the user's folder survives validate and run -------------------------------------------------------

def _snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under `root` (root too), a file with its bytes: what must be left exactly as it was."""
    return {str(p.relative_to(root.parent)): (p.read_bytes() if p.is_file() else None)
            for p in [root, *sorted(root.rglob("*"))]}


def _beside(folder: Path) -> list[str]:
    """What lies beside the folder (a `my-notes.damaged-<time>` or a SQLite file in its place would)."""
    return sorted(p.name for p in folder.parent.iterdir() if p.name.startswith(folder.name))


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_request_cache_folder_is_never_moved(command, tmp_path, configs, monkeypatch):
    """Row 26 as the user met it: the real `validate` and `run` (no flow patched out), the folder intact."""
    monkeypatch.chdir(tmp_path)
    folder = user_folder(tmp_path)
    before = _snapshot(folder)
    path = cache_at(lambda tmp: folder)(configs, _experiment(configs, tmp_path / "out"), tmp_path)
    result = runner.invoke(app, [command, str(path)])
    assert result.exit_code == 2 and "key 'request_cache'" in result.output and "is a directory" in result.output
    assert _snapshot(folder) == before and _beside(folder) == ["my-notes"], result.output


@pytest.mark.parametrize("root", ["/proc/perseval-runs", "notes.txt/runs", str(OUT_OF_PLACE[0])])
def test_an_output_root_given_on_the_command_line_is_checked_before_any_server_starts(root, tmp_path, configs,
                                                                                     monkeypatch):
    """`run --output-root` replaces the file's output_root after the file was checked: the option gets the same
    check, named as the option, before the Prefect server (or any other) is started."""
    import perseval_flows.cli as cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("a file\n")
    started = []
    monkeypatch.setattr(cli, "_prefect_for", lambda *a: started.append(a))
    result = runner.invoke(app, ["run", str(_experiment(configs, tmp_path / "out")), "--output-root", root])
    assert result.exit_code == 2 and "--output-root" in result.output and repr(root) in result.output, result.output
    assert not started and not (tmp_path / "out").exists() and not OUT_OF_PLACE[0].exists()


@pytest.mark.integration
def test_a_run_whose_output_root_holds_a_cache_folder_stops_and_leaves_it(tmp_path, configs, prefect_api):
    """`--output-root` moves the default cache after validation: the flow's start refuses the folder there
    (exit 2, one line), and the folder and its files are untouched."""
    root = tmp_path / "elsewhere"
    folder = root / "request-cache.sqlite"
    (folder / "part").mkdir(parents=True)
    (folder / "part" / "keep.txt").write_text("the user's own\n")
    before = _snapshot(folder)
    path = _experiment(configs, tmp_path / "out")
    done = subprocess.run([sys.executable, "-m", "perseval_flows.cli", "run", str(path), "--output-root", str(root), "--quiet"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO), "PREFECT_API_URL": prefect_api})
    errors = [line for line in done.stdout.splitlines() if line.startswith("error: ")]
    assert done.returncode == 2 and len(errors) == 1, done.stdout + done.stderr
    assert "request cache" in errors[0] and "is a directory" in errors[0] and "nothing was moved" in errors[0]
    assert _snapshot(folder) == before and _beside(folder) == ["request-cache.sqlite"]


# --- 23: what only a start can reveal ----------------------------------------------------------------------

STRICT_SERVER = '''import argparse
ap = argparse.ArgumentParser()
for flag in ("--model", "--host", "--port", "--served-model-name", "--tensor-parallel-size", "--max-model-len",
             "--gpu-memory-utilization", "--dtype"):
    ap.add_argument(flag)
ap.parse_args()  # an unknown flag: usage on stderr, "error: unrecognized arguments", exit 2
'''


def test_a_server_that_rejects_its_flags_says_so_in_the_first_line(tmp_path):
    pkg = tmp_path / "strict" / "vllm" / "entrypoints" / "openai"
    pkg.mkdir(parents=True)
    for folder in (pkg, pkg.parent, pkg.parent.parent):
        (folder / "__init__.py").write_text("")
    (pkg / "api_server.py").write_text(STRICT_SERVER)
    model = ModelConfig(name="m", format="hf", source="org/m", deployment="strict")
    dep = DeploymentConfig(name="strict", kind="vllm", startup_timeout_s=60,
                           vllm={"python": sys.executable, "extra_args": ["--no-such-flag", "1"],
                                 "env": {"PYTHONPATH": str(tmp_path / "strict")}})
    with pytest.raises(DeploymentError) as err:
        Deployment(model, dep, tmp_path / "logs").start()
    line = what_failed(err.value)
    assert line.startswith("model m (vllm deployment strict): server exited with code 2 during start-up: "), line
    assert "error: unrecognized arguments: --no-such-flag 1" in line and err.value.log_path in line


@pytest.mark.parametrize("server,cause", [
    ("llama-server", "llama_model_load: error loading model: llama_model_loader: failed to load model from "),
    ("llama-cpp-python", "ValueError: Failed to load model from file: ")])
def test_weights_only_llama_cpp_finds_broken_are_named_from_its_log(server, cause, tmp_path):
    """A file that starts like GGUF passes validate; the embedded server's own reason reaches the line."""
    weights = tmp_path / "truncated.gguf"
    weights.write_bytes(b"GGUF\x03\x00\x00\x00cut short")
    spec = yaml.safe_load((CONFIGS / "models" / "smollm2-135m.yaml").read_text())
    model = ModelConfig(**{**spec, "source": str(weights)})
    dep = load_config(DeploymentConfig, CONFIGS / "deployments" / f"{model.deployment}.yaml")
    with pytest.raises(DeploymentError) as err:
        Deployment(model, dep.model_copy(update={"server": server}), tmp_path / "logs").start()
    line = what_failed(err.value)
    assert f"during start-up: {cause}" in line and str(weights) in line, line


def test_an_installed_plugin_that_calls_sys_exit_is_named(tmp_path, monkeypatch):
    """An entry-point plugin's sys.exit() at import: named like any plugin error (it ended the process)."""
    from perseval.core.errors import ConfigError
    from perseval.kernel import registry

    dist = tmp_path / "exitplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: exitplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[perseval.plugins]\nexits = exitplug_mod\n")
    (tmp_path / "exitplug_mod.py").write_text("import sys\nsys.exit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"plugin entry point 'exits' \(exitplug_mod\) failed to load: it called "
                                          r"sys.exit\(3\) on import; a plugin must not end the process"):
        registry.load_entry_points()


# --- issue 53: a name that is a file here and an experiment's; compare and samples where there are no runs ------

@pytest.mark.parametrize("command", ["validate", "compare"])
def test_a_name_that_is_a_file_here_and_an_experiment_says_which_it_took(command, tmp_path, monkeypatch):
    """`validate quickstart` read a stray ./quickstart file ("expected a mapping", no hint) and `compare
    quickstart` the shipped experiment, neither saying so: both take the file now, and say how to get the other."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "quickstart").write_text("notes about the quickstart\n")
    result = runner.invoke(app, [command, "quickstart"])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 2 and "Traceback" not in result.output, result.output
    assert lines[0].startswith(f"note: 'quickstart' is the file {tmp_path / 'quickstart'}, read as the experiment; "
                               "the experiment named quickstart is ") and lines[0].endswith(
        f"{Path('experiments') / 'quickstart.yaml'}: give that path for it"), lines[0]
    assert lines[1] == "error: quickstart: expected a mapping (key: value lines) at the top level, got a string"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quickstart"]


@pytest.mark.parametrize("command", [["compare", "perseval-quickstart"], ["samples", "0123abcd", "iba-rag"]])
def test_compare_and_samples_where_there_are_no_runs_write_nothing_there(command, tmp_path, monkeypatch):
    """They read the runs' MLflow store: where there is none, one line and exit 2, and the folder is left empty
    (an empty ./mlruns/mlflow.db and ./mlruns/artifacts were made in it)."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, command)
    assert result.exit_code == 2 and result.output.strip() == (
        f"error: --tracking-uri sqlite:///mlruns/mlflow.db: no MLflow database at {tmp_path / 'mlruns' / 'mlflow.db'}"
        "; run this in the folder the runs were made in, or give their database's path (sqlite:////<absolute "
        "path>)"), result.output
    assert list(tmp_path.iterdir()) == []


# --- 24, 25: an existing endpoint's probe at start -----------------------------------------------------------

class Endpoints:
    """What the scripted endpoint answers: `status` to every request, or (llama.cpp-like) 500 to a
    `json_schema` response_format and 200 to anything else."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.bodies: list[dict] = []


@pytest.fixture()
def endpoint() -> Iterator[tuple[Endpoints, str]]:
    script = Endpoints()

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = self.request_json()
            script.bodies.append(body)
            if script.status is not None:
                self.reply(script.status, {"error": {"message": f"no: {self.headers.get('Authorization')}"}})
            elif (body.get("response_format") or {}).get("type") == "json_schema":
                self.reply(500, {"error": {"message": "Unrecognized response_format type json_schema"}})
            else:
                self.reply(200, completion('{"verdict": true}'))

    with serve(Handler) as url:
        yield script, f"{url}/v1"


def _ask(ep: Endpoint, cache: RequestCache, schema: dict | None = None, role: str = "judge"):
    """One chat request through the client, as an agent or judge sends it."""
    client = LLMClient(ep, Sampling(), cache, role=role, run_id="r", seed=1)

    async def go():
        try:
            return await client.chat([{"role": "user", "content": "is it?"}], json_schema=schema)
        finally:
            await client.aclose()
    return asyncio.run(go())


API = ModelConfig(name="api-model", format="api", source="served-name", deployment="probe-me")
KEY = "sk-test-abcdefghijklmnop"


def _api(url: str, **values: object) -> Deployment:
    dep = DeploymentConfig(name="probe-me", kind="openai", base_url=url, api_key_env="PERSEVAL_PROBE_KEY", retries=0,
                           **values)
    return Deployment(API, dep, "logs", "configs/deployments/probe-me.yaml")


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_stops_the_start_naming_the_variable_and_the_yaml(endpoint, status, monkeypatch, tmp_path):
    script, url = endpoint
    script.status = status
    monkeypatch.setenv("PERSEVAL_PROBE_KEY", KEY)
    with pytest.raises(EndpointRefused) as err:
        _api(url).start()
    line = what_failed(err.value)
    assert f"refused the key (HTTP {status}" in line and "$PERSEVAL_PROBE_KEY" in line, line
    assert "api_key_env of configs/deployments/probe-me.yaml" in line and KEY not in line, line
    report = failure_report(err.value, tmp_path, ["run", "x.yaml"])
    assert "once that is fixed, resume: perseval run x.yaml" in report and \
        not any("run the same command again" in r for r in report), report


def test_an_unset_key_variable_is_named_before_any_request(endpoint, monkeypatch):
    script, url = endpoint
    monkeypatch.delenv("PERSEVAL_PROBE_KEY", raising=False)
    with pytest.raises(EndpointRefused, match=r"probe-me.yaml: key 'api_key_env': \$PERSEVAL_PROBE_KEY is not set"):
        _api(url).start()
    assert script.bodies == []


def test_an_endpoint_that_refuses_json_schema_is_named_with_the_dialect_it_takes(endpoint, monkeypatch):
    script, url = endpoint
    monkeypatch.setenv("PERSEVAL_PROBE_KEY", KEY)
    with pytest.raises(EndpointRefused) as err:
        _api(url).start()
    line = what_failed(err.value)
    assert "configs/deployments/probe-me.yaml: key 'structured_output'" in line and "as json_schema (HTTP 500" in line
    assert "accepts json_object_schema" in line and "one of json_schema, json_object_schema, gbnf, none" in line, line
    assert script.bodies[0]["response_format"]["type"] == "json_schema"


@pytest.mark.parametrize("dialect,sent", [("json_object_schema", {"type": "json_object", "schema": SCHEMA}),
                                          ("none", None)])
def test_the_dialect_set_is_what_the_client_sends_and_no_key_changes(endpoint, dialect, sent, monkeypatch, tmp_path):
    """The probe passes, the request carries the dialect set (none: no response_format), and the cache key
    is the one of the kind's default: the answer is reused by a deployment sending another dialect."""
    script, url = endpoint
    monkeypatch.setenv("PERSEVAL_PROBE_KEY", KEY)
    cache = RequestCache(tmp_path / "cache.sqlite")
    ep = _api(url, structured_output=dialect).start()
    probes = len(script.bodies)
    first = _ask(ep, cache, SCHEMA)
    assert first.status == "ok" and not first.cached and script.bodies[probes].get("response_format") == sent
    other = "none" if dialect != "none" else "json_object_schema"
    again = _ask(_api(url, structured_output=other).start(), cache, SCHEMA)
    assert again.cached and again.text == first.text
    assert len(cache) == 1 and cache.request_counts("r") == {"judge": {"ok": 1}}  # the probes are no requests


def test_the_gbnf_dialect_sends_llama_cpp_pythons_grammar_and_shares_the_key(endpoint, monkeypatch, tmp_path):
    """llama-server's default: the schema goes as the grammar llama-cpp-python's server made of it (properties
    in the schema's order, its whitespace), no response_format; the answer is the json_object one's."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    script, url = endpoint
    monkeypatch.setenv("PERSEVAL_PROBE_KEY", KEY)
    cache = RequestCache(tmp_path / "cache.sqlite")
    ordered = {"type": "object", "properties": {"verdict": {"type": "boolean"}, "reason": {"type": "string"}},
               "required": ["verdict", "reason"]}
    ep = _api(url, structured_output="gbnf").start()
    probes = len(script.bodies)
    first = _ask(ep, cache, ordered)
    body = script.bodies[probes]
    assert "response_format" not in body and body["grammar"] == json_schema_to_gbnf(json.dumps(ordered))
    root = next(line for line in body["grammar"].splitlines() if line.startswith("root ::="))
    assert root.index("verdict-kv") < root.index("reason-kv")  # the schema's order, not sorted
    again = _ask(_api(url, structured_output="json_object_schema").start(), cache, ordered)
    assert first.status == "ok" and again.cached and again.text == first.text and len(cache) == 1


# --- 40: an endpoint nothing answers at ------------------------------------------------------------------------

DEAD_URL = "http://127.0.0.1:9/v1"  # the discard port: nothing listens there


def test_an_endpoint_nothing_answers_at_stops_the_start_naming_the_yaml_and_the_url(monkeypatch):
    monkeypatch.setenv("PERSEVAL_PROBE_KEY", KEY)
    with pytest.raises(DeploymentError) as err:
        _api(DEAD_URL).start()
    line = what_failed(err.value)
    assert "\n" not in line and line.startswith("model api-model (openai deployment probe-me): "), line
    assert f"configs/deployments/probe-me.yaml: key 'base_url': nothing answers at {DEAD_URL}" in line
    assert "Connection refused" in line and "check the URL" in line, line


def run_on_endpoint(url: str, tmp_path: Path, configs: Path, prefect_api: str
                    ) -> tuple[subprocess.CompletedProcess, list[str]]:
    """`perseval run` of an experiment whose IBA data an openai deployment at `url` writes (so it is the first
    deployment the run starts): the finished process and its `error: ` lines."""
    path = remote(base_url=url)(configs, _experiment(configs, tmp_path / "out"), tmp_path)
    writers = {f"{role}_model": "remote-openai" for role in ("user", "assistant", "task")}
    _edit(path, lambda e: e["benchmarks"][0].update(params={"construction": {"mode": "llm", **writers}}))
    done = subprocess.run([sys.executable, "-m", "perseval_flows.cli", "run", str(path), "--quiet"], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO), "PREFECT_API_URL": prefect_api,
                               "OPENAI_API_KEY": KEY})
    return done, [line for line in done.stdout.splitlines() if line.startswith("error: ")]


@pytest.mark.integration
def test_a_run_on_an_endpoint_nothing_answers_at_stops_at_start_with_exit_4(tmp_path, configs, prefect_api):
    """Before, every row failed and the run ended exit 3; now the start's probe stops it: exit 4, its one
    line naming the deployment YAML and the URL, and nothing was built or run. (The endpoint writes the IBA
    data here, so it is the first deployment the run starts: no Dask cluster is started before it.)"""
    done, errors = run_on_endpoint(DEAD_URL, tmp_path, configs, prefect_api)
    assert done.returncode == 4 and len(errors) == 1, done.stdout + done.stderr
    assert errors[0].startswith("error: run stopped: model remote-openai (openai deployment openai-api): "), errors
    assert f"{configs / 'deployments' / 'openai-api.yaml'}: key 'base_url': nothing answers at {DEAD_URL}" in errors[0]
    assert not (tmp_path / "out" / "data").exists() and not (tmp_path / "out" / "run").exists()


# --- a key refused mid-run, an address that does not answer ----------------------------------------------------

def test_a_key_refused_mid_run_is_logged_apart_and_the_run_says_what_to_fix(endpoint, monkeypatch, tmp_path, configs):
    script, url = endpoint
    script.status = 401
    monkeypatch.setenv("PERSEVAL_PROBE_KEY", KEY)
    ep = Endpoint("api-model", "openai", url, "served-name", "api:x", "PERSEVAL_PROBE_KEY", 2, 10.0, 0,
                  deployment_file="configs/deployments/probe-me.yaml")
    failed = _ask(ep, RequestCache(tmp_path / "c.sqlite"), role="agent")
    assert failed.status == "failed" and failed.error.startswith("authentication failed (HTTP 401): check the key "
                                                                 "in $PERSEVAL_PROBE_KEY"), failed.error
    counts = RequestCache(tmp_path / "c.sqlite").request_counts("r")
    assert counts == {"agent": {"unauthorized": 1}}
    path = _experiment(configs, tmp_path / "out")
    _edit(path, lambda e: e["backbones"].append("remote-openai"))
    exp = load_experiment(path)
    hint = _redo_hint(exp, {"requests": counts})
    assert "refused for authentication (HTTP 401/403)" in hint and "running again cannot fix" in hint
    assert f"$OPENAI_API_KEY (api_key_env of {configs / 'deployments' / 'openai-api.yaml'})" in hint, hint
    assert _redo_hint(exp, {"requests": {"agent": {"failed": 2}}}) == "run the same command again to redo only those"


def test_a_connection_error_names_the_address(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    ep = Endpoint("m", "vllm", url, "m", "hf:x", None, 1, 5.0, 0)
    failed = _ask(ep, RequestCache(tmp_path / "c.sqlite"))
    assert failed.status == "failed" and failed.error.endswith(f"(no answer from {url})"), failed.error


def test_the_shipped_experiments_still_validate(tmp_path, monkeypatch):
    """None of the new checks refuses a shipped experiment (the one naming a release folder not shipped
    is left out), given the keys its endpoints name (an unset one is refused: api_key_env_unset)."""
    monkeypatch.chdir(REPO)
    for deployment in shipped_yaml("deployments"):
        if key := yaml.safe_load(deployment.read_text()).get("api_key_env"):
            monkeypatch.setenv(key, KEY)
    for path in sorted(shipped_yaml("experiments")):
        if yaml.safe_load(path.read_text())["benchmarks"][0].get("source", "").startswith("data/"):
            continue
        result = runner.invoke(app, ["validate", str(path)])
        assert result.exit_code == 0, (path.name, result.output)


# --- 41-44 (issue 45): an endpoint that speaks no HTTP, a Prefect idle time that is no finite number >= 0 -----

BANNER = b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13\r\n"


@contextmanager
def not_http() -> Iterator[str]:
    """A loopback TCP server that answers every connection as an SSH server does (its banner, then a close once
    it has read what the client sent); yields an http:// base URL to it."""
    srv = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                conn.sendall(BANNER)
                conn.settimeout(2)
                try:
                    conn.recv(65536)
                    conn.sendall(b"Invalid SSH identification string.\r\n")
                    # close with FIN after reading all the client sent: closing with its bytes unread sends a
                    # reset, which the client reads as "connection reset" before it sees the banner (a CI run
                    # under load met that race)
                    conn.shutdown(socket.SHUT_WR)
                    while conn.recv(65536):
                        pass
                except OSError:
                    pass

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}/v1"
    finally:
        stop.set()
        srv.close()


@contextmanager
def silent() -> Iterator[str]:
    """A loopback TCP server that takes every connection and reads what it is sent, and never answers (a port
    that swallows requests, a server that hangs); yields an http:// base URL to it."""
    srv = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            held.append(conn)  # open, unanswered, until the server stops

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}/v1"
    finally:
        srv.close()
        for conn in held:
            conn.close()


def test_an_endpoint_that_never_answers_stops_the_start_in_its_timeout(monkeypatch, tmp_path):
    """Before: a warning, then every request of the run failed after its timeout and retries, exit 3 and "run
    the same command again"; now the start stops once the probe has waited the time a request has."""
    monkeypatch.setenv("PERSEVAL_PROBE_KEY", KEY)
    with silent() as url, pytest.raises(DeploymentError) as err:
        _api(url, timeout_s=1.5).start()
    line = what_failed(err.value)
    assert "\n" not in line and line.startswith("model api-model (openai deployment probe-me): "), line
    assert f"configs/deployments/probe-me.yaml: key 'base_url': {url} took the connection and the request but sent " \
           "no answer in 1.5 s (ReadTimeout; timeout_s" in line and "raise timeout_s for a slow one" in line, line
    report = failure_report(err.value, tmp_path, ["run", "x.yaml"])
    assert not any("run the same command again" in r for r in report), report


def test_an_endpoint_that_speaks_no_http_stops_the_start_like_a_refused_one(monkeypatch):
    monkeypatch.setenv("PERSEVAL_PROBE_KEY", KEY)
    with not_http() as url, pytest.raises(DeploymentError) as err:
        _api(url).start()
    line = what_failed(err.value)
    assert "\n" not in line and line.startswith("model api-model (openai deployment probe-me): "), line
    assert f"configs/deployments/probe-me.yaml: key 'base_url': what answers at {url} is not an HTTP server" in line
    assert "RemoteProtocolError" in line and "running again cannot fix" in line, line


@pytest.mark.integration
@pytest.mark.parametrize("server,says", [(not_http, "what answers at {url} is not an HTTP server"),
                                         (silent, "{url} took the connection and the request but sent no answer")],
                         ids=["not-http", "never-answers"])
def test_a_run_on_an_endpoint_that_speaks_no_http_ends_exit_4_not_3(server, says, tmp_path, configs, prefect_api):
    """Before: every row failed and the run ended exit 3, "run the same command again". Now exit 4 at start
    (an endpoint that never answers: once the probe waited the deployment's timeout_s)."""
    with server() as url:
        _edit(configs / "deployments" / "openai-api.yaml", lambda d: d.update(timeout_s=2))
        done, errors = run_on_endpoint(url, tmp_path, configs, prefect_api)
    assert done.returncode == 4 and len(errors) == 1, done.stdout + done.stderr
    assert f"key 'base_url': {says.format(url=url)}" in errors[0], errors
    assert "run the same command again" not in done.stdout
    assert not (tmp_path / "out" / "run").exists()


@pytest.mark.parametrize("value", ["-1", "inf", "abc", "nan", "-0.5"])
@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_bad_prefect_idle_setting_is_exit_2_before_anything_starts(value, command, monkeypatch, tmp_path):
    monkeypatch.setenv(IDLE_ENV, value)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    out = tmp_path / "out"
    result = runner.invoke(app, [command, str(REPO / "configs" / "experiments" / "quickstart.yaml"),
                                 *(["--output-root", str(out)] if command == "run" else [])])
    assert result.exit_code == 2, result.output
    line = " ".join(result.output.split())
    assert f"${IDLE_ENV}={value!r}: allowed is a finite number of seconds >= 0" in line, line
    assert not out.exists()  # no Prefect server, no log folder: nothing started


@pytest.mark.parametrize("value, seconds", [("0", 0.0), ("2.5", 2.5), ("", 600.0)])
def test_a_good_prefect_idle_setting_is_taken(value, seconds, monkeypatch):
    from perseval_flows.prefect_server import idle_seconds

    monkeypatch.setenv(IDLE_ENV, value)
    assert idle_seconds() == seconds
