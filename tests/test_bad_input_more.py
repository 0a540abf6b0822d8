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
| 20 | IBA release: `histories.jsonl` is a folder         | validate      | the path, "is a directory, expected a file"     |
| 21 | custom data: `histories.jsonl` is a folder         | validate      | the path, "is a directory, expected a file"     |
| 22 | Bespoke release: `chat_history.parquet` a folder   | validate      | the path, "is a directory, expected a file"     |
| 23 | a server that rejects its flags (vLLM extra_args)  | start         | the model, the deployment, the refusal, the log |
| 24 | an endpoint answering 401 (or 403) to the key      | start (probe) | authentication, `$api_key_env`, deployment YAML |
| 25 | an openai endpoint that refuses `json_schema`      | start (probe) | deployment YAML, `structured_output`, the three |

Further cases beside the table: APeB's `events.csv` as a folder, a 403, an unset `api_key_env`, a key
refused in the middle of a run (the run's last line names the key to fix, not "run again"), a GGUF that
only llama.cpp can find broken (its log's cause lifted into the error line), a connection error that names
the address. (An int where a layout says text, `preferences[0].value: 5`, is the IBA loader's case.)
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pytest
import yaml
from typer.testing import CliRunner

import flows.cli
from flows.cli import _redo_hint, app
from flows.failure import failure_report, what_failed
from perseval.setup.config import DeploymentConfig, ModelConfig, Sampling, load_config
from perseval.setup.experiment import load_experiment
from perseval.core.errors import DeploymentError, EndpointRefused
from perseval.llm import deployments
from perseval.llm.cache import RequestCache
from perseval.llm.client import LLMClient
from perseval.llm.deployments import Deployment, free_port
from perseval.llm.endpoint import Endpoint

from .conftest import CONFIGS, REPO
from .http_stub import JsonHandler, completion, serve
from .test_bad_input import _experiment, _valid_source

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


def _twice(other_sample: bool) -> Callable[[dict], None]:
    def go(e: dict) -> None:
        again = dict(e["benchmarks"][0], **({"sample": 3} if other_sample else {}))
        e["benchmarks"].append(again)
    return go


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
         ("openai-api.yaml", "key 'base_url'", "not an http:// or https:// URL")),
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
         ("histories.jsonl: is a directory, expected a file",), ("missing file",)),
    Case("custom_histories_folder", table_is_folder("custom", "histories.jsonl"),
         ("histories.jsonl: is a directory, expected a file",), ("missing file",)),
    Case("bespoke_table_folder", table_is_folder("bespoke", "chat_history/chat_history.parquet"),
         ("chat_history.parquet: is a directory, expected a file",), ("file missing",)),
    Case("apeb_events_folder", table_is_folder("apeb", "events.csv"),
         ("events.csv: is a directory, expected a file",), ("missing file",)),
]


def _case(case: Case, configs: Path, tmp_path: Path) -> Path:
    return case.breaks(configs, _experiment(configs, tmp_path / "out"), tmp_path)


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_refused_before_anything_starts(case, command, tmp_path, configs, monkeypatch):
    """Exit 2 and one line; `run` never reaches its flow (no Prefect, no Dask, no model server)."""
    monkeypatch.chdir(tmp_path)
    started: list = []
    monkeypatch.setattr(flows.cli, "_run_flow", lambda *a, **k: started.append(a))
    monkeypatch.setattr(deployments, "start_server", lambda *a, **k: started.append(a))
    result = runner.invoke(app, [command, str(_case(case, configs, tmp_path))])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert all(part in lines[0] for part in case.expect), lines[0]
    assert not any(part in lines[0] for part in case.forbid), lines[0]
    assert not started and not (tmp_path / "out").exists()


def test_the_table_has_25_rows_and_every_validate_row_is_a_case():
    rows = [line for line in (__doc__ or "").splitlines() if line.startswith("| ") and line[2:4].strip().isdigit()]
    assert len(rows) == 25 and sum("| validate " in r for r in rows) == 22
    assert len(CASES) == 23  # the 22 rows, and APeB's folder beside them


def test_the_real_cli_in_a_fresh_process(tmp_path, configs):
    """`python -m flows.cli validate` as a user runs it: one line on stdout, exit 2, nothing written."""
    path = CASES[0].breaks(configs, _experiment(configs, tmp_path / "out"), tmp_path)
    done = subprocess.run([sys.executable, "-m", "flows.cli", "validate", str(path)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done
    assert done.stdout.strip().splitlines() == [f"error: {path}: key 'dask.n_workers': Input should be {GE1}"]
    assert not (tmp_path / "out").exists()


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
    is left out)."""
    monkeypatch.chdir(REPO)
    for path in sorted((CONFIGS / "experiments").glob("*.yaml")):
        if yaml.safe_load(path.read_text())["benchmarks"][0].get("source", "").startswith("data/"):
            continue
        result = runner.invoke(app, ["validate", str(path)])
        assert result.exit_code == 0, (path.name, result.output)
