"""The GPU install: which Python starts vLLM (its own venv, found without configuration), the locks agree with
the project venv's versions, and (integration: it asks the package index) both locks still resolve with pip's
dry run, which downloads no wheel."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perseval.llm.settings import DeploymentConfig, ModelConfig
from perseval.llm import deployments
from perseval.llm.deployments import VLLM_PYTHON_ENV, vllm_command, vllm_python

from .conftest import REPO

GPU = REPO / "infra" / "gpu"


def _pins(name: str) -> dict[str, str]:
    lines = (GPU / f"requirements-{name}.txt").read_text().splitlines()
    return dict(line.split("==") for line in lines if line and not line.startswith("#"))


def test_vllm_starts_with_the_deployment_python_then_the_variable_then_the_project_venv(tmp_path, monkeypatch):
    model = ModelConfig(name="m", format="hf", source="org/m", deployment="d")
    plain = DeploymentConfig(name="d", kind="vllm")
    named = DeploymentConfig(name="d", kind="vllm", vllm={"python": "/opt/vllm/bin/python"})
    monkeypatch.delenv(VLLM_PYTHON_ENV, raising=False)
    monkeypatch.setattr(deployments, "VLLM_VENV", tmp_path / ".venv-vllm")
    assert vllm_python(plain) is None and vllm_command(model, plain, 1)[:2] == ["vllm", "serve"]
    (tmp_path / ".venv-vllm" / "bin").mkdir(parents=True)
    (tmp_path / ".venv-vllm" / "bin" / "python").write_text("")  # what make install-gpu builds
    venv = str(tmp_path / ".venv-vllm" / "bin" / "python")
    assert vllm_command(model, plain, 1)[:3] == [venv, "-m", "vllm.entrypoints.openai.api_server"]
    monkeypatch.setenv(VLLM_PYTHON_ENV, "/env/python")
    assert vllm_python(plain) == "/env/python" and vllm_python(named) == "/opt/vllm/bin/python"


def test_the_gpu_locks_pin_vllm_and_faiss_gpu_and_move_no_package_of_the_project_venv():
    vllm, gpu = _pins("vllm"), _pins("gpu")
    assert vllm["vllm"] == "0.33.0" and gpu["faiss-gpu"] == "1.15.1" and gpu["torch"] == "2.13.0"
    assert "faiss-cpu" not in gpu
    listed = subprocess.run([sys.executable, "-m", "pip", "list", "--format", "json"], capture_output=True,
                            text=True, check=True).stdout
    here = {p["name"].lower().replace("_", "-"): p["version"].split("+")[0] for p in json.loads(listed)}
    moved = {n: (here[n], v) for n, v in gpu.items() if n in here and here[n] != v}
    assert not moved  # (venv, lock): the GPU packages install beside the project's pins, not over them
    assert vllm["torch"] != gpu["torch"]  # why vLLM has its own venv


@pytest.mark.integration
@pytest.mark.skipif(os.environ.get("PERSEVAL_TEST_GPU_LOCKS") != "1",
                    reason="opt-in (2 minutes of the package index): make check-gpu, or PERSEVAL_TEST_GPU_LOCKS=1")
def test_both_gpu_locks_still_resolve_without_downloading_a_wheel():
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(GPU / "resolve.py")], capture_output=True, text=True, timeout=1500)
    print(proc.stdout, f"{time.monotonic() - t0:.0f} s")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.count("resolves to itself") == 2
