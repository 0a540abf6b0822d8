"""The infra/ examples are valid: Python compiles, YAML parses into the configs they are presets of, shell
scripts pass `bash -n`."""
from __future__ import annotations

import py_compile
import subprocess

import pytest
import yaml

from perseval.config import DeploymentConfig
from perseval.experiment import load_experiment

from .conftest import REPO

INFRA = REPO / "infra"


@pytest.mark.parametrize("path", sorted(INFRA.rglob("*.py")), ids=lambda p: p.name)
def test_python_examples_compile(path, tmp_path):
    py_compile.compile(str(path), cfile=str(tmp_path / "x.pyc"), doraise=True)


@pytest.mark.parametrize("path", sorted((INFRA / "vllm").glob("*.yaml")), ids=lambda p: p.name)
def test_vllm_presets_are_deployments(path):
    dep = DeploymentConfig.model_validate({"name": path.stem, **yaml.safe_load(path.read_text())})
    assert dep.kind == "vllm"


@pytest.mark.parametrize("path", sorted(INFRA.rglob("*.sh")), ids=lambda p: p.name)
def test_shell_scripts_parse(path):
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0


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
    assert "--config configs/experiments/iba_h200_bench.yaml --p1" in bench and f"--json {out}/bench.json" in bench
    assert not out.exists()  # a dry run only prints


def test_h200_bench_experiment_is_the_one_h200_setup():
    config = REPO / "configs" / "experiments" / "iba_h200_bench.yaml"
    assert str(config.relative_to(REPO)) in H200_SCRIPT.read_text()
    exp = load_experiment(config)
    (entry,) = exp.experiment.benchmarks
    assert (entry.name, entry.sample) == ("iba", 500)
    assert exp.experiment.backbones == ["qwen3-4b-instruct"]
    dep = exp.deployments["qwen3-4b-instruct"]
    assert (dep.name, dep.kind, dep.vllm.tensor_parallel_size) == ("qwen3-4b-vllm-1gpu", "vllm", 1)
    (retriever,) = exp.retrievers.values()
    assert retriever.name == "bge-m3" and retriever.params["index"]["device"] == "gpu"
