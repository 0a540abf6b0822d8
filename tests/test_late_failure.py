"""A run that stops after start-up (a model server that cannot start, a full disk, Prefect or Dask failing
to start) says in a few lines what failed, what was kept and the command that resumes; exit code 4, no
traceback on the terminal (it goes to a log file), and nothing already computed is removed."""
from __future__ import annotations

import errno
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from perseval_flows.failure import LATE_FAILURE_EXIT, TRACEBACK_ENV, failure_report, what_failed
from perseval.llm.settings import DeploymentConfig, ModelConfig
from perseval.experiment.config import load_config
from perseval.core.errors import DeploymentError
from perseval.llm.deployments import Deployment

from .conftest import CONFIGS, REPO, config_tree


def _not_gguf(tmp_path: Path) -> ModelConfig:
    """The shipped embedded model, its weights path an existing file that is not GGUF."""
    weights = tmp_path / "weights.gguf"
    weights.write_text("not a GGUF file\n")
    spec = yaml.safe_load((CONFIGS / "models" / "smollm2-135m.yaml").read_text())
    return ModelConfig(**{**spec, "source": str(weights)})


def test_an_embedded_server_on_non_gguf_weights_fails_at_once_naming_the_model_and_its_log(tmp_path):
    model = _not_gguf(tmp_path)
    dep = load_config(DeploymentConfig, CONFIGS / "deployments" / f"{model.deployment}.yaml")
    with pytest.raises(DeploymentError) as err:
        Deployment(model, dep, tmp_path / "logs").start()
    line = what_failed(err.value)
    assert line.startswith("model smollm2-135m (embedded deployment smollm2-135m-cpu): server exited with code")
    assert err.value.log_path and Path(err.value.log_path).is_file() and err.value.log_path in line
    assert "\n" not in line


def test_a_full_disk_is_named_as_such():
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "runs/run/abc/part-0.parquet")
    assert what_failed(full) == ("the disk is full (no space left on device) writing runs/run/abc/part-0.parquet: "
                                 "free space and run again")


def test_the_report_lists_what_was_kept_and_the_resume_command(tmp_path, monkeypatch):
    monkeypatch.delenv(TRACEBACK_ENV, raising=False)
    root = tmp_path / "runs"
    for stage, key in (("data", "d1"), ("index", "i1"), ("index", "i2")):
        (root / stage / key).mkdir(parents=True)
        (root / stage / key / "part-00000.parquet").write_bytes(b"x")
    (root / "run" / "r1").mkdir(parents=True)  # a run output that recorded its shard layout, no part yet
    (root / "run" / "r1" / "_shards.json").write_text('{"shard_size": 8}')
    try:
        raise DeploymentError("model m (vllm deployment v): server exited with code 1 during start-up\nlog tail")
    except DeploymentError as exc:
        lines = failure_report(exc, root, ["run", "configs/experiments/my exp.yaml", "--quiet"])
    assert lines[0] == "run stopped: model m (vllm deployment v): server exited with code 1 during start-up"
    assert lines[1] == f"kept: stage outputs finished so far stay under {root} (data 1, index 2); nothing is removed"
    assert lines[2] == "resume: perseval run 'configs/experiments/my exp.yaml' --quiet"
    log = Path(lines[3].removeprefix("traceback: "))
    assert log.parent == root / "logs" and "Traceback" in log.read_text() and len(lines) == 4


@pytest.mark.parametrize("command", ["run", "construct"])
def test_a_prefect_server_that_cannot_start_ends_the_run_in_a_few_lines(tmp_path, command):
    """`perseval run` (and `construct`, the same flow stopped early) end to end, failing at its first start-up
    step (the local Prefect server: its home is a file, so it cannot create its database). An output folder
    an earlier run finished stays."""
    work = tmp_path / "work"
    cfg = config_tree(work, "smollm2-tiny", 32)
    exp = {"name": "late", "backbones": ["smollm2-tiny"], "retrievers": ["minilm"], "output_root": "runs",
           "benchmarks": [{"name": "apeb", "sample": 1, "agents": ["apeb-no-history"]}]}
    (cfg / "experiments" / "late.yaml").write_text(yaml.safe_dump(exp))
    finished = work / "runs" / "data" / "earlier-key"
    finished.mkdir(parents=True)
    (finished / "part-0.parquet").write_bytes(b"kept")
    (tmp_path / "home-is-a-file").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_") and k != TRACEBACK_ENV}
    env.update(PYTHONPATH=str(REPO), PREFECT_HOME=str(tmp_path / "home-is-a-file"))
    argv = [command, "configs/experiments/late.yaml", *(["--quiet"] if command == "run" else [])]
    proc = subprocess.run([sys.executable, "-m", "perseval_flows.cli", *argv], cwd=work, env=env, capture_output=True,
                          text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == LATE_FAILURE_EXIT, out
    assert "Traceback" not in out and len(out.strip().splitlines()) <= 4, out
    assert "run stopped: the local Prefect server: server exited with code" in out
    assert "(data 1); nothing is removed" in out
    assert f"resume: {shlex.join(['perseval', *argv])}" in out
    assert (finished / "part-0.parquet").read_bytes() == b"kept"
    assert "Traceback" in next((work / "runs" / "logs").glob("perseval-run-failed-*.log")).read_text()


@pytest.mark.integration
def test_a_model_server_that_cannot_start_after_construct_and_index_keeps_them(tmp_path, prefect_api):
    """A real run whose backbone is a vLLM deployment launched with a python that has no vLLM: construct
    finishes, the serve stage fails; the message names the model, and the data and documents stay. (Run by
    hand through the CLI when written: exit 4 after 28 s, four lines, no traceback.)"""
    work = tmp_path / "work"
    cfg = config_tree(work, "smollm2-tiny", 32)
    (cfg / "models" / "novllm.yaml").write_text(yaml.safe_dump(
        {"name": "novllm", "format": "hf", "source": "org/no-such-model", "deployment": "novllm-vllm"}))
    (cfg / "deployments" / "novllm-vllm.yaml").write_text(yaml.safe_dump(
        {"name": "novllm-vllm", "kind": "vllm", "startup_timeout_s": 60, "vllm": {"python": sys.executable}}))
    exp = {"name": "late", "backbones": ["novllm"], "retrievers": ["minilm"], "output_root": "runs",
           "dask": {"n_workers": 1, "threads_per_worker": 1},
           "benchmarks": [{"name": "apeb", "sample": 1, "agents": ["apeb-no-history"]}]}
    (cfg / "experiments" / "late.yaml").write_text(yaml.safe_dump(exp))
    env = dict(os.environ, PYTHONPATH=str(REPO), PREFECT_API_URL=prefect_api)
    env.pop(TRACEBACK_ENV, None)
    argv = ["run", "configs/experiments/late.yaml", "--quiet"]
    proc = subprocess.run([sys.executable, "-m", "perseval_flows.cli", *argv], cwd=work, env=env, capture_output=True,
                          text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == LATE_FAILURE_EXIT, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert "run stopped: model novllm (vllm deployment novllm-vllm): server exited with code" in out
    assert f"resume: {shlex.join(['perseval', *argv])}" in out
    assert "(data 1, documents 1); nothing is removed" in out  # the agent retrieves nothing: no index
    for stage in ("data", "documents"):
        assert any((work / "runs" / stage).iterdir()), stage
