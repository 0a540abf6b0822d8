"""The vLLM deployment code, tested against a stand-in server (no GPU on this machine)."""
import asyncio
import json
import sys
from pathlib import Path

import pytest

from perseval.config import ModelConfig, Sampling, load_config
from perseval.errors import DeploymentError
from perseval.llm.cache import RequestCache
from perseval.llm.client import LLMClient
from perseval.llm.deployments import Deployment, free_port, vllm_command, wait_healthy

from .conftest import CONFIGS

STANDIN = str(Path(__file__).parent / "standin")


def _flag(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def test_vllm_command_from_yaml():
    cfg = load_config(ModelConfig, CONFIGS / "models" / "qwen3-30b-a3b-instruct.yaml")
    cmd = vllm_command(cfg, 8123)
    assert cmd[:3] == ["vllm", "serve", "Qwen/Qwen3-30B-A3B-Instruct-2507"]
    assert _flag(cmd, "--tensor-parallel-size") == "2"
    assert _flag(cmd, "--max-model-len") == "32768"
    assert _flag(cmd, "--gpu-memory-utilization") == "0.9"
    assert _flag(cmd, "--dtype") == "bfloat16"
    assert _flag(cmd, "--host") == "127.0.0.1" and _flag(cmd, "--port") == "8123"
    assert _flag(cmd, "--served-model-name") == "qwen3-30b-a3b-instruct"
    assert "--enable-expert-parallel" in cmd


def test_vllm_command_python_module_and_revision():
    cfg = ModelConfig(name="m", kind="vllm", model="org/m", revision="abc123",
                      vllm={"python": "/opt/py", "tensor_parallel_size": 4})
    cmd = vllm_command(cfg, 9000)
    assert cmd[:5] == ["/opt/py", "-m", "vllm.entrypoints.openai.api_server", "--model", "org/m"]
    assert _flag(cmd, "--revision") == "abc123" and _flag(cmd, "--tensor-parallel-size") == "4"


def _standin_cfg(**env) -> ModelConfig:
    return ModelConfig(name="standin", kind="vllm", model="org/standin", startup_timeout_s=30,
                       vllm={"python": sys.executable, "env": {"PYTHONPATH": STANDIN, **env}})


def test_deployment_starts_waits_for_health_and_stops(tmp_path):
    dep = Deployment(_standin_cfg(), tmp_path)
    with dep as endpoint:
        assert endpoint.kind == "vllm" and endpoint.served_model == "standin"
        assert endpoint.base_url.startswith("http://127.0.0.1:")
        proc = dep.proc
        client = LLMClient(endpoint, Sampling(), RequestCache(tmp_path / "c.sqlite"), role="agent", run_id="r",
                           seed=1)

        async def ask():
            try:
                return await client.chat([{"role": "user", "content": "x"}], json_schema={"type": "object"})
            finally:
                await client.aclose()

        result = asyncio.run(ask())
        # vLLM ignores a schema inside json_object: the client must send the json_schema dialect
        assert json.loads(result.text) == {"format": "json_schema"}
        assert result.prompt_tokens == 7 and result.completion_tokens == 3
    assert proc.poll() is not None, "the server process is stopped when the deployment ends"


def test_failed_start_reports_log_tail(tmp_path):
    with pytest.raises(DeploymentError) as err:
        Deployment(_standin_cfg(STANDIN_FAIL="1"), tmp_path).start()
    assert "CUDA out of memory" in str(err.value) and "exited with code 3" in str(err.value)


def test_health_wait_times_out(tmp_path):
    with pytest.raises(DeploymentError, match="not healthy"):
        wait_healthy(f"http://127.0.0.1:{free_port()}", None, 1.5, None, health_path="/health")
