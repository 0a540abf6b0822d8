"""The vLLM deployment code against a stand-in server (no GPU on this machine): the launch command a
deployment YAML gives, the health wait, the requests perseval sends (as the server records them), the
stop, and a request cache that keys on the model, not on the deployment serving it."""
import asyncio
import json
import sys
from pathlib import Path

import pytest

from perseval.llm.settings import DeploymentConfig, ModelConfig, Sampling
from perseval.experiment.config import load_config
from perseval.core.errors import DeploymentError
from perseval.llm.cache import RequestCache
from perseval.llm.client import LLMClient
from perseval.llm.deployments import Deployment, free_port, vllm_command, wait_healthy

from .conftest import CONFIGS

STANDIN = str(Path(__file__).parent / "standin")
MODEL = ModelConfig(name="standin", format="hf", source="org/standin", revision="abc123", dtype="bfloat16",
                    quantization="fp8", deployment="x")
SCHEMA = {"type": "object", "properties": {"verdict": {"type": "boolean"}}, "required": ["verdict"]}


def _flag(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def test_vllm_command_from_the_shipped_yaml():
    model = load_config(ModelConfig, CONFIGS / "models" / "qwen3-30b-a3b-instruct.yaml")
    dep = load_config(DeploymentConfig, CONFIGS / "deployments" / f"{model.deployment}.yaml")
    cmd = vllm_command(model, dep, 8123)
    assert cmd[:3] == ["vllm", "serve", "Qwen/Qwen3-30B-A3B-Instruct-2507"]
    assert _flag(cmd, "--tensor-parallel-size") == "2" and _flag(cmd, "--max-model-len") == "32768"
    assert _flag(cmd, "--gpu-memory-utilization") == "0.9" and _flag(cmd, "--dtype") == "bfloat16"
    assert _flag(cmd, "--host") == "127.0.0.1" and _flag(cmd, "--port") == "8123"
    assert _flag(cmd, "--served-model-name") == "qwen3-30b-a3b-instruct"
    assert "--enable-expert-parallel" in cmd and "--quantization" not in cmd and "--revision" not in cmd


def _deployment(tmp_path: Path, **env: str) -> DeploymentConfig:
    return DeploymentConfig(name="standin-vllm", kind="vllm", context_length=2048, startup_timeout_s=30,
                            vllm={"python": sys.executable, "tensor_parallel_size": 4,
                                  "env": {"PYTHONPATH": STANDIN, "STANDIN_RECORD": str(tmp_path), **env}})


def _ask(client: LLMClient, text: str = "x"):
    async def go():
        try:
            return await client.chat([{"role": "user", "content": text}], json_schema=SCHEMA, max_tokens=17, repeat=2)
        finally:
            await client.aclose()

    return asyncio.run(go())


def test_deployment_launches_waits_sends_and_stops(tmp_path):
    dep = Deployment(MODEL, _deployment(tmp_path), tmp_path)
    cache = RequestCache(tmp_path / "c.sqlite")
    with dep as endpoint:
        argv = json.loads((tmp_path / "argv.json").read_text())
        assert argv[:2] == ["--model", "org/standin"]  # module launch with the model's source
        for flag, value in (("--tensor-parallel-size", "4"), ("--max-model-len", "2048"), ("--dtype", "bfloat16"),
                            ("--quantization", "fp8"), ("--revision", "abc123"), ("--host", "127.0.0.1"),
                            ("--served-model-name", "standin")):
            assert _flag(argv, flag) == value, flag
        assert endpoint.kind == "vllm" and endpoint.base_url == f"http://127.0.0.1:{_flag(argv, '--port')}/v1"
        result = _ask(LLMClient(endpoint, Sampling(temperature=0.3), cache, role="judge", run_id="r", seed=5))
        assert result.status == "ok"
        sent = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
        assert len(sent) == 1
        req = sent[0]
        # vLLM ignores a schema inside json_object: the client must send the json_schema dialect
        assert req["response_format"]["type"] == "json_schema"
        assert req["response_format"]["json_schema"]["schema"] == SCHEMA
        assert (req["model"], req["max_tokens"], req["temperature"], req["seed"]) == ("standin", 17, 0.3, 7)
        proc = dep.proc
    assert proc.poll() is not None, "the server process is stopped when the deployment ends"

    # the same model served by another deployment (another port, other settings) hits the cache
    other = _deployment(tmp_path).model_copy(update={"name": "other", "context_length": 4096})
    with Deployment(MODEL, other, tmp_path) as endpoint2:
        again = _ask(LLMClient(endpoint2, Sampling(temperature=0.3), cache, role="judge", run_id="r2", seed=5))
    assert again.cached and again.text == result.text
    # a cache hit reports the usage of the request that first produced it (cost reports count it so)
    assert (again.prompt_tokens, again.completion_tokens) == (result.prompt_tokens, result.completion_tokens) != (0, 0)
    assert len((tmp_path / "requests.jsonl").read_text().splitlines()) == 1


def test_failed_start_reports_log_tail(tmp_path):
    with pytest.raises(DeploymentError) as err:
        Deployment(MODEL, _deployment(tmp_path, STANDIN_FAIL="1"), tmp_path).start()
    assert "CUDA out of memory" in str(err.value) and "exited with code 3" in str(err.value)


def test_health_wait_times_out(tmp_path):
    with pytest.raises(DeploymentError, match="not healthy"):
        wait_healthy(f"http://127.0.0.1:{free_port()}", None, 1.5, None, health_path="/health")
