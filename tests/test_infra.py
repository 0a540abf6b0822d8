"""The infra/ examples do what they say: each vLLM preset launches vLLM with its own settings, and the
H200 benchmark script runs the benchmark on a GPU setup (vLLM backbone, FAISS on the GPU)."""
from __future__ import annotations

import subprocess

import pytest
import yaml

from perseval.llm.settings import DeploymentConfig, ModelConfig
from perseval.experiment.load import load_experiment
from perseval.llm.deployments import vllm_command

from .conftest import REPO
from perseval.experiment.load import experiment_file

INFRA = REPO / "infra"


def _flag(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


@pytest.mark.parametrize("path", sorted((INFRA / "vllm").glob("*.yaml")), ids=lambda p: p.name)
def test_each_vllm_preset_launches_vllm_with_its_settings(path):
    raw = yaml.safe_load(path.read_text())
    dep = DeploymentConfig.model_validate({"name": path.stem, **raw})
    cmd = vllm_command(ModelConfig(name="m", format="hf", source="org/m", deployment=path.stem), dep, 8000)
    v = raw.get("vllm", {})
    assert _flag(cmd, "--tensor-parallel-size") == str(v.get("tensor_parallel_size", 1))
    assert _flag(cmd, "--max-model-len") == str(raw.get("context_length", 4096))
    assert _flag(cmd, "--gpu-memory-utilization") == str(dep.vllm.gpu_memory_utilization)
    extra = v.get("extra_args", [])
    assert cmd[len(cmd) - len(extra):] == extra  # passed through last, in order


H200_SCRIPT = INFRA / "gpu" / "bench_h200.sh"


def test_h200_bench_dry_run_prints_the_benchmark_and_runs_nothing(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(["bash", str(H200_SCRIPT), "--dry-run", str(out)], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHON": "py-on-the-gpu-box"})
    assert proc.returncode == 0, proc.stderr
    commands = [line[2:] for line in proc.stdout.splitlines() if line.startswith("+ ")]
    assert commands[0].startswith("nvidia-smi")
    bench = commands[-1]
    assert bench.startswith("timeout 540 py-on-the-gpu-box scripts/bench_pipeline.py")
    assert "--config perseval/benchmarks/iba/configs/experiments/iba_h200_bench.yaml --p1" in bench and f"--json {out}/bench.json" in bench
    assert not out.exists()  # a dry run only prints


def test_the_h200_bench_runs_on_the_gpu():
    """The experiment the script names loads, and what it measures runs on GPUs: every backbone is served
    by vLLM and every dense index is built on the GPU (a CPU setting here would benchmark the CPU)."""
    config = experiment_file("iba_h200_bench")
    assert str(config.relative_to(REPO)) in H200_SCRIPT.read_text()
    exp = load_experiment(config)
    assert {exp.deployments[b].kind for b in exp.experiment.backbones} == {"vllm"}
    assert {r.params["index"]["device"] for r in exp.retrievers.values() if r.kind == "dense"} == {"gpu"}


def test_every_perseval_name_an_infra_script_imports_exists():
    """The Python inside infra/ shell scripts runs only on a GPU box: each name it imports from perseval must
    exist here (a module moved or a function renamed would otherwise fail there, mid-benchmark)."""
    import importlib
    import re

    found = []
    for path in sorted(INFRA.rglob("*")):
        if path.suffix in (".sh", ".py"):
            for module, names in re.findall(r"from (perseval[\w.]*) import ([\w, ]+)", path.read_text()):
                for name in (n.strip() for n in names.split(",")):
                    found.append((path.name, module, name))
                    assert hasattr(importlib.import_module(module), name), (path.name, module, name)
    assert ("bench_h200.sh", "perseval.experiment.load", "load_experiment") in found
