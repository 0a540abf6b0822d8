"""Every server perseval starts listens on 127.0.0.1 only: the launch command of each deployment kind, of
the local Prefect server and of the MLflow UI, and the Dask LocalCluster's addresses. An `openai`
deployment starts nothing."""
from __future__ import annotations

import pytest

from perseval_flows.ui import ui_command
from perseval_flows.prefect_server import prefect_server_command
from perseval_flows.runtime import task_runner
from perseval.llm.settings import DeploymentConfig, ModelConfig
from perseval.experiment.config import DaskSettings, load_config
from perseval.llm import deployments
from perseval.llm.deployments import Deployment, vllm_command
from perseval.llm.embedded import embedded_command
from perseval.llm.identity import resolve_gguf

from .conftest import CONFIGS

LOOPBACK = "127.0.0.1"


def _host(cmd: list[str]) -> str:
    assert cmd.count("--host") == 1, cmd  # one host flag: a later one in extra args would win
    return cmd[cmd.index("--host") + 1]


def _pairs() -> list[tuple[ModelConfig, DeploymentConfig]]:
    """Every shipped deployment, with a shipped model it serves (or one of a format it can serve)."""
    models = [load_config(ModelConfig, p) for p in sorted((CONFIGS / "models").glob("*.yaml"))]
    out = []
    for path in sorted((CONFIGS / "deployments").glob("*.yaml")):
        dep = load_config(DeploymentConfig, path)
        fmt = {"embedded": "gguf", "vllm": "hf"}.get(dep.kind)
        out.append((next((m for m in models if m.deployment == dep.name), None)
                    or next(m for m in models if fmt is None or m.format == fmt), dep))
    return out


@pytest.mark.parametrize("model,dep", _pairs(), ids=lambda x: x.name)
def test_every_shipped_deployment_launches_on_loopback_or_starts_nothing(model, dep, tmp_path, monkeypatch):
    if dep.kind == "openai":  # no process; its start only probes the endpoint (tests/test_bad_input_more.py)
        monkeypatch.setattr(deployments, "probe", lambda endpoint, name: None)
        started = Deployment(model, dep, tmp_path)
        assert started.start().base_url == (dep.base_url or "").rstrip("/") and started.proc is None
        return
    cmd = Deployment(model, dep, tmp_path).command(8123)
    assert _host(cmd) == LOOPBACK and "0.0.0.0" not in cmd


def test_both_vllm_launch_forms_and_both_embedded_servers_bind_loopback():
    model = ModelConfig(name="m", format="hf", source="org/m", deployment="d")
    cli = DeploymentConfig(name="d", kind="vllm")
    module = DeploymentConfig(name="d", kind="vllm", vllm={"python": "python3"})
    assert vllm_command(model, cli, 1)[:2] == ["vllm", "serve"] and _host(vllm_command(model, cli, 1)) == LOOPBACK
    assert "-m" in vllm_command(model, module, 1) and _host(vllm_command(model, module, 1)) == LOOPBACK
    gguf = load_config(ModelConfig, CONFIGS / "models" / "smollm2-135m.yaml")
    emb = load_config(DeploymentConfig, CONFIGS / "deployments" / "smollm2-135m-cpu.yaml")
    for server in ("llama-server", "llama-cpp-python"):
        cmd = embedded_command(gguf, emb.model_copy(update={"server": server}), resolve_gguf(gguf.source), 1)
        assert _host(cmd) == LOOPBACK


def test_prefect_server_and_mlflow_ui_bind_loopback():
    assert prefect_server_command(4200)[1:5] == ["-m", "prefect", "server", "start"]
    assert _host(prefect_server_command(4200)) == LOOPBACK
    ui = ui_command("sqlite:///mlruns/mlflow.db", "mlruns/artifacts", 5000)
    assert ui[1:3] == ["-m", "perseval_flows.ui"] and _host(ui) == LOOPBACK


def test_the_dask_local_cluster_binds_loopback():
    kwargs = task_runner(DaskSettings(n_workers=1, threads_per_worker=1, in_process=False)).cluster_kwargs
    assert kwargs["host"] == LOOPBACK and kwargs["dashboard_address"].startswith(f"{LOOPBACK}:")
